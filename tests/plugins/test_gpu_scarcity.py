"""Prices for the places left on scarce nodes, as GpuTopology keeps and uses them: the counts
follow the snapshot's change log as a full recount would, a price lowers the score of a node
by what the placement takes, and a burst of pods placed without a PreScore (a kept batch)
still moves the prices."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from batchsched.framework.cycle_state import CycleState
from batchsched.framework.registry import assemble_profile
from batchsched.framework.status import OK
from batchsched.plugins.gpu_scarcity import Scarcity
from batchsched.plugins.gpu_scoring import GpuScorer
from batchsched.plugins.gpu_topology import GpuTopology
from batchsched.plugins.gpu_topology_args import GpuTopologyArgs, TypicalPod
from batchsched.plugins.registry import DEFAULT_PLUGINS, default_registry
from batchsched.snapshot import Snapshot
from gpu.fragmentation import FragmentationModel
from gpu.scarcity import ScarceGroup, ScarcePrices
from gpu.workload import MIB, PodShape, typical_workload
from gpu.workload_estimate import EstimateSettings, Host, WorkloadEstimate
from tests.builders import NodeBuilder, PodBuilder, make_node, make_pod, snapshot_of
from tests.framework.test_batch import run_members

GIB = 1024 * MIB
WIDE = PodShape(120_000, 700 * GIB, gpu_count=8)
SMALL = PodShape(8_000, 16 * GIB, gpu_count=1)
CPU_ONLY = PodShape(32_000, 64 * GIB)


def common(name: str) -> NodeBuilder:
    return make_node(name).cpu("96").memory("384Gi").gpus(8).label("nvidia.com/gpu.product", "G2")


def big(name: str) -> NodeBuilder:
    return make_node(name).cpu("128").memory("768Gi").gpus(8).label("nvidia.com/gpu.product", "G3")


def cluster(commons: int = 20, bigs: int = 2) -> Snapshot:
    nodes = [common(f"c{i}") for i in range(commons)] + [big(f"b{i}") for i in range(bigs)]
    return snapshot_of(nodes)


def supply_of(snap: Snapshot) -> dict[Host, int]:
    supply: dict[Host, int] = {}
    for info in snap.nodes:
        assert info.gpu is not None
        host = Host(info.gpu.model, info.alloc_milli_cpu, info.alloc_memory, 8)
        supply[host] = supply.get(host, 0) + 1
    return supply


def estimate(wide: float) -> WorkloadEstimate:
    prior = typical_workload([(SMALL, 90.0), (CPU_ONLY, 10.0 - wide), (WIDE, wide)], 1.0)
    return WorkloadEstimate(prior, EstimateSettings(prior_pods=1000, coverage=1.0))


def cpu_pod(name: str) -> PodBuilder:
    return make_pod(name).cpu("32").memory("64Gi")


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 7), st.sampled_from(["cpu", "gpu", "off"])), max_size=12))
def test_counts_kept_from_the_change_log_equal_a_fresh_count(
    steps: list[tuple[int, str]],
) -> None:
    snap = cluster(commons=4, bigs=4)
    supply, learned = supply_of(snap), estimate(2.0)
    kept = Scarcity(0.5)
    kept.update(snap, supply, learned)
    placed: list[PodBuilder] = []
    for i, (k, kind) in enumerate(steps):
        if kind == "off" and placed:
            snap.forget(placed.pop(k % len(placed)).view())
        elif kind != "off":
            pod = cpu_pod(f"p{i}") if kind == "cpu" else make_pod(f"p{i}").cpu("8").gpus(2)
            snap.assume(pod.view(), snap.nodes[k].name)  # a GPU pod is granted GPUs
            placed.append(pod.node(snap.nodes[k].name))
        kept.update(snap, supply, learned)
        fresh = Scarcity(0.5)
        fresh.update(snap, supply, learned)
        assert (kept.places, kept.idle) == (fresh.places, fresh.idle)
    assert len(kept.places) == 1  # the 120-core pods, only the 128-core nodes host them


def test_a_price_lowers_a_score_by_what_the_placement_takes() -> None:
    snap = cluster(commons=2, bigs=2)
    group = ScarceGroup(frozenset(), WIDE, 0.01, 8000.0)
    model = FragmentationModel(typical_workload([(SMALL, 9.0), (CPU_ONLY, 1.0)], 1.0))
    plain = GpuScorer(model, 1000)
    priced = GpuScorer(model, 1000, prices=ScarcePrices([group], [3000]))
    demand = (0, 0, 32_000, 64 * GIB)  # a cpu pod: 96 cores left on a 128-core node
    big_node, common_node = snap.get("b0"), snap.get("c0")
    assert big_node is not None and common_node is not None
    lost = 3000 * 1000 * 10**6  # the price, in micro-GPU, at the scorer's scale
    assert plain.raw(demand, big_node) - priced.raw(demand, big_node) == lost
    assert plain.raw(demand, common_node) == priced.raw(demand, common_node)
    small_cpu = (0, 0, 4_000, 8 * GIB)  # leaves 124 cores: the place stays
    assert plain.raw(small_cpu, big_node) == priced.raw(small_cpu, big_node)


def args(share: float = 0.1, whole_nodes: bool = True) -> GpuTopologyArgs:
    return GpuTopologyArgs(
        typical_pods=(
            TypicalPod(cpu="8", memory="16Gi", gpus=1, weight=90.0),
            TypicalPod(cpu="32", memory="64Gi", weight=8.0),
            TypicalPod(cpu="120", memory="700Gi", gpus=8, weight=2.0),
        ),
        workload_prior_pods=1000,
        per_supply=True,
        scarce_host_share=share,
        scarce_whole_nodes=whole_nodes,
    )


def place_cpu_pods(plugin: GpuTopology, snap: Snapshot, names: list[str], node: str) -> None:
    """Pods placed one after another with Reserve and no PreScore, as a kept batch does."""
    for name in names:
        pod = cpu_pod(name).view()
        assert plugin.pre_enqueue(pod) is OK
        state = CycleState()
        plugin.pre_filter(state, pod, snap)
        snap.assume(pod, node)
        assert plugin.reserve(state, pod, node, snap) is OK


def test_places_taken_by_a_batch_without_prescore_move_the_price() -> None:
    snap = cluster(commons=20, bigs=2)
    plugin = GpuTopology(args())
    state, probe = CycleState(), cpu_pod("probe").view()
    plugin.pre_filter(state, probe, snap)
    assert plugin.pre_score(state, probe, snap, snap.nodes) is OK
    version = plugin.scoring_version
    before = plugin.score(state, probe, snap.nodes[-1])  # a 128-core node, both places left
    place_cpu_pods(plugin, snap, ["a"], "b0")  # one place of two gone
    assert plugin.scoring_version > version  # the last place is dearer: scores moved
    state = CycleState()
    plugin.pre_filter(state, probe, snap)
    plugin.pre_score(state, probe, snap, snap.nodes)
    after = plugin.score(state, probe, snap.get("b1"))  # type: ignore[arg-type]
    assert after < before


def test_with_the_share_at_zero_and_no_whole_nodes_nothing_is_priced() -> None:
    snap = cluster(commons=20, bigs=2)
    plugin, off = GpuTopology(args()), GpuTopology(args(share=0.0, whole_nodes=False))
    place_cpu_pods(plugin, snap, ["a"], "b0")
    place_cpu_pods(off, snap, ["b"], "c0")
    state, probe = CycleState(), cpu_pod("probe").view()
    scores = {}
    for name, p in (("on", plugin), ("off", off)):
        p.pre_filter(state, probe, snap)
        p.pre_score(state, probe, snap, snap.nodes)
        scores[name] = (
            p.score(state, probe, snap.get("b1")),
            p.score(state, probe, snap.get("c1")),
        )  # type: ignore[arg-type]
    assert scores["on"][0] < scores["off"][0]  # the last 128-core place costs a price
    assert scores["on"][1] == scores["off"][1]  # a 96-core node has no place to lose


def test_gang_members_batched_land_where_the_runner_puts_them_while_prices_move() -> None:
    # A 32-core member strands most GPUs of a 40-core node, or takes one of three places on
    # the 128-core nodes: the cheaper while places are many, the dearer once they run short,
    # and each place taken re-prices the rest part-way through the gang's trial.
    gpu_args = {
        "typicalPods": [
            {"cpu": "8", "memory": "16Gi", "gpus": 1, "weight": 89},
            {"cpu": "32", "memory": "64Gi", "weight": 10},
            {"cpu": "120", "memory": "700Gi", "gpus": 8, "weight": 1},
        ],
        "workloadPriorPods": 1000,
    }
    small = [common(f"c{i}").cpu("40") for i in range(6)]
    nodes = small + [big(f"b{i}") for i in range(3)]
    members = [cpu_pod(f"m{i}").view() for i in range(6)]
    outcomes = {}
    for batching in ("never", "always"):
        profile = assemble_profile(
            default_registry(), "gpu-scheduler", DEFAULT_PLUGINS, {"GpuTopology": gpu_args}, 100
        )
        plugin = next(s.plugin for s in profile.score if isinstance(s.plugin, GpuTopology))
        for pod in members:
            plugin.pre_enqueue(pod)
        outcomes[batching], _, batched = run_members(profile, nodes, [], members, batching)
    assert batched > 0
    placed = [node for node, *_ in outcomes["never"]]
    assert placed[0] is not None and placed[0].startswith("b")  # a place while they are many
    assert any(n is not None and n.startswith("c") for n in placed)  # then the 40-core nodes
    assert outcomes["always"] == outcomes["never"]
