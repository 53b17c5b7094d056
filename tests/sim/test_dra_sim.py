"""The simulator on a cluster whose GPUs are DRA devices: the same workload as nvidia.com/gpu and
as claims, the GPU sets the topology model picks, claims bound and released, metrics."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest

from batchsched.config import default_config
from batchsched.dra.device import DeviceId
from batchsched.dra.state import DraState
from batchsched.dra.templates import template_claim
from batchsched.framework.profile import Profile
from batchsched.model.node import NodeView
from batchsched.sim.command import SimulateRequest, choose_profile, plan, read_inputs
from batchsched.sim.device_gpus import DeviceGpus
from batchsched.sim.dra_cluster import GPU_DEVICE_CLASS, as_dra_cluster, gpu_device_class
from batchsched.sim.engine import Simulator, unfit_key
from batchsched.sim.generator import GeneratorError, GeneratorSpec, claim_spec, generate
from batchsched.sim.metrics import Recorder, Sample
from batchsched.sim.run import Cluster, Outcome, cluster_snapshot, simulate
from batchsched.sim.trace import trace_node
from batchsched.sim.workload import SimPod, sim_pod
from batchsched.snapshot import NodeInfo
from gpu.workload import PodShape, Workload
from tests.builders import make_pod

NODES_CSV = (
    "sn,cpu_milli,memory_mib,gpu,model\n"
    "big-0,128000,1048576,8,G2\n"
    "big-1,128000,1048576,8,G2\n"
    "small-0,64000,524288,4,V100M16\n"
    "small-1,64000,524288,4,V100M16\n"
)


def profile() -> Profile:
    return default_config().build_profiles()["gpu-scheduler"]


def run_generated(nodes: Path, spec: str, gpus_as: str) -> Outcome:
    """What `batchsched simulate --nodes <csv> --generate <spec>,gpus_as=<...>` runs."""
    req = SimulateRequest(nodes=nodes, generate=f"{spec},gpus_as={gpus_as}", quiet=True)
    chosen = choose_profile(None)
    inputs = read_inputs(req)
    method, pods, target = plan(req, inputs, chosen)
    return simulate(
        inputs.cluster, pods, chosen, seed=req.seed, target=target, method=method,
        show_progress=False,
    )  # fmt: skip


@pytest.fixture
def nodes_csv(tmp_path: Path) -> Path:
    path = tmp_path / "nodes.csv"
    path.write_text(NODES_CSV)
    return path


def curve(outcome: Outcome) -> list[tuple[float, int, int, int, int, float]]:
    return [
        (s.time, s.arrived_gpu_milli, s.gpu_alloc_milli, s.waiting, s.running, s.frag_milli)
        for s in outcome.recorder.samples
    ]


# The same workload both ways


def test_two_gpu_pods_place_alike_as_nvidia_gpu_and_as_claims(nodes_csv: Path) -> None:
    """Pods of two GPUs on nodes of eight and four: a pod fits exactly when two GPUs are free
    somewhere, whichever nodes the scores chose, so both runs must match instant by instant."""
    spec = "jobs=60,gang=1-2,gpus=2,share=0,tenants=2,runtime=60-600,interval=10"
    extended = run_generated(nodes_csv, spec, "nvidia.com/gpu")
    dra = run_generated(nodes_csv, spec, "dra")
    assert (extended.gpus, dra.gpus, dra.summary()["dra_gpus"]) == (24, 24, 24)
    assert extended.summary()["dra_gpus"] == 0
    assert dra.recorder.placed_count == extended.recorder.placed_count > 60
    assert max(s.waiting for s in dra.recorder.samples) > 0  # the cluster filled up
    assert max(s.gpu_alloc_milli for s in dra.recorder.samples) == 24_000  # every GPU in use
    assert curve(dra) == curve(extended)
    assert dra.recorder.waits == extended.recorder.waits


def test_a_mixed_workload_places_every_pod_both_ways_and_fills_the_cluster(
    nodes_csv: Path,
) -> None:
    spec = "jobs=40,gang=1-1,gpus=1|2|4|8,share=0,tenants=1,runtime=100-900,interval=5"
    extended = run_generated(nodes_csv, spec, "nvidia.com/gpu")
    dra = run_generated(nodes_csv, spec, "dra")
    for outcome in (extended, dra):
        rec = outcome.recorder
        assert rec.placed_count == rec.arrived_count == 40 and outcome.simulator.waiting == 0
        assert max(s.gpu_alloc_milli for s in rec.samples) == 24_000
        assert rec.gpu_alloc_milli == 0  # every pod left, every claim gave its GPUs back
    assert dra.recorder.arrived_gpu_milli == extended.recorder.arrived_gpu_milli


@pytest.mark.parametrize(
    ("product", "sizes"),
    [
        ("NVIDIA-L40S", [1, 2, 1, 2, 1]),
        ("NVIDIA-L40S", [2, 1, 4, 1]),
        ("NVIDIA-A100-SXM4-80GB", [3, 1, 2, 2]),
    ],
    ids=[
        "an 8-GPU PCIe server fills switch by switch",
        "four GPUs take a whole socket",
        "a DGX A100 packs its NVSwitch",
    ],
)
def test_a_claim_gets_the_gpus_the_ledger_would_grant(product: str, sizes: list[int]) -> None:
    """The agent's topology joins the devices (by PCI bus ID): a claim's set is the one the
    GPU model picks for an nvidia.com/gpu pod of the same size."""
    node = trace_node("n", 256_000, 2_097_152, 8, product)
    extended_pods, dra_pods = _pods_of_sizes(sizes), _pods_of_sizes(sizes, dra=True)
    extended = Simulator(cluster_snapshot(Cluster([node])), profile(), _Checker(), seed=1)
    extended.run(extended_pods)
    checker = _Checker()
    dra = Simulator(cluster_snapshot(dra_cluster(node)), profile(), checker, seed=1)
    checker.dra = dra.snapshot.dra
    dra.run(dra_pods)
    granted = {p.pod.name: sorted(i for i, _ in extended.snapshot.gpu_grants(p.pod.uid))
               for p in extended_pods}  # fmt: skip
    assert checker.devices == {name: [f"gpu-{i}" for i in ids] for name, ids in granted.items()}


def _pods_of_sizes(sizes: list[int], dra: bool = False) -> list[SimPod]:
    """One pod per size, arriving a second apart, never leaving."""
    pods = []
    for i, size in enumerate(sizes):
        builder = make_pod(f"p{i}").cpu("1")
        if not dra:
            pods.append(sim_pod(builder.gpus(size).view(), float(i), None))
            continue
        entry = {"name": "gpus", "resourceClaimTemplateName": f"gpu-{size}"}
        made = {"name": "gpus", "resourceClaimName": f"p{i}-gpus"}
        view = (
            builder.set("spec.resourceClaims", [entry])
            .set("status.resourceClaimStatuses", [made]).view()
        )  # fmt: skip
        claim = template_claim(view, view.resource_claims[0], claim_spec(size))
        pods.append(SimPod(view, float(i), None, 0, (claim,), size))
    return pods


# Claims bound at placement, released at departure


@dataclass
class _Checker:
    """An observer that checks, after every instant, that no device is held by two claims,
    and remembers which devices each pod's claims got and who held each device."""

    dra: DraState | None = None
    devices: dict[str, list[str]] = field(default_factory=dict)
    holders: dict[DeviceId, set[str]] = field(default_factory=dict)
    instants: int = 0

    def arrived(self, pod: SimPod, now: float) -> None:
        pass

    def placed(self, pod: SimPod, info: NodeInfo, now: float) -> None:
        if self.dra is None or not pod.pod.resource_claims:
            return
        [key] = [f"{pod.pod.namespace}/{pod.pod.claim_statuses['gpus']}"]
        claim = self.dra.claims[key]
        assert claim.allocation is not None and claim.reserved_for_pod(pod.pod.uid)
        assert key not in self.dra.assumed  # PreBind's write replaced the assumed allocation
        ids = [d.id for d in claim.allocation.devices]
        self.devices[pod.pod.name] = sorted((i.rsplit("/", 1)[1] for i in ids), key=_number)
        for device in ids:
            self.holders.setdefault(device, set()).add(pod.pod.name)

    def departed(self, pod: SimPod, info: NodeInfo, now: float) -> None:
        pass

    def instant_done(self, now: float, waiting: int) -> None:
        self.instants += 1
        if self.dra is None:
            return
        held: list[DeviceId] = []
        for claim in self.dra.claims.values():
            if claim.allocation is not None:
                held.extend(d.id for d in claim.allocation.devices)
        assert len(held) == len(set(held)), "a device is held by two claims"
        assert set(held) == set(self.dra.in_use)


