"""Scoring arithmetic shared by NodeResourcesFit and NodeResourcesBalancedAllocation.

Purely computational: kube-scheduler's resource-allocation scorers over lists of per-resource
(requested, allocatable) pairs, with Go's integer semantics (truncating division, round half
away from zero) so our scores equal kube-scheduler's to the point.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Final

from pydantic import Field, field_validator

from batchsched.framework.interfaces import MAX_NODE_SCORE
from batchsched.framework.registry import PluginArgs
from batchsched.model.pod import PodView
from batchsched.model.resources import CPU, EPHEMERAL_STORAGE, MEMORY, PODS
from batchsched.snapshot import NodeInfo

# Shape points score 0..10 in the config API; kube-scheduler scales them to 0..100.
MAX_CUSTOM_PRIORITY_SCORE: Final = 10
MAX_UTILIZATION: Final = 100

# (requested, allocatable) per configured resource, in config order -> a node score.
Scorer = Callable[[Sequence[int], Sequence[int]], int]


class ResourceSpec(PluginArgs):
    """One resource a scorer looks at, with its weight (0 or unset means 1, as in kube)."""

    name: str = Field(min_length=1)
    weight: int = 1

    @field_validator("weight")
    @classmethod
    def _default_zero_weight(cls, weight: int) -> int:
        return weight or 1


DEFAULT_RESOURCES: Final = (ResourceSpec(name=CPU), ResourceSpec(name=MEMORY))


class UtilizationShapePoint(PluginArgs):
    utilization: int
    score: int


def check_shape(shape: Sequence[UtilizationShapePoint]) -> None:
    """kube-scheduler's shape rules; raises ValueError naming the offending point."""
    if not shape:
        raise ValueError("at least one point must be specified")
    problems: list[str] = []
    for i in range(1, len(shape)):
        if shape[i - 1].utilization >= shape[i].utilization:
            problems.append(f"[{i}].utilization: values must be sorted in increasing order")
            break
    for i, point in enumerate(shape):
        if not 0 <= point.utilization <= MAX_UTILIZATION:
            problems.append(f"[{i}].utilization: {point.utilization} not in valid range [0, 100]")
        if not 0 <= point.score <= MAX_CUSTOM_PRIORITY_SCORE:
            problems.append(f"[{i}].score: {point.score} not in valid range [0, 10]")
    if problems:
        raise ValueError("; ".join(problems))


def is_extended_resource(name: str) -> bool:
    """Extended resources live outside the kubernetes.io namespace (nvidia.com/gpu, not
    hugepages-2Mi or cpu); only they may be ignored by NodeResourcesFit's args."""
    return "/" in name and "kubernetes.io/" not in name and not name.startswith("requests.")


def pod_request(pod: PodView, name: str, non_zero: bool) -> int:
    """The pod's request for one scored resource; `non_zero` uses kube's defaults for cpu and
    memory a container leaves unset, so best-effort pods still count when spreading."""
    if name == CPU:
        return pod.non_zero_milli_cpu if non_zero else pod.requests.milli_cpu
    if name == MEMORY:
        return pod.non_zero_memory if non_zero else pod.requests.memory
    return pod.requests.get(name)


def allocatable_and_requested(
    node: NodeInfo, name: str, request: int, non_zero: bool
) -> tuple[int, int]:
    """(allocatable, requested including the pod) for one resource; (0, 0) drops the resource
    from the score, as kube does for extended resources the pod doesn't ask for."""
    if name == CPU:
        used = node.nz_milli_cpu if non_zero else node.req_milli_cpu
        return node.alloc_milli_cpu, used + request
    if name == MEMORY:
        used = node.nz_memory if non_zero else node.req_memory
        return node.alloc_memory, used + request
    if name == EPHEMERAL_STORAGE:
        return node.alloc_ephemeral, node.req_ephemeral + request
    if name == PODS or request == 0:
        return 0, 0
    return node.alloc_scalar.get(name, 0), node.req_scalar.get(name, 0) + request


