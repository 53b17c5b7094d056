"""One simulation from a cluster, a workload and a profile to measured results."""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from batchsched.cluster_file import ClusterState, load_cluster
from batchsched.dra.objects import DeviceClass, ResourceClaim, ResourceSlice
from batchsched.framework.profile import Profile
from batchsched.model.node import NodeView
from batchsched.model.pod import PodView
from batchsched.model.resources import NVIDIA_GPU
from batchsched.sim.device_gpus import DeviceGpus
from batchsched.sim.dra_cluster import GPU_DEVICE_CLASS
from batchsched.sim.engine import Simulator
from batchsched.sim.metrics import Recorder
from batchsched.sim.progress import Progress
from batchsched.sim.sampler import sample_to_target
from batchsched.sim.tenants import SimTenants
from batchsched.sim.trace import PodFactory, TracePod, read_nodes
from batchsched.sim.workload import SimPod, paper_workload, with_claim_gpus, yaml_workload
from batchsched.snapshot import Snapshot
from gpu.requests import gpu_request
from gpu.topology import MILLI_PER_GPU, NodeTopology
from gpu.workload import MIB, PodShape, Workload, typical_workload
from queues.model import QuotaPolicy

PAPER: Final = "paper"
REPLAY: Final = "replay"


@dataclass(frozen=True)
class Cluster:
    nodes: list[NodeView]
    running: list[PodView] = field(default_factory=list)  # bound before the clock starts
    namespace_labels: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    # Dynamic Resource Allocation (resource.k8s.io/v1), in the snapshot before the clock starts.
    device_classes: Sequence[DeviceClass] = ()
    resource_slices: Sequence[ResourceSlice] = ()
    resource_claims: Sequence[ResourceClaim] = ()
    topologies: Mapping[str, NodeTopology] = field(default_factory=dict)  # the agent's, by node
    gpu_device_class: str = GPU_DEVICE_CLASS  # its devices are GPUs to the metrics


def trace_cluster(path: Path) -> Cluster:
    return Cluster(read_nodes(path))


def state_cluster(state: ClusterState) -> Cluster:
    """The nodes, bound pods and DRA objects of cluster files."""
    running = [p for p in state.pods if p.node_name and not p.is_finished]
    return Cluster(
        state.nodes,
        running,
        state.namespace_labels,
        state.device_classes,
        state.resource_slices,
        state.resource_claims,
    )


def state_workload(state: ClusterState, gpu_device_class: str = GPU_DEVICE_CLASS) -> list[SimPod]:
    """The pending pods of cluster files, with the GPU devices their claims ask for."""
    pending = [p for p in state.pods if not p.node_name and not p.is_finished]
    return with_claim_gpus(yaml_workload(pending), state.resource_claims, gpu_device_class)


def yaml_cluster(path: Path) -> tuple[Cluster, list[SimPod]]:
    """Nodes, bound pods and DRA objects from Kubernetes YAML; its pending pods arrive as a
    workload."""
    state = load_cluster([path], devices=True)
    return state_cluster(state), state_workload(state)


def pod_shape(pod: SimPod) -> PodShape:
    """The pod as the fragmentation measure sees it."""
    request = gpu_request(pod.pod)
    requests = pod.pod.requests
    count = request.count + pod.claim_gpus
    return PodShape(requests.milli_cpu, requests.memory, count, request.milli, request.models)


def trace_shape(pod: TracePod) -> PodShape:
    models = frozenset(m for m in pod.gpu_spec.split("|") if m) or None
    whole = pod.num_gpu if not pod.is_share else 0
    return PodShape(
        pod.cpu_milli, pod.memory_mib * MIB, whole, pod.gpu_milli if pod.is_share else 0, models
    )


def target_of(pods: Sequence[SimPod]) -> Workload:
    """The typical pods of a workload: its most popular shapes covering 95 % of its pods."""
    return typical_workload(pod_shape(p) for p in pods)


def target_of_trace(rows: Sequence[TracePod]) -> Workload:
    return typical_workload(trace_shape(row) for row in rows)


@dataclass
class Outcome:
    method: str
    seed: int
    inflation: float | None
    recorder: Recorder
    simulator: Simulator
    sim_s: float
    pods: int
    tenants: SimTenants | None = None  # with a quota file

    @property
    def gpus(self) -> int:
        return self.recorder.gpu_total_milli // MILLI_PER_GPU

    def at(self, arrived_pct: int) -> Mapping[str, float] | None:
        """The curve point at a whole arrived percent, if the run got that far."""
        rec = self.recorder
        reached = 100 * rec.arrived_gpu_milli >= (arrived_pct - 0.5) * rec.gpu_total_milli
        return rec.curve()[arrived_pct] if rec.gpu_total_milli and reached else None

    def summary(self) -> dict[str, object]:
        rec, sim = self.recorder, self.simulator
        at_100, at_130 = self.at(100), self.at(130)
        return {
            "method": self.method,
            "seed": self.seed,
            "inflation": self.inflation,
            "profile": sim.profile.describe()["score"],
            "nodes": len(sim.snapshot),
            "gpus": self.gpus,
            "dra_gpus": rec.devices.total if rec.devices is not None else 0,
            "pods_arrived": rec.arrived_count,
            "pods_placed": rec.placed_count,
            "pods_waiting": sim.waiting,
            "pods_ignored": len(sim.ignored),
            "scheduling_cycles": sim.attempts,
            "pods_known_unfit": sim.known_unfit,
            "arrived_gpu_pct": _pct(rec.arrived_gpu_milli, rec.gpu_total_milli),
            "gpu_alloc_pct_end": _pct(rec.gpu_alloc_milli, rec.gpu_total_milli),
            "gpu_alloc_pct_at_100": at_100["gpu_alloc_pct"] if at_100 else None,
            "gpu_alloc_pct_at_130": at_130["gpu_alloc_pct"] if at_130 else None,
            "frag_gpu_pct_at_130": at_130["frag_gpu_pct"] if at_130 else None,
            "wait_s": wait_stats(rec.waits),
            "sim_s": round(self.sim_s, 3),
            "pods_per_s": round(self.pods / self.sim_s, 1) if self.sim_s else None,
            **(self.tenants.totals() if self.tenants is not None else {}),
        }

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"gpu_total": self.gpus, "curve": self.recorder.curve()}
        out["summary"] = self.summary()
        if self.method != PAPER:
            out["timeline"] = self.recorder.timeline()
        return out


