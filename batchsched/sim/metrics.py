"""What a run measured: GPU allocation against arrived load, use over time, waiting times.

The allocation curve follows the paper's artifact: after every scheduling instant we note the
arrived GPU requests (all pods that arrived, placed or not) and the allocated GPU (fractions
counted), both as a percentage of the cluster's GPUs; the value at a whole arrived percent k is
the mean over the instants whose arrived percentage rounds to k. A percent no instant rounds to
(possible on small clusters) takes the state at that point, i.e. the last instant before it.

GPUs are counted wherever they are: `nvidia.com/gpu` (and shares of one, from the GPU ledger)
and, in a cluster with Dynamic Resource Allocation, the devices of its GPU DeviceClass
(`device_gpus.py`): one device is one GPU, allocated while a claim holds it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from batchsched.model.resources import NVIDIA_GPU
from batchsched.sim.device_gpus import DeviceGpus
from batchsched.sim.workload import SimPod, sim_pod
from batchsched.snapshot import NodeInfo, Snapshot
from gpu.fragmentation import FragmentationModel
from gpu.topology import MILLI_PER_GPU
from gpu.workload import Workload

CURVE_MAX_PCT: Final = 130
TIMELINE_POINTS: Final = 600


@dataclass(slots=True)
class _Bin:
    alloc: float = 0.0
    frag: float = 0.0
    count: int = 0


@dataclass(frozen=True, slots=True)
class Sample:
    """The cluster after one instant of the virtual clock."""

    time: float
    arrived_gpu_milli: int
    gpu_alloc_milli: int
    cpu_alloc_milli: int
    frag_milli: float
    waiting: int
    running: int


class FragTracker:
    """The cluster's fragmented milli-GPU (the GPU model's FGD measure, `gpu.fragmentation`),
    recomputed only for the nodes an instant touched. A node's GPU devices, where it has
    some, are its GPUs (its ledger, from the agent's topology, does not see claims)."""

    def __init__(
        self, snapshot: Snapshot, model: FragmentationModel, devices: DeviceGpus | None = None
    ) -> None:
        self.model = model
        self.devices = devices
        self._per_node: dict[str, float] = {}
        self.total = 0.0
        for info in snapshot.nodes:
            self.touch(info)

    def touch(self, info: NodeInfo) -> None:
        ledger = info.gpu
        free = self.devices.sorted_free(info.name) if self.devices is not None else None
        if free is None:
            if ledger is None:
                return
            free = ledger.sorted_free()
        value = self.model.value(
            ledger.model if ledger is not None else "",
            info.alloc_milli_cpu - info.req_milli_cpu,
            info.alloc_memory - info.req_memory,
            free,
        )
        self.total += value - self._per_node.get(info.name, 0.0)
        self._per_node[info.name] = value


@dataclass
class Recorder:
    """The simulator's observer: running totals, the curve bins, the timeline, waits."""

    snapshot: Snapshot
    target: Workload
    devices: DeviceGpus | None = None  # GPUs published as DRA devices, if any
    gpu_total_milli: int = 0
    cpu_total_milli: int = 0
    arrived_count: int = 0
    placed_count: int = 0
    running: int = 0
    arrived_gpu_milli: int = 0
    gpu_alloc_milli: int = 0
    cpu_alloc_milli: int = 0
    waits: list[float] = field(default_factory=list)
    samples: list[Sample] = field(default_factory=list)
    _bins: dict[int, _Bin] = field(default_factory=dict)
    _touched: dict[str, NodeInfo] = field(default_factory=dict)
    _frag: FragTracker | None = None

    def __post_init__(self) -> None:
        for info in self.snapshot.nodes:
            self.gpu_total_milli += info.alloc_scalar.get(NVIDIA_GPU, 0) * MILLI_PER_GPU
            self.cpu_total_milli += info.alloc_milli_cpu
            self.cpu_alloc_milli += info.req_milli_cpu
            for pod in info.pods.values():  # bound before the clock started
                self.running += 1
                self.gpu_alloc_milli += sim_pod(pod, 0.0, None).gpu_milli
        if self.devices is not None:
            self.gpu_total_milli += self.devices.total * MILLI_PER_GPU
            self.gpu_alloc_milli += self.devices.held * MILLI_PER_GPU
        model = FragmentationModel(self.target)
        self._frag = FragTracker(self.snapshot, model, self.devices)

    @property
    def frag_milli(self) -> float:
        return self._frag.total if self._frag is not None else 0.0

    def arrived(self, pod: SimPod, now: float) -> None:
        self.arrived_count += 1
        self.arrived_gpu_milli += pod.gpu_milli + pod.claim_gpus * MILLI_PER_GPU

    def placed(self, pod: SimPod, info: NodeInfo, now: float) -> None:
        self.placed_count += 1
        self.running += 1
        self.gpu_alloc_milli += pod.gpu_milli + self._devices_moved(pod, info)
        self.cpu_alloc_milli += pod.pod.requests.milli_cpu
        self.waits.append(now - pod.arrival)
        self._touched[info.name] = info

    def departed(self, pod: SimPod, info: NodeInfo, now: float) -> None:
        self.running -= 1
        self.gpu_alloc_milli += self._devices_moved(pod, info) - pod.gpu_milli
        self.cpu_alloc_milli -= pod.pod.requests.milli_cpu
        self._touched[info.name] = info

    def _devices_moved(self, pod: SimPod, info: NodeInfo) -> int:
        """Milli-GPU of DRA devices the pod's claims took or gave back on the node."""
        if self.devices is None or not pod.pod.resource_claims:
            return 0
        return self.devices.recount(info.name) * MILLI_PER_GPU

    def instant_done(self, now: float, waiting: int) -> None:
        if self._frag is not None:
            for info in self._touched.values():
                self._frag.touch(info)
        self._touched.clear()
        sample = Sample(
            now,
            self.arrived_gpu_milli,
            self.gpu_alloc_milli,
            self.cpu_alloc_milli,
            self.frag_milli,
            waiting,
            self.running,
        )
        self.samples.append(sample)
        if self.gpu_total_milli:
            k = round(100 * sample.arrived_gpu_milli / self.gpu_total_milli)
            if k <= CURVE_MAX_PCT:
                into = self._bins.setdefault(k, _Bin())
                into.alloc += self._pct(sample.gpu_alloc_milli)
                into.frag += self._pct(sample.frag_milli)
                into.count += 1

    def _pct(self, milli: float) -> float:
        return 100 * milli / self.gpu_total_milli if self.gpu_total_milli else 0.0

    def curve(self) -> list[dict[str, float]]:
        """GPU allocation and fragmented GPUs (% of all GPUs) at each whole arrived percent."""
        points = []
        alloc = frag = 0.0
        samples, i = self.samples, 0
        for k in range(CURVE_MAX_PCT + 1):
            got = self._bins.get(k)
            if got is not None:
                alloc, frag = got.alloc / got.count, got.frag / got.count
            # Arrived load only grows, so this walk is linear over the whole curve.
            while i < len(samples) and self._pct(samples[i].arrived_gpu_milli) < k - 0.5:
                if got is None:
                    alloc = self._pct(samples[i].gpu_alloc_milli)
                    frag = self._pct(samples[i].frag_milli)
                i += 1
            points.append(
                {"arrived_pct": k, "gpu_alloc_pct": round(alloc, 3), "frag_gpu_pct": round(frag, 3)}
            )
        return points

    def timeline(self, points: int = TIMELINE_POINTS) -> list[dict[str, float]]:
        """Allocation and queue length over virtual time, thinned to about `points` rows."""
        step = max(1, len(self.samples) // points)
        chosen: Sequence[Sample] = self.samples[::step]
        if self.samples and chosen[-1] is not self.samples[-1]:
            chosen = [*chosen, self.samples[-1]]
        cpu_total = self.cpu_total_milli or 1
        return [
            {
                "t": s.time,
                "gpu_alloc_pct": round(self._pct(s.gpu_alloc_milli), 3),
                "cpu_alloc_pct": round(100 * s.cpu_alloc_milli / cpu_total, 3),
                "frag_gpu_pct": round(self._pct(s.frag_milli), 3),
                "waiting": s.waiting,
                "running": s.running,
            }
            for s in chosen
        ]