def least_allocated_score(requested: int, allocatable: int) -> int:
    """Share of the resource left free, 0..100 (allocatable > 0)."""
    if requested > allocatable:
        return 0
    return (allocatable - requested) * MAX_NODE_SCORE // allocatable


def most_allocated_score(requested: int, allocatable: int) -> int:
    """Share of the resource in use, 0..100; non-zero defaults can push it past capacity."""
    return min(requested, allocatable) * MAX_NODE_SCORE // allocatable


def weighted_scorer(weights: Sequence[int], per_resource: Callable[[int, int], int]) -> Scorer:
    """Weighted mean (integer division) over resources the node has, as LeastAllocated and
    MostAllocated compute it."""

    def score(requested: Sequence[int], allocatable: Sequence[int]) -> int:
        total = weight_sum = 0
        for req, alloc, weight in zip(requested, allocatable, weights, strict=True):
            if alloc:
                total += per_resource(req, alloc) * weight
                weight_sum += weight
        return total // weight_sum if weight_sum else 0

    return score


def broken_linear(shape: Sequence[tuple[int, int]], utilization: int) -> int:
    """Piecewise-linear interpolation through (utilization, score) points, flat outside them;
    Go's truncating division, since a falling segment gives a negative numerator."""
    for i, (x, y) in enumerate(shape):
        if utilization <= x:
            if i == 0:
                return y
            x0, y0 = shape[i - 1]
            return y0 + _go_div((y - y0) * (utilization - x0), x - x0)
    return shape[-1][1]


def requested_to_capacity_ratio_scorer(
    weights: Sequence[int], shape: Sequence[UtilizationShapePoint]
) -> Scorer:
    """Score each resource on the user's utilization curve; average the positive ones, rounded.

    Resources scoring 0 drop out of the average entirely: kube-scheduler's quirk, kept so a
    node scores the same here as there.
    """
    scale = MAX_NODE_SCORE // MAX_CUSTOM_PRIORITY_SCORE
    points = tuple((p.utilization, p.score * scale) for p in shape)
    full = broken_linear(points, MAX_UTILIZATION)

    def score(requested: Sequence[int], allocatable: Sequence[int]) -> int:
        total = weight_sum = 0
        for req, alloc, weight in zip(requested, allocatable, weights, strict=True):
            if not alloc:
                continue
            value = full if req > alloc else broken_linear(points, req * MAX_UTILIZATION // alloc)
            if value > 0:
                total += value * weight
                weight_sum += weight
        # Round half up: both operands are non-negative, so this is Go's math.Round.
        return (2 * total + weight_sum) // (2 * weight_sum) if weight_sum else 0

    return score


def balanced_score(requested: Sequence[int], allocatable: Sequence[int]) -> int:
    """(1 - standard deviation of the used fractions) * 100, truncated; fractions cap at 1.

    Float operations in kube-scheduler's order, so the truncation lands on the same integer.
    """
    fractions = [
        min(req / alloc, 1.0) for req, alloc in zip(requested, allocatable, strict=True) if alloc
    ]
    std = 0.0
    if len(fractions) == 2:
        std = abs((fractions[0] - fractions[1]) / 2)
    elif len(fractions) > 2:
        std = _std_dev(fractions)
    return int((1 - std) * MAX_NODE_SCORE)


def _std_dev(values: Sequence[float]) -> float:
    # Plain left-to-right sums: builtin sum() compensates rounding (3.12+), Go does not.
    total = 0.0
    for value in values:
        total += value
    mean = total / len(values)
    squares = 0.0
    for value in values:
        squares += (value - mean) * (value - mean)
    return math.sqrt(squares / len(values))


def _go_div(a: int, b: int) -> int:
    """Integer division truncating toward zero, as Go's `/` on int64."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q