def _pct(part: float, whole: float) -> float | None:
    return round(100 * part / whole, 3) if whole else None


def wait_stats(waits: Sequence[float]) -> dict[str, float | int | None]:
    """Nearest-rank percentiles of the waits of the pods that were placed."""
    if not waits:
        return {"count": 0, "mean": None, "p50": None, "p90": None, "p99": None, "max": None}
    ordered = sorted(waits)

    def rank(q: float) -> float:
        return ordered[max(math.ceil(q * len(ordered)) - 1, 0)]

    return {
        "count": len(ordered),
        "mean": round(sum(ordered) / len(ordered), 3),
        "p50": rank(0.5),
        "p90": rank(0.9),
        "p99": rank(0.99),
        "max": ordered[-1],
    }


def simulate(
    cluster: Cluster,
    pods: Sequence[SimPod],
    profile: Profile,
    *,
    seed: int,
    target: Workload,
    method: str,
    inflation: float | None = None,
    percentage: int | None = None,
    show_progress: bool = True,
    record_reasons: bool = True,
    quota: QuotaPolicy | None = None,
) -> Outcome:
    """Replay `pods` on `cluster` through `profile`, one scheduling cycle per pod attempt.
    `quota`: tenant queues, quota admission and fair share, as the live scheduler's."""
    if percentage is not None:
        profile = dataclasses.replace(profile, percentage_of_nodes_to_score=percentage)
    snapshot = cluster_snapshot(cluster)
    devices = None
    if cluster.resource_slices:
        devices = DeviceGpus(snapshot.dra, snapshot.nodes, cluster.gpu_device_class)
    recorder = Recorder(snapshot, target, devices)
    progress = Progress(len(pods), f"simulate ({method})", enabled=show_progress)
    tenants = None
    if quota is not None:
        tenants = SimTenants(quota, profile.scheduler_name, snapshot, cluster.running)
    simulator = Simulator(
        snapshot,
        profile,
        recorder,
        seed=seed,
        progress=progress,
        record_reasons=record_reasons,
        tenants=tenants,
    )
    start = time.perf_counter()
    simulator.run(pods)
    elapsed = time.perf_counter() - start
    progress.close()
    return Outcome(method, seed, inflation, recorder, simulator, elapsed, len(pods), tenants)


def cluster_snapshot(cluster: Cluster) -> Snapshot:
    """The snapshot the run starts from: nodes, bound pods, the agent's GPU topologies and the
    DRA objects (as `batchsched place` loads them)."""
    snapshot = Snapshot(cluster.nodes, cluster.running, cluster.namespace_labels)
    for name, topology in cluster.topologies.items():
        snapshot.set_measured_topology(name, topology)
    snapshot.dra.load(cluster.device_classes, cluster.resource_slices, cluster.resource_claims)
    return snapshot


PAPER_PERCENTAGE: Final = 100  # the paper's simulator scores every feasible node


def paper_pods(
    trace: Sequence[TracePod],
    nodes: Sequence[NodeView],
    inflation: float,
    seed: int,
    scheduler_name: str,
) -> list[SimPod]:
    """The paper's workload for this cluster: sampled until inflation x its GPU capacity."""
    capacity = sum(n.allocatable.scalar.get(NVIDIA_GPU, 0) for n in nodes) * MILLI_PER_GPU
    sampled = sample_to_target(trace, capacity, inflation, seed)
    return paper_workload(sampled, PodFactory(scheduler_name))


def run_paper(
    nodes: Sequence[NodeView],
    trace: Sequence[TracePod],
    profile: Profile,
    *,
    seed: int,
    inflation: float = 1.3,
    percentage: int = PAPER_PERCENTAGE,
    show_progress: bool = False,
) -> Outcome:
    """Weng et al.'s method: the sampled pods one at a time on `nodes`, none leaving."""
    pods = paper_pods(trace, nodes, inflation, seed, profile.scheduler_name)
    return simulate(
        Cluster(list(nodes)),
        pods,
        profile,
        seed=seed,
        target=target_of_trace(trace),
        method=PAPER,
        inflation=inflation,
        percentage=percentage,
        show_progress=show_progress,
        record_reasons=False,
    )
