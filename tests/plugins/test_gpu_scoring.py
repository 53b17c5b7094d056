"""GpuScorer's caches: raw scores kept per (demand, node state) and state numbers kept across
fragmentation targets give what a scorer with no cache at all computes."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from batchsched.plugins.gpu_scoring import Demand, GpuScorer, NodeStates
from batchsched.snapshot import Snapshot
from gpu.fragmentation import FragmentationModel
from gpu.workload import DEFAULT_WORKLOAD, PodShape, Workload, typical_workload
from tests.builders import NodeBuilder, PodBuilder, make_node, make_pod

GIB = 1 << 30
SHARE = "batchsched.io/gpu-milli"
# A target unlike the default one: big whole-GPU pods and small shares, cpu-hungry.
OTHER_TARGET = typical_workload(
    [
        (PodShape(32_000, 64 * GIB, gpu_count=4), 3.0),
        (PodShape(8_000, 16 * GIB, gpu_milli=250), 2.0),
        (PodShape(4_000, 8 * GIB), 1.0),
    ],
    coverage=1.0,
)
DEMANDS: list[Demand] = [
    (1, 0, 4_000, 8 * GIB),
    (2, 0, 16_000, 32 * GIB),
    (0, 500, 2_000, 4 * GIB),
    (0, 0, 6_000, 8 * GIB),
]


def _scorer(target: Workload, states: NodeStates | None = None) -> GpuScorer:
    return GpuScorer(FragmentationModel(target), 1000, 1.0, states)


@st.composite
def clusters(draw: st.DrawFn) -> tuple[list[NodeBuilder], list[PodBuilder]]:
    """Few node kinds and few pods, so that many nodes share a state."""
    nodes: list[NodeBuilder] = []
    pods: list[PodBuilder] = []
    for i in range(draw(st.integers(1, 12))):
        node = make_node(f"n{i}").cpu(draw(st.sampled_from(["32", "96"]))).memory("256Gi")
        gpus = draw(st.sampled_from([0, 4, 8, 8]))
        nodes.append(node.gpus(gpus) if gpus else node)
        for j in range(draw(st.integers(0, 2)) if gpus else 0):
            pod = make_pod(f"e{i}-{j}").cpu("4").memory("8Gi").node(f"n{i}")
            if draw(st.booleans()):
                pods.append(pod.gpus(draw(st.sampled_from([1, 2]))))
            else:
                pods.append(pod.annotation(SHARE, str(draw(st.sampled_from([300, 500])))))
    return nodes, pods


@settings(max_examples=60, deadline=None)
@given(clusters(), st.lists(st.integers(0, 11), max_size=4))
def test_kept_scores_and_states_across_a_new_target_equal_an_uncached_scorer(
    cluster: tuple[list[NodeBuilder], list[PodBuilder]], placed_on: list[int]
) -> None:
    nodes, pods = cluster
    snapshot = Snapshot([n.view() for n in nodes], [p.view() for p in pods])
    states = NodeStates()
    old = _scorer(DEFAULT_WORKLOAD, states)
    for demand in DEMANDS:
        table = old.table(demand)
        for info in snapshot.nodes:
            assert old.score(demand, table, info) == _scorer(DEFAULT_WORKLOAD).raw(demand, info)
    for i, k in enumerate(placed_on):  # nodes change state before the new target
        info = snapshot.nodes[k % len(snapshot.nodes)]
        snapshot.assume(make_pod(f"p{i}").cpu("2").memory("2Gi").view(), info.name)
    new = _scorer(OTHER_TARGET, states)
    for scorer, target in ((new, OTHER_TARGET), (old, DEFAULT_WORKLOAD)):
        for demand in DEMANDS:
            table = scorer.table(demand)
            for info in snapshot.nodes:
                expected = _scorer(target).raw(demand, info)
                assert scorer.score(demand, table, info) == expected


def test_nodes_in_one_state_share_a_number_and_a_change_gives_a_new_one() -> None:
    nodes = [make_node(f"n{i}").cpu("96").memory("256Gi").gpus(8) for i in range(3)]
    snapshot = Snapshot([n.view() for n in nodes] + [make_node("cpu").cpu("8").view()])
    states = NodeStates()
    a, b, c, cpu = (states.of(info) for info in snapshot.nodes)
    assert a == b == c != cpu
    snapshot.assume(make_pod("p").cpu("1").memory("1Gi").gpus(1).view(), "n1")
    changed = snapshot.get("n1")
    assert changed is not None
    assert states.of(changed) not in (a, cpu)
    assert [states.of(info) for info in snapshot.nodes] == [a, states.of(changed), c, cpu]
