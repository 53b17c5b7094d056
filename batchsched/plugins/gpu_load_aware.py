"""GpuLoadAware (reference plugin, off by default): score nodes by the measured load of their
GPUs, as Trimaran's TargetLoadPacking does for CPU.

The node agent reads each GPU's utilisation and memory in use through NVML and publishes them
with the node's topology (annotation `batchsched.io/gpu-load` on its NodeResourceTopology);
the snapshot carries them (`Snapshot.gpu_load`). A GPU's load is the weighted mean of its
utilisation and its memory in use, both in percent. A node's load, for a pod asking for k GPUs,
is the mean load of its k least loaded GPUs: those are the ones worth having.

With `targetUtilization` 0 the least loaded node scores best (spread work over idle GPUs).
With a target T, load up to T scores higher the closer it is to T and load above T falls
off, so nodes are filled to T before an idle one is woken up (TargetLoadPacking's curve).
A node without published load counts as `unknownLoad`. Allocation still decides what fits:
this plugin only orders nodes that already passed Filter. Pods without GPUs are skipped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import ClassVar, Final

from pydantic import Field

from batchsched.framework.cycle_state import CycleState, StateKey
from batchsched.framework.interfaces import MAX_NODE_SCORE
from batchsched.framework.registry import PluginArgs
from batchsched.framework.status import OK, SKIP, Status
from batchsched.model.pod import PodView
from batchsched.snapshot import NodeInfo, Snapshot
from gpu.requests import counted_request
from gpu.topology import GpuLoad


class GpuLoadAwareArgs(PluginArgs):
    utilization_weight: float = Field(default=1.0, ge=0)
    memory_weight: float = Field(default=1.0, ge=0)
    target_utilization: int = Field(default=0, ge=0, lt=100)
    unknown_load: int = Field(default=50, ge=0, le=100)


_LOADS: Final[StateKey[tuple[int, Mapping[str, tuple[GpuLoad, ...]]]]] = StateKey(
    "GpuLoadAware/loads"
)


class GpuLoadAware:
    name: ClassVar[str] = "GpuLoadAware"

    def __init__(self, args: GpuLoadAwareArgs | None = None) -> None:
        self.args = args or GpuLoadAwareArgs()

    def gpu_load(self, gpu: GpuLoad) -> float:
        """0..100: utilisation and memory in use, weighted."""
        a = self.args
        total = a.utilization_weight + a.memory_weight
        if total == 0:
            return 0.0
        memory = 100 * gpu.memory_used_fraction
        return (a.utilization_weight * gpu.utilization_pct + a.memory_weight * memory) / total

    def node_load(self, gpus: Sequence[GpuLoad] | None, wanted: int) -> float:
        if not gpus:
            return float(self.args.unknown_load)
        loads = sorted(self.gpu_load(g) for g in gpus)[: max(1, wanted)]
        return sum(loads) / len(loads)

    def score_of(self, load: float) -> int:
        target = self.args.target_utilization
        load = min(max(load, 0.0), 100.0)
        if target == 0:
            return round(MAX_NODE_SCORE - load)
        if load <= target:
            return round((MAX_NODE_SCORE - target) * load / target + target)
        return round(target * (100 - load) / (100 - target))

    def pre_score(
        self, state: CycleState, pod: PodView, snapshot: Snapshot, nodes: Sequence[NodeInfo]
    ) -> Status:
        request = counted_request(pod)
        if not request.wants_gpu:
            return SKIP
        state.write(_LOADS, (max(1, request.count), snapshot.gpu_load))
        return OK

    def score(self, state: CycleState, pod: PodView, node: NodeInfo) -> int:
        found = state.get(_LOADS)
        if found is None:
            return 0
        wanted, loads = found
        return self.score_of(self.node_load(loads.get(node.name), wanted))
