"""`batchsched gpus`: per node, the GPU model, GPUs used and free, the NVLink islands that
are wholly free, and fragmentation; cluster totals. Purely computational.

GPU use is the scheduler's own accounting (the snapshot's `GpuLedger`, the node agent's
measured topology where it published one). Fragmentation is FGD's (gpu/fragmentation.py):
the free GPU capacity the typical pod cannot use, in GPUs, for the shapes of the GPU pods on
the cluster now (running and pending; the openb default mix when there are none).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from batchsched.model.pod import PodView
from batchsched.node_info import NodeInfo
from batchsched.views.state import LiveState, snapshot_of
from gpu.fragmentation import FragmentationModel
from gpu.requests import InvalidGpuRequest, gpu_request
from gpu.topology import MILLI_PER_GPU
from gpu.workload import DEFAULT_WORKLOAD, PodShape, Workload, typical_workload


@dataclass(frozen=True, slots=True)
class GpuNodeRow:
    node: str
    model: str
    machine: str  # the reference machine matched ("" for a flat topology)
    allocatable: int  # healthy GPUs
    used: float  # GPUs held by pods (shares count their part)
    free: int  # GPUs with nothing on them
    islands: tuple[int, ...]  # whole-free GPUs in each NVLink island, largest first
    free_islands: int  # islands whose every GPU is free
    fragmentation: float  # GPUs the typical pod could not use


@dataclass(frozen=True, slots=True)
class GpuView:
    nodes: tuple[GpuNodeRow, ...]
    allocatable: int
    used: float
    free: int
    fragmentation: float


def workload_of(pods: Iterable[PodView]) -> Workload:
    """The typical GPU pod shapes of these pods; the default mix when none asks for a GPU."""
    shapes = []
    for pod in pods:
        try:
            request = gpu_request(pod)
        except InvalidGpuRequest:
            continue
        if request.count or request.milli:
            requests = pod.requests
            shapes.append(
                PodShape(
                    requests.milli_cpu,
                    requests.memory,
                    request.count,
                    request.milli,
                    request.models,
                )
            )
    return typical_workload(shapes) if shapes else DEFAULT_WORKLOAD


def gpu_view(state: LiveState) -> GpuView:
    snapshot = snapshot_of(state)
    model = FragmentationModel(workload_of(p for p in state.pods if not p.is_finished))
    rows = tuple(_row(info, model) for info in snapshot.nodes if info.gpu is not None)
    return GpuView(
        nodes=rows,
        allocatable=sum(r.allocatable for r in rows),
        used=sum(r.used for r in rows),
        free=sum(r.free for r in rows),
        fragmentation=sum(r.fragmentation for r in rows),
    )


def _row(info: NodeInfo, model: FragmentationModel) -> GpuNodeRow:
    ledger = info.gpu
    assert ledger is not None  # only GPU nodes come here
    topology = ledger.topology
    whole = [
        ledger.free[i] >= MILLI_PER_GPU and ledger.capacity[i] > 0 for i in range(len(ledger.free))
    ]
    per_island = [sum(1 for i in island if whole[i]) for island in topology.islands]
    free = info.free
    frag = model.value(ledger.model, free.milli_cpu, free.memory, ledger.sorted_free())
    return GpuNodeRow(
        node=info.name,
        model=ledger.model,
        machine=topology.machine,
        allocatable=sum(1 for c in ledger.capacity if c > 0),
        used=ledger.allocated_milli / MILLI_PER_GPU,
        free=sum(whole),
        islands=tuple(sorted(per_island, reverse=True)),
        free_islands=sum(
            1 for island, n in zip(topology.islands, per_island, strict=True) if n == len(island)
        ),
        fragmentation=frag / MILLI_PER_GPU,
    )
