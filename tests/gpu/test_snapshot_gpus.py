"""GPU accounting in the snapshot: default assignments, assign_gpus, and trials undoing both."""

from __future__ import annotations

import pytest

from batchsched.snapshot import NodeInfo, Snapshot
from tests.builders import NodeBuilder, PodBuilder, make_node, make_pod, snapshot_of

SHARE = "batchsched.io/gpu-milli"


def gpu_node(name: str = "n1", count: int = 4, product: str = "G2") -> NodeBuilder:
    return (
        make_node(name)
        .cpu("64")
        .memory("256Gi")
        .gpus(count)
        .label("nvidia.com/gpu.product", product)
    )


def share(name: str, milli: int) -> PodBuilder:
    return make_pod(name).cpu("1").annotation(SHARE, str(milli))


def ledger_of(snap: Snapshot, node: str = "n1") -> tuple[list[int], dict[str, object]]:
    info = snap.get(node)
    assert info is not None and info.gpu is not None
    return list(info.gpu.free), dict(info.gpu.grants)


def test_bound_pods_get_the_lowest_index_gpus_with_room() -> None:
    snap = snapshot_of(
        [gpu_node()],
        [
            make_pod("two").gpus(2).node("n1"),
            share("a", 600).node("n1"),
            share("b", 300).node("n1"),
            share("c", 500).node("n1"),
        ],
    )
    free, grants = ledger_of(snap)
    assert grants == {
        "uid-default-two": ((0, 1000), (1, 1000)),
        "uid-default-a": ((2, 600),),
        "uid-default-b": ((2, 300),),
        "uid-default-c": ((3, 500),),
    }
    assert free == [0, 0, 100, 500]


def test_pods_bound_past_our_accounting_are_still_counted() -> None:
    snap = snapshot_of(
        [gpu_node(count=1)], [share("a", 800).node("n1"), share("b", 800).node("n1")]
    )
    free, _ = ledger_of(snap)
    assert free == [-600]
    info = snap.get("n1")
    assert info is not None and info.gpu is not None
    assert (info.gpu.max_free, info.gpu.free_total, info.gpu.whole_free) == (-600, 0, 0)


def test_nodes_without_gpus_have_no_ledger() -> None:
    snap = snapshot_of([make_node("cpu"), gpu_node()])
    assert snap.gpu_nodes == 1
    cpu = snap.get("cpu")
    assert cpu is not None and cpu.gpu is None


def test_assign_gpus_moves_a_pod_and_a_discarded_trial_moves_it_back() -> None:
    snap = snapshot_of([gpu_node()], [make_pod("two").gpus(2).node("n1")])
    before = ledger_of(snap)
    with snap.begin_trial():
        snap.assign_gpus("uid-default-two", ((2, 1000), (3, 1000)))
        assert ledger_of(snap)[0] == [1000, 1000, 0, 0]
    assert ledger_of(snap) == before


def test_a_discarded_forget_gives_back_exactly_the_gpus_the_pod_held() -> None:
    snap = snapshot_of([gpu_node()], [share("a", 300).node("n1")])
    snap.assign_gpus("uid-default-a", ((3, 300),))
    held = ledger_of(snap)
    pod = snap.get("n1").pods["uid-default-a"]  # type: ignore[union-attr]
    with snap.begin_trial():
        snap.forget(pod)
        assert ledger_of(snap)[0] == [1000] * 4
    assert ledger_of(snap) == held


def test_assign_gpus_that_do_not_fit_changes_nothing() -> None:
    snap = snapshot_of([gpu_node()], [share("a", 600).node("n1"), share("b", 600).node("n1")])
    before = ledger_of(snap)
    with pytest.raises(ValueError):
        snap.assign_gpus("uid-default-b", ((0, 600),))
    assert ledger_of(snap) == before


def test_a_pod_confirmed_by_the_api_keeps_the_gpus_it_was_reserved() -> None:
    snap = snapshot_of([gpu_node()])
    pod = share("a", 300).view()
    snap.assume(pod, "n1")
    snap.assign_gpus(pod.uid, ((2, 300),))
    snap.forget(pod)  # the cache swaps the reserved pod for the API's copy
    snap.assume(share("a", 300).node("n1").view(), "n1")
    assert ledger_of(snap)[1] == {pod.uid: ((2, 300),)}


def test_every_change_gives_the_node_a_new_generation() -> None:
    snap = snapshot_of([gpu_node()])
    info = snap.get("n1")
    assert info is not None
    seen = {info.generation}
    pod = share("a", 300).view()
    snap.assume(pod, "n1")
    seen.add(info.generation)
    snap.assign_gpus(pod.uid, ((1, 300),))
    seen.add(info.generation)
    snap.forget(pod)
    seen.add(info.generation)
    assert len(seen) == 4


@pytest.mark.parametrize(
    ("count", "annotations", "free"),
    [
        (4, {}, [0, 0, 1000, 1000]),
        (2, {}, [0, 0]),
        (4, {"batchsched.io/unhealthy-gpus": "3"}, [0, 0, 1000, 0]),
        (0, {}, None),
    ],
    ids=[
        "the same GPUs keep their pods",
        "fewer GPUs keep the pods that still have theirs",
        "an unhealthy GPU offers nothing",
        "a node that loses its GPUs loses its ledger",
    ],
)
def test_a_node_update_recounts_gpus(
    count: int, annotations: dict[str, str], free: list[int] | None
) -> None:
    snap = snapshot_of([gpu_node()], [make_pod("two").gpus(2).node("n1")])
    update = gpu_node(count=count) if count else make_node("n1").cpu("64").memory("256Gi")
    for key, value in annotations.items():
        update.annotation(key, value)
    info: NodeInfo = snap.update_node(update.view())
    assert (list(info.gpu.free) if info.gpu else None) == free
    assert snap.gpu_nodes == (1 if count else 0)


def test_gpu_hosts_version_moves_only_when_what_a_gpu_node_offers_may_change() -> None:
    snap = snapshot_of([gpu_node("n1"), make_node("cpu1").cpu("8")])
    moves: list[int] = []

    def step() -> None:
        moves.append(snap.gpu_hosts_version)

    step()
    snap.add_node(make_node("cpu2").cpu("8").view())  # no GPUs: nothing GPU pods can use
    step()
    snap.update_node(gpu_node("n1").label("team", "a").view())  # a label: same offer
    step()
    snap.update_node(gpu_node("n1").label("team", "a").cpu("128").view())  # allocatable cpu
    step()
    unhealthy = gpu_node("n1").label("team", "a").cpu("128")
    snap.update_node(unhealthy.annotation("batchsched.io/unhealthy-gpus", "1").view())
    step()  # one GPU down: less healthy capacity
    snap.add_node(gpu_node("n2").view())
    step()
    snap.remove_node("cpu2")
    step()
    snap.remove_node("n2")
    step()
    assert moves == [0, 0, 0, 1, 2, 3, 3, 4]