def _number(name: str) -> int:
    return int(name.rsplit("-", 1)[1])


def test_departing_pods_give_their_devices_back_to_the_pods_after_them(nodes_csv: Path) -> None:
    req = SimulateRequest(
        nodes=nodes_csv,
        generate="jobs=50,gang=1-3,gpus=1|2|4,share=0,runtime=50-500,interval=5,gpus_as=dra",
    )
    inputs = read_inputs(req)
    checker = _Checker()
    sim = Simulator(cluster_snapshot(inputs.cluster), profile(), checker, seed=1)
    checker.dra = sim.snapshot.dra
    sim.run(inputs.pods)
    assert sim.waiting == 0 and len(checker.devices) == len(inputs.pods)
    assert any(len(pods) > 1 for pods in checker.holders.values())  # devices were reused
    dra = sim.snapshot.dra
    # Every claim was the pod's own (from a template): deleted with it, nothing held.
    assert (dra.claims, dict(dra.in_use), dra.assumed) == ({}, {}, {})


def test_the_metrics_count_claimed_devices_as_allocated_gpus(nodes_csv: Path) -> None:
    outcome = run_generated(nodes_csv, "jobs=30,gang=1-1,gpus=4,share=0,interval=1", "dra")
    samples: list[Sample] = outcome.recorder.samples
    # Six 4-GPU pods fill the 24 GPUs; arrived load counts what the claims ask for.
    assert samples[5].arrived_gpu_milli == samples[5].gpu_alloc_milli == 24_000
    assert samples[6].gpu_alloc_milli == 24_000 and samples[6].waiting == 1
    assert outcome.summary()["arrived_gpu_pct"] == 500.0
    full = outcome.at(100)
    assert full is not None and full["gpu_alloc_pct"] == 100.0
    assert full["frag_gpu_pct"] == 0.0  # a full cluster strands no GPU


