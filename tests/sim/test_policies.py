"""The paper's policies (sim/policies.py): what each must prefer on hand-made nodes, and the
GPUs each gives a pod inside the node."""

from __future__ import annotations

import pytest

from batchsched.sim.policies import (
    MAX_SCORE,
    Fgd,
    PodDemand,
    RandomGpu,
    best_fit_gpu,
    best_fit_score,
    dot_product_score,
    gpu_clustering_score,
    gpu_packing_score,
    min_max,
    node_kinds,
)
from batchsched.snapshot import NodeInfo, Snapshot
from gpu.workload import PodShape, typical_workload
from tests.builders import NodeBuilder, PodBuilder, make_node, make_pod, snapshot_of

SHARE = "batchsched.io/gpu-milli"


def gpu_node(name: str, count: int = 8, cpu: str = "96") -> NodeBuilder:
    return (
        make_node(name).cpu(cpu).memory("512Gi").gpus(count).label("nvidia.com/gpu.product", "G2")
    )


def share(name: str, milli: int, node: str, cpu: str = "2") -> PodBuilder:
    return make_pod(name).cpu(cpu).memory("4Gi").annotation(SHARE, str(milli)).node(node)


def whole(name: str, count: int, node: str, cpu: str = "8") -> PodBuilder:
    return make_pod(name).cpu(cpu).memory("4Gi").gpus(count).node(node)


def node(snap: Snapshot, name: str) -> NodeInfo:
    info = snap.get(name)
    assert info is not None
    return info


SHARE_POD = PodDemand(2000, 1 << 30, 1, 400)
ONE_GPU = PodDemand(4000, 1 << 30, 1, 1000)


def test_best_fit_prefers_the_node_with_the_least_left_after_the_pod() -> None:
    snap = snapshot_of(
        [gpu_node("idle"), gpu_node("busy")], [whole("running", 4, "busy", cpu="40")]
    )
    scores = [best_fit_score(ONE_GPU, node(snap, n)) for n in ("idle", "busy")]
    assert scores[1] > scores[0]
    min_max(scores)
    assert scores == [0, MAX_SCORE]


def test_min_max_gives_every_node_zero_when_all_score_the_same() -> None:
    scores = [37, 37, 37]
    min_max(scores)
    assert scores == [0, 0, 0]


def test_dot_product_prefers_the_node_whose_free_resources_align_least_with_the_pod() -> None:
    # The artifact scores 1 - dot(free, asked): the node with less free wins.
    snap = snapshot_of(
        [gpu_node("idle"), gpu_node("busy")], [whole("running", 6, "busy", cpu="60")]
    )
    assert dot_product_score(ONE_GPU, node(snap, "busy")) > dot_product_score(
        ONE_GPU, node(snap, "idle")
    )


def test_gpu_packing_prefers_a_partly_used_gpu_then_a_used_node_then_an_idle_node() -> None:
    snap = snapshot_of(
        [gpu_node("idle"), gpu_node("used"), gpu_node("shared")],
        [whole("w", 1, "used"), share("s", 500, "shared")],
    )
    idle, used, shared = (
        gpu_packing_score(SHARE_POD, node(snap, n)) for n in ("idle", "used", "shared")
    )
    assert shared > used > idle
    assert shared >= MAX_SCORE // 2 > used >= MAX_SCORE // 3 > idle


def test_gpu_packing_takes_the_fuller_shared_gpu_first() -> None:
    snap = snapshot_of(
        [gpu_node("half"), gpu_node("most")],
        [share("a", 500, "half"), share("b", 550, "most")],
    )
    assert gpu_packing_score(SHARE_POD, node(snap, "most")) > gpu_packing_score(
        SHARE_POD, node(snap, "half")
    )


def test_gpu_packing_prefers_an_idle_node_with_fewer_gpus() -> None:
    snap = snapshot_of([gpu_node("eight"), gpu_node("two", count=2)])
    assert gpu_packing_score(ONE_GPU, node(snap, "two")) > gpu_packing_score(
        ONE_GPU, node(snap, "eight")
    )


