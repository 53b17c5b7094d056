"""NodeResourcesFit: the node must have room for the pod's requests; nodes score by allocation.

Filter follows kube-scheduler's fit check: one pod slot plus every requested resource must fit
in allocatable minus what the node's pods already request, and a node short of several
resources reports each. Score is the configured strategy (LeastAllocated spreads,
MostAllocated and RequestedToCapacityRatio pack) over kube's non-zero cpu/memory requests.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Final, Literal

from pydantic import field_validator, model_validator

from batchsched.framework.cycle_state import CycleState, StateKey
from batchsched.framework.interfaces import MAX_NODE_SCORE, PreFilterResult
from batchsched.framework.registry import PluginArgs
from batchsched.framework.status import OK, Status, unschedulable
from batchsched.model.pod import PodView
from batchsched.model.resources import CPU, MEMORY
from batchsched.plugins.resource_scoring import (
    DEFAULT_RESOURCES,
    ResourceSpec,
    Scorer,
    UtilizationShapePoint,
    allocatable_and_requested,
    check_shape,
    is_extended_resource,
    least_allocated_score,
    most_allocated_score,
    pod_request,
    requested_to_capacity_ratio_scorer,
    weighted_scorer,
)
from batchsched.snapshot import NodeInfo, Snapshot

LEAST_ALLOCATED: Final = "LeastAllocated"
MOST_ALLOCATED: Final = "MostAllocated"
REQUESTED_TO_CAPACITY_RATIO: Final = "RequestedToCapacityRatio"
TOO_MANY_PODS: Final = "Too many pods"
MAX_RESOURCE_WEIGHT: Final = 100

_NAME_PART: Final = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
_PREFIX: Final = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


class RequestedToCapacityRatioParam(PluginArgs):
    shape: tuple[UtilizationShapePoint, ...] = ()

    @field_validator("shape")
    @classmethod
    def _valid_shape(
        cls, shape: tuple[UtilizationShapePoint, ...]
    ) -> tuple[UtilizationShapePoint, ...]:
        check_shape(shape)
        return shape


class ScoringStrategy(PluginArgs):
    type: Literal["LeastAllocated", "MostAllocated", "RequestedToCapacityRatio"]
    resources: tuple[ResourceSpec, ...] = DEFAULT_RESOURCES
    requested_to_capacity_ratio: RequestedToCapacityRatioParam | None = None

    @field_validator("resources")
    @classmethod
    def _weights_in_range(cls, resources: tuple[ResourceSpec, ...]) -> tuple[ResourceSpec, ...]:
        if not resources:
            return DEFAULT_RESOURCES  # kube defaults an empty list to cpu and memory
        bad = [
            f"[{i}].weight: resource weight of {spec.name} not in valid range (0, 100]"
            for i, spec in enumerate(resources)
            if not 0 < spec.weight <= MAX_RESOURCE_WEIGHT
        ]
        if bad:
            raise ValueError("; ".join(bad))
        return resources

    @model_validator(mode="after")
    def _ratio_has_shape(self) -> ScoringStrategy:
        if self.type == REQUESTED_TO_CAPACITY_RATIO and self.requested_to_capacity_ratio is None:
            raise ValueError("requestedToCapacityRatio.shape: at least one point must be specified")
        return self


class NodeResourcesFitArgs(PluginArgs):
    """kube defaults: nothing ignored, LeastAllocated over cpu and memory, weight 1 each."""

    ignored_resources: tuple[str, ...] = ()
    ignored_resource_groups: tuple[str, ...] = ()
    scoring_strategy: ScoringStrategy = ScoringStrategy(type=LEAST_ALLOCATED)

    @field_validator("ignored_resources")
    @classmethod
    def _qualified_names(cls, names: tuple[str, ...]) -> tuple[str, ...]:
        _check_names(names, allow_prefix=True)
        return names

    @field_validator("ignored_resource_groups")
    @classmethod
    def _group_names(cls, groups: tuple[str, ...]) -> tuple[str, ...]:
        _check_names(groups, allow_prefix=False)
        return groups


def _check_names(names: Sequence[str], allow_prefix: bool) -> None:
    problems = []
    for i, name in enumerate(names):
        prefix, _, last = name.rpartition("/")
        if prefix and not allow_prefix:
            problems.append(f"[{i}]: resource group name can't contain '/': {name!r}")
        elif not _NAME_PART.match(last) or (prefix and not _valid_prefix(prefix)):
            problems.append(f"[{i}]: {name!r} is not a qualified resource name")
    if problems:
        raise ValueError("; ".join(problems))


def _valid_prefix(prefix: str) -> bool:
    return len(prefix) <= 253 and _PREFIX.match(prefix) is not None


@dataclass(frozen=True, slots=True)
class _PodRequest:
    """What Filter checks, computed once per pod: the reason strings come ready-made."""

    milli_cpu: int
    memory: int
    ephemeral: int
    scalar: tuple[tuple[str, int, str], ...]  # (name, amount, reason), sorted, none ignored


PRE_FILTER_KEY: Final[StateKey[_PodRequest]] = StateKey("PreFilterNodeResourcesFit")
# The pod's request per scored resource, in the order of the strategy's resources.
PRE_SCORE_KEY: Final[StateKey[tuple[int, ...]]] = StateKey("PreScoreNodeResourcesFit")


class NodeResourcesFit:
    name: ClassVar[str] = "NodeResourcesFit"

    def __init__(self, args: NodeResourcesFitArgs | None = None) -> None:
        args = args or NodeResourcesFitArgs()
        self._ignored = frozenset(args.ignored_resources)
        self._ignored_groups = frozenset(args.ignored_resource_groups)
        strategy = args.scoring_strategy
        self._resources = tuple(spec.name for spec in strategy.resources)
        weights = tuple(spec.weight for spec in strategy.resources)
        self._scorer = _strategy_scorer(strategy, weights)
        # The default profile's case, worth a dedicated path: Score runs per feasible node.
        fast = strategy.type == LEAST_ALLOCATED and self._resources == (CPU, MEMORY)
        self._least_cpu_memory = fast
        self._cpu_weight, self._memory_weight = weights if fast else (1, 1)
        self._weight_sum = self._cpu_weight + self._memory_weight
        self._equal_weights = self._cpu_weight == self._memory_weight
        self._rejections: dict[tuple[str, ...], Status] = {}

    def pre_filter(
        self, state: CycleState, pod: PodView, snapshot: Snapshot
    ) -> tuple[PreFilterResult | None, Status]:
        # Never SKIP: a pod requesting nothing still takes one of the node's pod slots.
        req = pod.requests
        scalar = tuple(
            (name, amount, f"Insufficient {name}")
            for name, amount in sorted(req.scalar.items())
            if amount > 0 and not self._is_ignored(name)
        )
        state.write(
            PRE_FILTER_KEY, _PodRequest(req.milli_cpu, req.memory, req.ephemeral_storage, scalar)
        )
        return None, OK

    def filter(self, state: CycleState, pod: PodView, node: NodeInfo) -> Status:
        req = state.read(PRE_FILTER_KEY)
        if (
            len(node.pods) < node.alloc_pods
            and req.milli_cpu <= node.alloc_milli_cpu - node.req_milli_cpu
            and req.memory <= node.alloc_memory - node.req_memory
            and req.ephemeral <= node.alloc_ephemeral - node.req_ephemeral
        ):
            if not req.scalar:
                return OK
            alloc = node.alloc_scalar
            used = node.req_scalar
            for name, amount, _ in req.scalar:
                if amount > alloc.get(name, 0) - used.get(name, 0):
                    break
            else:
                return OK
        reasons = _insufficient(req, node)
        if not reasons:
            return OK  # a zero request on an over-committed resource is not a misfit
        status = self._rejections.get(reasons)
        if status is None:
            # Unschedulable, not unresolvable: evicting lower-priority pods can make room.
            # Named already, so the runner's with_plugin() hands back this same object.
            status = unschedulable(*reasons).with_plugin(self.name)
            self._rejections[reasons] = status
        return status

    def pre_score(
        self, state: CycleState, pod: PodView, snapshot: Snapshot, nodes: Sequence[NodeInfo]
    ) -> Status:
        requests = tuple(pod_request(pod, name, non_zero=True) for name in self._resources)
        state.write(PRE_SCORE_KEY, requests)
        return OK

    def score(self, state: CycleState, pod: PodView, node: NodeInfo) -> int:
        requests = state.read(PRE_SCORE_KEY)
        alloc_cpu = node.alloc_milli_cpu
        alloc_memory = node.alloc_memory
        if not (self._least_cpu_memory and alloc_cpu and alloc_memory):
            requested, allocatable = self._usage(node, requests)
            return self._scorer(requested, allocatable)
        # LeastAllocated on cpu and memory, the default, inlined: Score runs per feasible node.
        free = alloc_cpu - node.nz_milli_cpu - requests[0]
        cpu = free * MAX_NODE_SCORE // alloc_cpu if free > 0 else 0
        free = alloc_memory - node.nz_memory - requests[1]
        memory = free * MAX_NODE_SCORE // alloc_memory if free > 0 else 0
        if self._equal_weights:
            return (cpu + memory) // 2
        return (cpu * self._cpu_weight + memory * self._memory_weight) // self._weight_sum

    def _usage(self, node: NodeInfo, requests: Sequence[int]) -> tuple[list[int], list[int]]:
        requested = [0] * len(requests)
        allocatable = [0] * len(requests)
        for i, (name, request) in enumerate(zip(self._resources, requests, strict=True)):
            allocatable[i], requested[i] = allocatable_and_requested(
                node, name, request, non_zero=True
            )
        return requested, allocatable

    def _is_ignored(self, name: str) -> bool:
        # kube lets args ignore extended resources only; cpu or hugepages are always checked.
        if not is_extended_resource(name):
            return False
        return name in self._ignored or name.split("/", 1)[0] in self._ignored_groups


def _strategy_scorer(strategy: ScoringStrategy, weights: Sequence[int]) -> Scorer:
    if strategy.type == MOST_ALLOCATED:
        return weighted_scorer(weights, most_allocated_score)
    if strategy.type == REQUESTED_TO_CAPACITY_RATIO:
        ratio = strategy.requested_to_capacity_ratio
        assert ratio is not None  # the args validator saw to it
        return requested_to_capacity_ratio_scorer(weights, ratio.shape)
    return weighted_scorer(weights, least_allocated_score)


def _insufficient(req: _PodRequest, node: NodeInfo) -> tuple[str, ...]:
    """Every reason the node can't take the pod, in kube's order (pods, cpu, memory, storage,
    then extended resources, sorted here where kube's map order is random)."""
    reasons: list[str] = []
    if len(node.pods) + 1 > node.alloc_pods:
        reasons.append(TOO_MANY_PODS)
    if req.milli_cpu > 0 and req.milli_cpu > node.alloc_milli_cpu - node.req_milli_cpu:
        reasons.append("Insufficient cpu")
    if req.memory > 0 and req.memory > node.alloc_memory - node.req_memory:
        reasons.append("Insufficient memory")
    if req.ephemeral > 0 and req.ephemeral > node.alloc_ephemeral - node.req_ephemeral:
        reasons.append("Insufficient ephemeral-storage")
    alloc = node.alloc_scalar
    used = node.req_scalar
    reasons.extend(
        reason
        for name, amount, reason in req.scalar
        if amount > alloc.get(name, 0) - used.get(name, 0)
    )
    return tuple(reasons)