def test_fragmentation_reads_which_devices_claims_hold() -> None:
    """Three of four GPUs taken by one-GPU pods strand the fourth for a workload of two-GPU
    pods, whether the pods took nvidia.com/gpu or claims (the node's ledger, from the agent's
    topology, sees no claim: the devices say what is free)."""
    node = trace_node("n", 64_000, 262_144, 4, "T4")
    two_gpus = Workload(((PodShape(8000, 2**30, 2, 0, None), 1.0),))
    frag = []
    for cluster, dra in ((Cluster([node]), False), (dra_cluster(node), True)):
        snapshot = cluster_snapshot(cluster)
        devices = DeviceGpus(snapshot.dra, snapshot.nodes, GPU_DEVICE_CLASS) if dra else None
        recorder = Recorder(snapshot, two_gpus, devices)
        Simulator(snapshot, profile(), recorder, seed=1).run(_pods_of_sizes([1, 1, 1], dra))
        frag.append(recorder.frag_milli)
        assert recorder.gpu_alloc_milli == 3000 and recorder.gpu_total_milli == 4000
    assert frag == [1000.0, 1000.0]


# What a DRA pod's shape is to the simulator's shortcuts


def dra_cluster(*nodes: NodeView) -> Cluster:
    found = as_dra_cluster(nodes)
    return Cluster(found.nodes, device_classes=[gpu_device_class()],
                   resource_slices=found.slices, topologies=found.topologies)  # fmt: skip


