"""NodeResourcesBalancedAllocation: prefer nodes whose resources fill up evenly.

A node whose cpu is 90% requested but memory 10% strands the free memory; this scores such a
node lower: (1 - standard deviation of the requested fractions) * 100. As in kube-scheduler,
the fractions use plain requests (not the non-zero defaults NodeResourcesFit scores with), and
a pod requesting none of the resources skips the plugin, so best-effort pods are not all
drawn to the same node.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar, Final

from pydantic import field_validator

from batchsched.framework.cycle_state import CycleState, StateKey
from batchsched.framework.interfaces import MAX_NODE_SCORE
from batchsched.framework.registry import PluginArgs
from batchsched.framework.status import OK, SKIP, Status
from batchsched.model.pod import PodView
from batchsched.model.resources import CPU, MEMORY
from batchsched.plugins.resource_scoring import (
    DEFAULT_RESOURCES,
    ResourceSpec,
    allocatable_and_requested,
    balanced_score,
    pod_request,
)
from batchsched.snapshot import NodeInfo, Snapshot


class NodeResourcesBalancedAllocationArgs(PluginArgs):
    """kube defaults: cpu and memory. Weights are accepted for the config shape but must be 1."""

    resources: tuple[ResourceSpec, ...] = DEFAULT_RESOURCES

    @field_validator("resources")
    @classmethod
    def _unique_unweighted(cls, resources: tuple[ResourceSpec, ...]) -> tuple[ResourceSpec, ...]:
        if not resources:
            return DEFAULT_RESOURCES
        problems: list[str] = []
        seen: set[str] = set()
        for i, spec in enumerate(resources):
            if spec.name in seen:
                problems.append(f"[{i}].name: duplicate value {spec.name!r}")
            seen.add(spec.name)
            if spec.weight != 1:
                problems.append(f"[{i}].weight: {spec.weight}: must be 1")
        if problems:
            raise ValueError("; ".join(problems))
        return resources


# The name the plugin registry imports; the class keeps kube's config type name.
BalancedAllocationArgs = NodeResourcesBalancedAllocationArgs

# The pod's plain request per configured resource, in args order.
PRE_SCORE_KEY: Final[StateKey[tuple[int, ...]]] = StateKey(
    "PreScoreNodeResourcesBalancedAllocation"
)


class NodeResourcesBalancedAllocation:
    name: ClassVar[str] = "NodeResourcesBalancedAllocation"

    def __init__(self, args: NodeResourcesBalancedAllocationArgs | None = None) -> None:
        args = args or NodeResourcesBalancedAllocationArgs()
        self._resources = tuple(spec.name for spec in args.resources)
        self._cpu_memory = self._resources == (CPU, MEMORY)

    def pre_score(
        self, state: CycleState, pod: PodView, snapshot: Snapshot, nodes: Sequence[NodeInfo]
    ) -> Status:
        requests = tuple(pod_request(pod, name, non_zero=False) for name in self._resources)
        if not any(requests):
            return SKIP
        state.write(PRE_SCORE_KEY, requests)
        return OK

    def score(self, state: CycleState, pod: PodView, node: NodeInfo) -> int:
        requests = state.read(PRE_SCORE_KEY)
        if not self._cpu_memory:
            return self._score_any(node, requests)
        alloc_cpu = node.alloc_milli_cpu
        alloc_memory = node.alloc_memory
        if not (alloc_cpu and alloc_memory):
            return MAX_NODE_SCORE  # fewer than two fractions: no spread to penalize
        # The two-resource case of balanced_score, inlined for the hot loop (min() is slow).
        cpu = (node.req_milli_cpu + requests[0]) / alloc_cpu
        if cpu > 1.0:
            cpu = 1.0
        memory = (node.req_memory + requests[1]) / alloc_memory
        if memory > 1.0:
            memory = 1.0
        return int((1 - abs((cpu - memory) / 2)) * MAX_NODE_SCORE)

    def _score_any(self, node: NodeInfo, requests: Sequence[int]) -> int:
        requested = [0] * len(requests)
        allocatable = [0] * len(requests)
        for i, (name, request) in enumerate(zip(self._resources, requests, strict=True)):
            allocatable[i], requested[i] = allocatable_and_requested(
                node, name, request, non_zero=False
            )
        return balanced_score(requested, allocatable)
