"""The gang cycle: whole or nothing, waiting for quorum, and no deadlock between gangs."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from batchsched.framework.registry import assemble_profile
from batchsched.framework.runner import ProfileRunner
from batchsched.gang.core import GangRequest, Outcome, Reservation, schedule_gang
from batchsched.gang.podgroup import PodGroupView, parse_pod_group
from batchsched.model.pod import PodView
from batchsched.plugins.registry import DEFAULT_PLUGINS, default_registry
from batchsched.snapshot import Snapshot
from tests.builders import make_node, make_pod, snapshot_of

PROFILE = assemble_profile(default_registry(), "gpu-scheduler", DEFAULT_PLUGINS, {})


def group(name: str, min_member: int, **spec: object) -> PodGroupView:
    return parse_pod_group(
        {
            "apiVersion": "scheduling.x-k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "ml", "uid": f"pg-{name}"},
            "spec": {"minMember": min_member, **spec},
        }
    )


def members(gang: str, count: int, gpus: int = 8, start: int = 0) -> tuple[PodView, ...]:
    return tuple(
        make_pod(f"{gang}-{i}", "ml").gpus(gpus).label("scheduling.x-k8s.io/pod-group", gang).view()
        for i in range(start, start + count)
    )


def gpu_nodes(count: int, gpus: int = 8) -> Snapshot:
    return snapshot_of([make_node(f"g{i}").gpus(gpus).cpu("64") for i in range(count)])


def used_gpus(snapshot: Snapshot) -> int:
    return sum(info.req_scalar.get("nvidia.com/gpu", 0) for info in snapshot.nodes)


def test_a_gang_that_fits_is_placed_whole() -> None:
    snap = gpu_nodes(4)
    decision = schedule_gang(
        GangRequest(group("train", 3), members("train", 3)), snap, ProfileRunner(PROFILE)
    )
    assert decision.outcome is Outcome.BIND
    assert len(decision.placed) == 3 and len({r.node for r in decision.placed}) == 3
    assert used_gpus(snap) == 24


def test_a_gang_that_does_not_fit_holds_nothing_and_says_why() -> None:
    snap = gpu_nodes(2)
    decision = schedule_gang(
        GangRequest(group("big", 3), members("big", 3)), snap, ProfileRunner(PROFILE)
    )
    assert decision.outcome is Outcome.REJECT and used_gpus(snap) == 0
    assert len(decision.unplaced) == 3
    assert decision.message.startswith(
        "gang ml/big needs 3 more pod(s) placed together (minMember 3, 24 nvidia.com/gpu); "
        "16 nvidia.com/gpu free on 2 node(s) that pass its filters; 2 of 3 fit."
    )
    assert "Insufficient nvidia.com/gpu" in decision.message


def test_elastic_members_beyond_min_member_are_placed_when_there_is_room() -> None:
    snap = gpu_nodes(3)
    decision = schedule_gang(
        GangRequest(group("elastic", 2), members("elastic", 5)), snap, ProfileRunner(PROFILE)
    )
    assert decision.outcome is Outcome.BIND
    assert len(decision.placed) == 3 and len(decision.unplaced) == 2


def test_members_that_exist_wait_for_the_quorum_and_hold_their_place() -> None:
    snap = gpu_nodes(4)
    runner = ProfileRunner(PROFILE)
    first = schedule_gang(GangRequest(group("late", 4), members("late", 2)), snap, runner)
    assert first.outcome is Outcome.WAIT and used_gpus(snap) == 16
    assert "2 of minMember 4 exist" in first.message
    second = schedule_gang(
        GangRequest(group("late", 4), members("late", 2, start=2), reserved=first.placed),
        snap,
        runner,
    )
    assert second.outcome is Outcome.BIND and used_gpus(snap) == 32


def test_the_what_if_mode_reports_waiting_but_holds_nothing() -> None:
    snap = gpu_nodes(4)
    decision = schedule_gang(
        GangRequest(group("late", 4), members("late", 2)),
        snap,
        ProfileRunner(PROFILE),
        hold_incomplete=False,
    )
    assert decision.outcome is Outcome.WAIT and used_gpus(snap) == 0


def test_min_resources_beyond_the_whole_cluster_is_rejected_at_once() -> None:
    snap = gpu_nodes(2)
    pg = group("huge", 1, minResources={"nvidia.com/gpu": 64})
    decision = schedule_gang(GangRequest(pg, members("huge", 1)), snap, ProfileRunner(PROFILE))
    assert decision.outcome is Outcome.REJECT
    assert decision.message == (
        "gang ml/huge needs minResources 64 nvidia.com/gpu, more than the whole cluster has (16)"
    )


def test_two_gangs_needing_60_percent_each_one_completes_the_other_holds_nothing() -> None:
    snap = gpu_nodes(10)
    runner = ProfileRunner(PROFILE)
    a = schedule_gang(GangRequest(group("a", 6), members("a", 6)), snap, runner)
    b = schedule_gang(GangRequest(group("b", 6), members("b", 6)), snap, runner)
    assert (a.outcome, b.outcome) == (Outcome.BIND, Outcome.REJECT)
    assert used_gpus(snap) == 48


def test_a_waiting_gang_never_blocks_a_complete_one_its_reservations_are_released() -> None:
    snap = gpu_nodes(10)
    runner = ProfileRunner(PROFILE)
    waiting = schedule_gang(GangRequest(group("a", 6), members("a", 5)), snap, runner)
    assert waiting.outcome is Outcome.WAIT and used_gpus(snap) == 40
    complete = schedule_gang(
        GangRequest(group("b", 6), members("b", 6)), snap, runner, waiting={"ml/a": waiting.placed}
    )
    assert complete.outcome is Outcome.BIND and complete.released == ("ml/a",)
    assert used_gpus(snap) == 48  # b's 6 members only; a holds nothing now


def test_bound_members_count_towards_min_member() -> None:
    snap = gpu_nodes(2)
    decision = schedule_gang(
        GangRequest(group("resume", 3), members("resume", 1), bound=2), snap, ProfileRunner(PROFILE)
    )
    assert decision.outcome is Outcome.BIND and len(decision.placed) == 1


@st.composite
def clusters_and_gangs(draw: st.DrawFn) -> tuple[Snapshot, list[GangRequest]]:
    snap = snapshot_of(
        [
            make_node(f"n{i}").gpus(draw(st.sampled_from((2, 4, 8)))).cpu("64")
            for i in range(draw(st.integers(1, 6)))
        ]
    )
    gangs = []
    for g in range(draw(st.integers(1, 5))):
        size = draw(st.integers(1, 5))
        min_member = draw(st.integers(1, size + 2))  # sometimes more than exist: waits
        gangs.append(
            GangRequest(
                group(f"g{g}", min_member), members(f"g{g}", size, draw(st.sampled_from((1, 2, 4))))
            )
        )
    return snap, gangs


@settings(max_examples=150, deadline=None)
@given(clusters_and_gangs())
def test_gangs_are_placed_with_at_least_min_member_or_none_and_no_node_is_over_committed(
    case: tuple[Snapshot, list[GangRequest]],
) -> None:
    snap, gangs = case
    runner = ProfileRunner(PROFILE)
    waiting: dict[str, tuple[Reservation, ...]] = {}
    for request in gangs:
        decision = schedule_gang(request, snap, runner, waiting=waiting)
        for released in decision.released:
            waiting.pop(released)
        counted = {r.pod.uid for r in decision.placed}
        if decision.outcome is Outcome.BIND:
            assert (
                request.bound + len(request.reserved) + len(decision.placed)
                >= request.group.min_member
            )
        elif decision.outcome is Outcome.WAIT:
            waiting[request.key] = decision.placed
            assert len(decision.placed) == len(request.pending) < request.group.min_member
        else:
            assert not counted
            assert all(snap.node_of(p.uid) is None for p in request.pending)
    for info in snap.nodes:
        assert info.req_scalar.get("nvidia.com/gpu", 0) <= info.alloc_scalar.get(
            "nvidia.com/gpu", 0
        )


@settings(max_examples=150, deadline=None)
@given(clusters_and_gangs())
def test_no_deadlock_a_gang_that_fits_alone_means_some_gang_is_placed(
    case: tuple[Snapshot, list[GangRequest]],
) -> None:
    """Whenever some complete gang could be placed alone on the cluster (free of waiting
    reservations), a round over all gangs places some gang."""
    snap, gangs = case
    complete = [g for g in gangs if g.existing >= g.group.min_member]
    fits_alone = []
    for request in complete:
        with snap.begin_trial():
            fits_alone.append(
                schedule_gang(request, snap, ProfileRunner(PROFILE)).outcome is Outcome.BIND
            )
    runner = ProfileRunner(PROFILE)
    waiting: dict[str, tuple[Reservation, ...]] = {}
    outcomes = []
    for request in gangs:  # incomplete ones first or not: the order the queue gives
        decision = schedule_gang(request, snap, runner, waiting=waiting)
        for released in decision.released:
            waiting.pop(released)
        if decision.outcome is Outcome.WAIT:
            waiting[request.key] = decision.placed
        outcomes.append(decision.outcome)
    if any(fits_alone):
        assert Outcome.BIND in outcomes