def test_a_departure_leaving_too_few_free_devices_does_not_retry_a_claim_pod() -> None:
    holder, waiter = _pods_of_sizes([2, 2], dra=True)
    holder = replace(holder, runtime=100.0)
    cpu_job = sim_pod(make_pod("cpu-job").cpu("1").view(), 0.0, 5.0)
    sim = Simulator(cluster_snapshot(dra_cluster(trace_node("a", 8000, 65536, 2, "T4"))),
                    profile(), _Checker(), seed=1)  # fmt: skip
    sim.run([holder, cpu_job, waiter])
    # holder, cpu-job, waiter at 1, and waiter again only when holder's GPUs free at 100:
    # cpu-job leaving at 5 frees no device.
    assert sim.attempts == 4 and sim.waiting == 0


def _claim_pod(name: str, template: str) -> SimPod:
    view = (
        make_pod(name).cpu("1")
        .set("spec.resourceClaims", [{"name": "gpus", "resourceClaimTemplateName": template}])
        .view()
    )  # fmt: skip
    return SimPod(view, 0.0)


def test_pods_asking_alike_through_templates_share_an_unfit_key() -> None:
    a, b = _claim_pod("a", "gpu-2").pod, _claim_pod("b", "gpu-2").pod
    other = _claim_pod("c", "gpu-4").pod
    assert unfit_key(a) is not None and unfit_key(a) == unfit_key(b) != unfit_key(other)
    plain = make_pod("a").cpu("1").view()
    assert unfit_key(plain) != unfit_key(a)


def test_a_pod_naming_a_claim_has_no_unfit_key() -> None:
    """Another pod may allocate the claim first, after which this pod fits where it is."""
    shared = make_pod("s").cpu("1").set(
        "spec.resourceClaims", [{"name": "gpu", "resourceClaimName": "shared"}]
    )  # fmt: skip
    assert unfit_key(shared.view()) is None


# The generator's DRA mode


def test_the_same_seed_draws_the_same_jobs_either_way() -> None:
    spec = "jobs=20,gang=1-3,gpus=1|2|4|8,share=0"
    extended = generate(GeneratorSpec.parse(spec), seed=7)
    dra = generate(GeneratorSpec.parse(f"{spec},gpus_as=dra"), seed=7)
    assert [(p.pod.name, p.arrival, p.runtime) for p in extended] == [
        (p.pod.name, p.arrival, p.runtime) for p in dra
    ]
    assert [p.gpu_milli for p in extended] == [p.claim_gpus * 1000 for p in dra]
    first = dra[0]
    [claim] = first.claims
    assert first.pod.requests.scalar == {} and first.gpu_milli == 0
    assert dict(first.pod.claim_statuses) == {"gpus": claim.name}
    assert claim.owner_uid == first.pod.uid and claim.allocation is None
    [request] = claim.requests
    assert request.choices[0].device_class == GPU_DEVICE_CLASS
    assert request.choices[0].count == first.claim_gpus


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("gpus_as=dra", "share=0.2 asks for shares of one"),
        ("gpus_as=mig", "expected one of nvidia.com/gpu, dra, got 'mig'"),
    ],
    ids=["a share cannot be asked through a claim", "an unknown mode is named"],
)
def test_the_generator_refuses_what_a_claim_cannot_ask(spec: str, message: str) -> None:
    with pytest.raises(GeneratorError, match=message):
        GeneratorSpec.parse(spec)


def test_a_dra_cluster_publishes_each_nodes_gpus_as_nvidias_driver_does() -> None:
    nodes = [trace_node("g", 64_000, 262_144, 4, "NVIDIA-L4"), trace_node("c", 8000, 1024, 0, "")]
    found = as_dra_cluster(nodes)
    assert [n.allocatable.scalar for n in found.nodes] == [{}, {}]
    [published] = found.slices
    assert (published.driver, published.pool, published.node_name) == ("gpu.nvidia.com", "g", "g")
    assert [d.name for d in published.devices] == ["gpu-0", "gpu-1", "gpu-2", "gpu-3"]
    first = published.devices[0].attributes
    assert first["gpu.nvidia.com/type"] == "gpu"
    assert first["gpu.nvidia.com/productName"] == "NVIDIA L4"
    assert str(first["gpu.nvidia.com/uuid"]).startswith("GPU-")
    assert first["gpu.nvidia.com/pcieBusID"] == "00000000:01:00.0"
    assert "resource.kubernetes.io/pcieRoot" in first
    assert set(found.topologies) == {"g"}
