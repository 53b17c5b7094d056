"""A PreFilter the simulator adds to runs that only measure decisions: the candidate nodes.

In a run that keeps no failure reasons, has no PostFilter and scores every node (the paper's
method), the runner only needs the nodes that pass every filter, in snapshot order. This
plugin hands it the nodes that pass the cheapest of the profile's checks (NodeResourcesFit's
cpu, memory and pod slot; GpuTopology's free GPUs of an allowed model), in a comprehension or
two, so that the filter chain runs only on nodes with a chance. It leaves out only nodes a
filter of the profile would reject, so no decision changes; the runner reports the left-out
nodes as "didn't satisfy plugin(s) [SimCandidates]", which nobody reads in such runs. Where
only some nodes are scored it would change decisions: the runner filters a narrowed list from
its first node, not from its rotating start index. Near a full cluster most GPU pods keep a
fraction of the nodes, and pods without GPUs those with cpu left.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from batchsched.framework.cycle_state import CycleState
from batchsched.framework.interfaces import PreFilterResult
from batchsched.framework.status import OK, Status
from batchsched.model.pod import PodView
from batchsched.plugins.gpu_topology import GpuTopology, nodes_with_room
from batchsched.plugins.node_resources_fit import NodeResourcesFit
from batchsched.snapshot import NodeInfo, Snapshot
from gpu.requests import InvalidGpuRequest, gpu_request


class SimCandidates:
    name: ClassVar[str] = "SimCandidates"

    def __init__(self, fit: bool, gpus: bool) -> None:
        self.fit = fit  # NodeResourcesFit filters in this profile
        self.gpus = gpus  # GpuTopology filters in this profile

    @classmethod
    def for_filters(cls, filter_names: set[str]) -> SimCandidates | None:
        """The plugin for a profile with these filters; None when it would narrow nothing."""
        fit, gpus = NodeResourcesFit.name in filter_names, GpuTopology.name in filter_names
        return cls(fit, gpus) if fit or gpus else None

    def pre_filter(
        self, state: CycleState, pod: PodView, snapshot: Snapshot
    ) -> tuple[PreFilterResult | None, Status]:
        nodes: Sequence[NodeInfo] = snapshot.nodes
        narrowed = False
        if self.gpus:
            try:
                request = gpu_request(pod)
            except InvalidGpuRequest:
                return None, OK  # GpuTopology's PreFilter reports it
            if request.wants_gpu:
                nodes, narrowed = nodes_with_room(nodes, request), True
        if self.fit:
            nodes, narrowed = _with_resources(nodes, pod), True
        if not narrowed:
            return None, OK
        # A hint: lone-pod batches, kept while nodes gain and lose room, ignore it.
        return PreFilterResult(frozenset(i.name for i in nodes), hint=True), OK


def _with_resources(nodes: Sequence[NodeInfo], pod: PodView) -> list[NodeInfo]:
    # NodeResourcesFit's rule: a zero request fits even an over-committed resource.
    cpu, memory = pod.requests.milli_cpu, pod.requests.memory
    return [
        info
        for info in nodes
        if len(info.pods) < info.alloc_pods
        and (cpu <= 0 or cpu <= info.alloc_milli_cpu - info.req_milli_cpu)
        and (memory <= 0 or memory <= info.alloc_memory - info.req_memory)
    ]
