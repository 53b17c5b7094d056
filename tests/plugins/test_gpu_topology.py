"""GpuTopology: GPU-aware Filter reasons, set quality and fragmentation in Score, Reserve."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from batchsched.framework.cycle_state import CycleState
from batchsched.framework.registry import assemble_profile
from batchsched.framework.runner import ProfileRunner
from batchsched.framework.status import OK, Code
from batchsched.plugins.gpu_scoring import fragmentation_report, rank_normalize
from batchsched.plugins.gpu_topology import (
    NO_CONNECTED_SET,
    NO_SHARE_ROOM,
    NO_WHOLE_GPUS,
    WRONG_MODEL,
    GpuTopology,
)
from batchsched.plugins.gpu_topology_args import GpuTopologyArgs, TypicalPod
from batchsched.plugins.registry import DEFAULT_PLUGINS, default_registry
from batchsched.snapshot import Snapshot
from tests.builders import NodeBuilder, PodBuilder, make_node, make_pod, snapshot_of

SHARE = "batchsched.io/gpu-milli"
MODELS = "batchsched.io/gpu-models"
H100 = "NVIDIA-H100-80GB-HBM3"
L40S = "NVIDIA-L40S"
PROFILE = assemble_profile(
    default_registry(), "gpu-scheduler", DEFAULT_PLUGINS, {}, percentage_of_nodes_to_score=100
)


def gpu_node(name: str, product: str = "G2", count: int = 8) -> NodeBuilder:
    return (
        make_node(name)
        .cpu("96")
        .memory("512Gi")
        .gpus(count)
        .label("nvidia.com/gpu.product", product)
    )


def share(name: str, milli: int) -> PodBuilder:
    return make_pod(name).cpu("2").memory("4Gi").annotation(SHARE, str(milli))


def run_filter(pod: PodBuilder, snap: Snapshot, node: str = "n1") -> tuple[Code, str]:
    plugin = GpuTopology()
    state = CycleState()
    view = pod.view()
    _, status = plugin.pre_filter(state, view, snap)
    assert status is OK
    info = snap.get(node)
    assert info is not None
    result = plugin.filter(state, view, info)
    return result.code, result.message()


@pytest.mark.parametrize(
    ("nodes", "running", "pod", "code", "reason"),
    [
        ([gpu_node("n1", count=2)], [share("r", 600)], share("p", 400), Code.SUCCESS, ""),
        (
            [gpu_node("n1", count=1)],
            [share("r", 700)],
            share("p", 400),
            Code.UNSCHEDULABLE,
            NO_SHARE_ROOM,
        ),
        (
            [gpu_node("n1", count=2)],
            [share("r", 100)],
            make_pod("p").gpus(2),
            Code.UNSCHEDULABLE,
            NO_WHOLE_GPUS,
        ),
        (
            [gpu_node("n1", "G2")],
            [],
            share("p", 400).annotation(MODELS, "V100M16|V100M32"),
            Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
            WRONG_MODEL,
        ),
        (
            [gpu_node("n1", "V100M32")],
            [],
            share("p", 400).annotation(MODELS, "V100M16|V100M32"),
            Code.SUCCESS,
            "",
        ),
        (
            [gpu_node("n1", L40S)],
            [],
            make_pod("p").gpus(4).annotation("batchsched.io/gpu-connectivity", "PCIeSwitch"),
            Code.UNSCHEDULABLE,
            NO_CONNECTED_SET,
        ),
        (
            [gpu_node("n1", L40S)],
            [],
            make_pod("p").gpus(2).annotation("batchsched.io/gpu-connectivity", "PCIeSwitch"),
            Code.SUCCESS,
            "",
        ),
        (
            [gpu_node("n1", H100)],
            [],
            make_pod("p").gpus(8).annotation("batchsched.io/gpu-connectivity", "NVLink"),
            Code.SUCCESS,
            "",
        ),
        ([make_node("n1")], [], share("p", 400), Code.UNSCHEDULABLE, NO_SHARE_ROOM),
    ],
    ids=[
        "a share fits next to another on a GPU with room",
        "a share does not fit a GPU with too little room",
        "a GPU running a share is not a whole free GPU",
        "a pod allowed only V100s does not fit a G2 node",
        "a pod allowed V100M32 fits a V100M32 node",
        "four GPUs under one PCIe switch do not exist on the PCIe server",
        "two GPUs under one PCIe switch do",
        "eight NVSwitch GPUs on a DGX H100 are one NVLink island",
        "a share does not fit a node without GPUs",
    ],
)
def test_filter(
    nodes: list[NodeBuilder],
    running: list[PodBuilder],
    pod: PodBuilder,
    code: Code,
    reason: str,
) -> None:
    snap = snapshot_of(nodes, [p.node("n1") for p in running])
    assert run_filter(pod, snap) == (code, reason)


def test_unhealthy_gpus_are_not_free() -> None:
    node = gpu_node("n1", count=2).annotation("batchsched.io/unhealthy-gpus", "1")
    snap = snapshot_of([node])
    assert run_filter(make_pod("p").gpus(2), snap) == (Code.UNSCHEDULABLE, NO_WHOLE_GPUS)


def test_pods_without_gpus_skip_the_filter() -> None:
    _, status = GpuTopology().pre_filter(CycleState(), make_pod("p").view(), Snapshot([]))
    assert status.code is Code.SKIP


def test_a_bad_share_annotation_is_unresolvable() -> None:
    pod = share("p", 1000).view()
    _, status = GpuTopology().pre_filter(CycleState(), pod, Snapshot([]))
    assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert "1..999 milli-GPU" in status.message()


def schedule(snap: Snapshot, pod: PodBuilder) -> tuple[str | None, str]:
    result = ProfileRunner(PROFILE, seed=1).schedule_one(pod.view(), snap)
    return result.node_name if result.placed else None, result.message()


def grants(snap: Snapshot, pod: str) -> tuple[tuple[int, int], ...]:
    return snap.gpu_grants(f"uid-default-{pod}")


def test_a_4_gpu_pod_goes_to_the_nvswitch_machine_on_one_numa_node() -> None:
    snap = snapshot_of([gpu_node("pcie", L40S), gpu_node("dgx", H100)])
    pod = make_pod("train").cpu("8").gpus(4).toleration("nvidia.com/gpu", operator="Exists")
    assert schedule(snap, pod)[0] == "dgx"
    assert grants(snap, "train") == tuple((i, 1000) for i in range(4))


def test_a_2_gpu_pod_on_the_pcie_server_gets_one_switch() -> None:
    snap = snapshot_of([gpu_node("pcie", L40S)], [make_pod("one").gpus(1).node("pcie")])
    assert schedule(snap, make_pod("pair").cpu("4").gpus(2))[0] == "pcie"
    assert grants(snap, "pair") == ((2, 1000), (3, 1000))


def test_a_share_packs_onto_the_gpu_already_shared() -> None:
    snap = snapshot_of([gpu_node("empty"), gpu_node("busy")], [share("running", 500).node("busy")])
    assert schedule(snap, share("p", 400))[0] == "busy"
    assert grants(snap, "p") == ((0, 400),)
    info = snap.get("busy")
    assert info is not None and info.gpu is not None and info.gpu.free[0] == 100


def test_a_share_keeps_whole_gpus_free_for_whole_gpu_pods() -> None:
    # GPU 0 has 300 left: a 300 share fills it exactly rather than breaking a whole GPU.
    snap = snapshot_of([gpu_node("n1", count=2)], [share("running", 700).node("n1")])
    assert schedule(snap, share("p", 300))[0] == "n1"
    assert grants(snap, "p") == ((0, 300),)


def test_pods_without_gpus_keep_off_gpu_nodes_that_they_could_use() -> None:
    snap = snapshot_of([gpu_node("gpu"), make_node("cpu").cpu("8").memory("32Gi")])
    assert schedule(snap, make_pod("web").cpu("2").memory("1Gi"))[0] == "cpu"


def test_pods_without_gpus_use_gpu_nodes_when_nothing_else_fits() -> None:
    snap = snapshot_of([gpu_node("gpu"), make_node("cpu").cpu("8").memory("32Gi")])
    assert schedule(snap, make_pod("big").cpu("16").memory("1Gi"))[0] == "gpu"


def test_a_pod_without_gpus_takes_the_gpu_node_with_the_least_cpu_to_spare() -> None:
    # Both nodes' GPUs are taken, so neither placement strands a GPU: best fit on cpu keeps
    # the larger cpu space whole.
    snap = snapshot_of(
        [gpu_node("roomy"), gpu_node("tight")],
        [
            make_pod("a").cpu("40").gpus(8).node("roomy"),
            make_pod("b").cpu("80").gpus(8).node("tight"),
        ],
    )
    assert schedule(snap, make_pod("web").cpu("2").memory("1Gi"))[0] == "tight"


def test_a_pod_without_gpus_keeps_off_the_cpu_that_free_gpus_need() -> None:
    # "tight" has 16 cores left next to 8 free GPUs; taking them would strand those GPUs.
    snap = snapshot_of(
        [gpu_node("roomy"), gpu_node("tight")],
        [
            make_pod("a").cpu("40").gpus(8).node("roomy"),
            make_pod("b").cpu("80").node("tight"),
        ],
    )
    assert schedule(snap, make_pod("web").cpu("8").memory("1Gi"))[0] == "roomy"


def test_the_failure_message_aggregates_gpu_reasons() -> None:
    snap = snapshot_of(
        [gpu_node("g2", count=1), gpu_node("v100", "V100M16", count=1), make_node("cpu")],
        [share("a", 800).node("g2"), share("b", 800).node("v100")],
    )
    node, message = schedule(snap, share("p", 400).annotation(MODELS, "V100M16"))
    assert node is None
    assert message == (
        "0/3 nodes are available: 1 node(s) didn't have the requested GPU model, "
        "2 node(s) had no GPU with enough free share."
    )


def test_unreserving_gives_the_gpus_back() -> None:
    snap = snapshot_of([gpu_node("n1", count=2)])
    runner = ProfileRunner(PROFILE, seed=1)
    pod = make_pod("p").gpus(2).view()
    result = runner.schedule_one(pod, snap)
    assert result.node_name == "n1" and snap.gpu_grants(pod.uid)
    runner.unreserve(result.state, pod, "n1", snap)
    info = snap.get("n1")
    assert info is not None and info.gpu is not None and info.gpu.free == [1000, 1000]


def test_a_cluster_without_gpus_skips_scoring_pods_without_gpus() -> None:
    plugin = GpuTopology()
    snap = snapshot_of([make_node("a"), make_node("b")])
    status = plugin.pre_score(CycleState(), make_pod("p").view(), snap, snap.nodes)
    assert status.code is Code.SKIP


def test_rank_normalization_keeps_the_order() -> None:
    scores = [5, -3, 5, 10**15, 7]
    rank_normalize(scores, 100)
    assert scores == [98, 97, 98, 100, 99]


def test_fragmentation_report_of_a_snapshot() -> None:
    plugin = GpuTopology()
    snap = snapshot_of([gpu_node("n1", count=2)], [share("a", 700).node("n1")])
    report = fragmentation_report(snap, plugin.fragmentation)
    assert (report.idle_milli, report.total_milli) == (1300, 2000)
    assert 0 < report.frag_milli <= 1300


def test_args_take_a_workload_and_reject_a_shape_with_whole_gpus_and_a_share() -> None:
    args = GpuTopologyArgs.model_validate(
        {"typicalPods": [{"cpu": "4", "memory": "16Gi", "gpus": 1, "weight": 3}]}
    )
    ((shape, p),) = args.workload().shapes
    assert (shape.milli_cpu, shape.gpu_count, p) == (4000, 1, 1.0)
    with pytest.raises(ValidationError):
        GpuTopologyArgs.model_validate({"typicalPods": [{"gpus": 1, "gpuMilli": 500}]})
    with pytest.raises(ValidationError):
        GpuTopologyArgs.model_validate({"strandedWeight": -1})


def scores_for(plugin: GpuTopology, snap: Snapshot, pod: PodBuilder) -> dict[str, int]:
    state, view = CycleState(), pod.view()
    plugin.pre_filter(state, view, snap)
    assert plugin.pre_score(state, view, snap, snap.nodes) is OK
    return {info.name: plugin.score(state, view, info) for info in snap.nodes}


def test_pods_restricted_to_a_model_keep_unrestricted_pods_off_its_nodes() -> None:
    # Two nodes alike but for the GPU model. Once the arriving pods show that most GPU pods
    # can run on V100M16 only, an unrestricted pod costs more there than on G2.
    plugin = GpuTopology(GpuTopologyArgs(workload_prior_pods=10))
    snap = snapshot_of([gpu_node("g2", count=2), gpu_node("v100", "V100M16", count=2)])
    anywhere = make_pod("any").cpu("4").memory("16Gi").gpus(1)
    before = scores_for(plugin, snap, anywhere)
    assert before["g2"] == before["v100"]
    for i in range(300):
        restricted = make_pod(f"r{i}").cpu("4").memory("16Gi").gpus(1).annotation(MODELS, "V100M16")
        assert plugin.pre_enqueue(restricted.view()) is OK
    after = scores_for(plugin, snap, anywhere)
    assert after["g2"] > after["v100"]


def test_a_pod_counts_once_into_the_estimate_however_often_it_is_enqueued() -> None:
    plugin = GpuTopology(GpuTopologyArgs(workload_prior_pods=0))
    assert plugin.estimate is not None
    pod = make_pod("p").cpu("4").gpus(1).view()
    for _ in range(3):
        plugin.pre_enqueue(pod)
    plugin.pre_enqueue(make_pod("q").cpu("2").view())
    counts = dict(plugin.estimate.estimate().shapes)
    assert sorted(counts.values()) == pytest.approx([0.5, 0.5], abs=1e-3)


def test_a_half_life_of_zero_keeps_the_configured_target() -> None:
    plugin = GpuTopology(GpuTopologyArgs(workload_half_life=0))
    target = plugin.fragmentation.workload
    for i in range(300):
        assert plugin.pre_enqueue(make_pod(f"r{i}").gpus(1).annotation(MODELS, "T4").view()) is OK
    assert plugin.estimate is None and plugin.fragmentation.workload is target


@pytest.mark.parametrize(("capacity", "huge_weight"), [(True, 0.8), (False, 0.5)])
def test_with_per_supply_capacity_a_shape_few_nodes_can_host_weighs_more(
    capacity: bool, huge_weight: float
) -> None:
    # One node of 128 cores and three of 96, 8 GPUs each: a 120-core pod fits a quarter of the
    # GPUs, so it arrives there four times as often as its share of the pods says.
    huge = TypicalPod(cpu="120", memory="256Gi", gpus=8)
    small = TypicalPod(cpu="8", memory="32Gi", gpus=1)
    args = GpuTopologyArgs(typical_pods=(huge, small), per_supply_capacity=capacity)
    plugin = GpuTopology(args)
    big = gpu_node("big").cpu("128")
    snap = snapshot_of([big, gpu_node("m1"), gpu_node("m2"), gpu_node("m3")])
    scores_for(plugin, snap, make_pod("p").cpu("4").memory("16Gi").gpus(1))
    found = {shape.milli_cpu: round(p, 6) for shape, p in plugin.fragmentation.workload.shapes}
    assert found == {120_000: huge_weight, 8_000: round(1 - huge_weight, 6)}


def test_by_capacity_a_node_with_an_unhealthy_gpu_cannot_host_a_shape_wanting_all() -> None:
    # Two 8-GPU nodes, one with a GPU down: 15 healthy GPUs, of which only the 8 of the whole
    # node could take an 8-GPU pod, so that shape weighs 15/8 (counting the sick GPU: 1:1).
    whole = TypicalPod(cpu="8", memory="32Gi", gpus=8)
    small = TypicalPod(cpu="8", memory="32Gi", gpus=1)
    plugin = GpuTopology(GpuTopologyArgs(typical_pods=(whole, small)))
    sick = gpu_node("sick").annotation("batchsched.io/unhealthy-gpus", "1")
    snap = snapshot_of([gpu_node("ok"), sick])
    scores_for(plugin, snap, make_pod("p").cpu("4").memory("16Gi").gpus(1))
    found = {shape.gpu_count: round(p, 6) for shape, p in plugin.fragmentation.workload.shapes}
    assert found == {8: round(15 / 23, 6), 1: round(8 / 23, 6)}


def test_by_capacity_a_rare_shape_few_nodes_can_host_survives_the_typical_pods_cut() -> None:
    # 1 % of the pods ask for 120 cores, which one node in ten has: weighed 10x it is 9 % of
    # what the nodes meet, inside the 95 % of typical pods (cut first, it would be dropped).
    huge = TypicalPod(cpu="120", memory="256Gi", gpus=8, weight=1)
    small = TypicalPod(cpu="8", memory="32Gi", gpus=1, weight=99)
    plugin = GpuTopology(GpuTopologyArgs(typical_pods=(huge, small)))
    nodes = [gpu_node("big").cpu("128"), *(gpu_node(f"m{i}") for i in range(9))]
    snap = snapshot_of(nodes)
    scores_for(plugin, snap, make_pod("p").cpu("4").memory("16Gi").gpus(1))
    found = {shape.milli_cpu: round(p, 6) for shape, p in plugin.fragmentation.workload.shapes}
    assert found == {120_000: round(10 / 109, 6), 8_000: round(99 / 109, 6)}


def test_by_capacity_stranded_gpus_are_measured_at_the_arriving_pods_cpu_per_gpu() -> None:
    # Weighted 4:1, the 120-core shape would raise the cpu per GPU the stranded measure
    # expects from 128/9 to 488/33 cores; it keeps what the arriving pods (1:1) ask.
    huge = TypicalPod(cpu="120", memory="256Gi", gpus=8)
    small = TypicalPod(cpu="8", memory="32Gi", gpus=1)
    plugin = GpuTopology(GpuTopologyArgs(typical_pods=(huge, small)))
    snap = snapshot_of([gpu_node("big").cpu("128"), gpu_node("m1"), gpu_node("m2"), gpu_node("m3")])
    scores_for(plugin, snap, make_pod("p").cpu("4").memory("16Gi").gpus(1))
    assert plugin.fragmentation.cpu_per_milli == pytest.approx(128_000 / 9_000)
    assert plugin.fragmentation.memory_per_milli == pytest.approx(288 * 1024**3 / 9_000)


def test_by_capacity_the_default_prior_holds_the_rare_openb_pods_few_nodes_can_host() -> None:
    # The default prior is the whole openb mix, cut after weighting: its 120-core 8-GPU pods
    # (5 of 8152) fit only the 128-core node, 1 of 20 here as 39 of 1213 nodes in openb, so
    # they stay in the target before any pod arrives, and a 1-GPU pod costs more on that node.
    plugin = GpuTopology()
    big = gpu_node("big").cpu("128").memory("768Gi")
    snap = snapshot_of([big, *(gpu_node(f"m{i}") for i in range(19))])
    scores = scores_for(plugin, snap, make_pod("p").cpu("8").memory("32Gi").gpus(1))
    assert 120_000 in {shape.milli_cpu for shape, _ in plugin.fragmentation.workload.shapes}
    assert scores["m0"] > scores["big"]
    # Cut before weighting (the prior's 95 %), they are gone from the target.
    plain = GpuTopology(GpuTopologyArgs(per_supply_capacity=False))
    scores_for(plain, snap, make_pod("p").cpu("8").memory("32Gi").gpus(1))
    assert 120_000 not in {shape.milli_cpu for shape, _ in plain.fragmentation.workload.shapes}


def test_where_fragmentation_ties_a_gpu_pod_takes_the_more_common_host() -> None:
    # Nothing in the target needs more than 96 cores, so an empty 96-core node and an empty
    # 128-core one score the same fragmentation and packing; the 128-core node, the one few
    # others match, is kept (LeastAllocated alone would pick it for its room).
    small = TypicalPod(cpu="8", memory="32Gi", gpus=1)
    plugin = GpuTopology(GpuTopologyArgs(typical_pods=(small,)))
    big = gpu_node("big").cpu("128").memory("768Gi")
    snap = snapshot_of([big, gpu_node("m1"), gpu_node("m2")])
    scores = scores_for(plugin, snap, make_pod("p").cpu("4").memory("16Gi").gpus(1))
    assert scores["m1"] == scores["m2"] > scores["big"]
    cpu_scores = scores_for(plugin, snap, make_pod("c").cpu("4").memory("16Gi"))
    assert cpu_scores["m1"] == cpu_scores["m2"] > cpu_scores["big"]


def test_by_capacity_the_supply_is_recounted_when_a_node_s_allocatable_changes() -> None:
    # One 128-core node of four hosts the 120-core shape (weight 0.8, as above); once a
    # 96-core node is resized to 128 cores, two of four do (factor 2: 2/3), though no node
    # came or went.
    huge = TypicalPod(cpu="120", memory="256Gi", gpus=8)
    small = TypicalPod(cpu="8", memory="32Gi", gpus=1)
    plugin = GpuTopology(GpuTopologyArgs(typical_pods=(huge, small)))
    snap = snapshot_of([gpu_node("big").cpu("128"), gpu_node("m1"), gpu_node("m2"), gpu_node("m3")])
    pod = make_pod("p").cpu("4").memory("16Gi").gpus(1)

    def huge_weight() -> float:
        scores_for(plugin, snap, pod)
        weights = dict(plugin.fragmentation.workload.shapes)
        return round(next(p for shape, p in weights.items() if shape.milli_cpu == 120_000), 6)

    assert huge_weight() == 0.8
    snap.update_node(gpu_node("m1").cpu("128").view())
    assert huge_weight() == round(2 / 3, 6)