def test_pods_without_gpus_score_zero_for_the_gpu_policies() -> None:
    snap = snapshot_of([gpu_node("n")])
    cpu_only = PodDemand(1000, 1 << 30)
    assert gpu_packing_score(cpu_only, node(snap, "n")) == 0
    assert gpu_clustering_score(cpu_only, node(snap, "n")) == 0


def test_gpu_clustering_prefers_nodes_holding_only_the_pods_kind() -> None:
    snap = snapshot_of(
        [gpu_node("same"), gpu_node("mixed"), gpu_node("idle"), gpu_node("other")],
        [
            share("s1", 300, "same"),
            share("s2", 300, "mixed"),
            whole("w1", 2, "mixed"),
            whole("w2", 2, "other"),
        ],
    )
    names = ("same", "mixed", "idle", "other")
    scores = [gpu_clustering_score(SHARE_POD, node(snap, n)) for n in names]
    assert scores == sorted(scores, reverse=True) and len(set(scores)) == 4
    assert node_kinds(node(snap, "mixed")) == {"share", "2-gpu"}


def test_best_fit_gpu_puts_a_share_on_the_fullest_gpu_with_room() -> None:
    info = node(snapshot_of([gpu_node("n", count=4)]), "n")
    free = [300, 700, 500, 1000]
    assert best_fit_gpu(SHARE_POD, info, free) == (2,)  # 300 is too small for 400
    assert best_fit_gpu(PodDemand(0, 0, 2, 1000), info, free) is None  # one idle GPU only


def test_whole_gpus_are_the_lowest_numbered_idle_ones() -> None:
    snap = snapshot_of([gpu_node("n", count=4)])
    info = node(snap, "n")
    assert best_fit_gpu(PodDemand(0, 0, 2, 1000), info, [1000, 200, 1000, 1000]) == (0, 2)


def test_random_gpu_picks_among_the_gpus_with_room_only() -> None:
    snap = snapshot_of([gpu_node("n", count=4)])
    info = node(snap, "n")
    draw = RandomGpu(seed=1)
    picks = {draw(SHARE_POD, info, [100, 1000, 450, 0]) for _ in range(50)}
    assert picks == {(1,), (2,)}


def fgd_for(*shapes: PodShape) -> Fgd:
    return Fgd(typical_workload(shapes, coverage=1.0))


def test_fgd_packs_a_share_where_fragmentation_grows_least() -> None:
    # The workload is all 1-GPU pods: a share on an idle GPU makes a whole GPU a fragment,
    # on the already shared GPU it adds nothing.
    fgd = fgd_for(PodShape(1000, 0, gpu_count=1))
    snap = snapshot_of([gpu_node("idle"), gpu_node("shared")], [share("s", 500, "shared")])
    assert fgd.score(SHARE_POD, node(snap, "shared")) > fgd.score(SHARE_POD, node(snap, "idle"))
    info = node(snap, "shared")
    free = list(info.gpu.free) if info.gpu else []
    chosen = fgd.choose(SHARE_POD, info, free)
    assert chosen is not None and free[chosen[0]] == 500


def test_fgd_scores_no_growth_as_the_middle_of_its_scale() -> None:
    fgd = fgd_for(PodShape(1000, 0, gpu_count=1))
    snap = snapshot_of([gpu_node("n")])
    assert fgd.score(ONE_GPU, node(snap, "n")) == MAX_SCORE // 2


@pytest.mark.parametrize(
    ("demand", "kind"),
    [
        (PodDemand(1000, 0), ""),
        (PodDemand(1000, 0, 1, 300), "share"),
        (PodDemand(1000, 0, 1, 1000), "1-gpu"),
        (PodDemand(1000, 0, 4, 1000), "4-gpu"),
    ],
    ids=["no GPU", "a share", "one whole GPU", "four whole GPUs"],
)
def test_a_pods_kind_for_gpu_clustering(demand: PodDemand, kind: str) -> None:
    assert demand.kind == kind
