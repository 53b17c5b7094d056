"""Reservations for gangs whose members differ in size: the members are packed onto the free
room by best fit, and where best fit strands a member, by a search of the other choices, so
that a pod started on room the reservation does not use never moves it at the next re-plan.

The scene: n0 has 8 GPUs but only 22 cores free (a CPU-only pod holds 42 forever), n1 and n2
are full, n3 has 8 GPUs and its cores free. The head gang wants 4 GPUs with 24 cores, 7 GPUs,
and 1 GPU twice. With all of n3 free, best fit puts the 7 on n0 and the 4 on n3. A 1-GPU pod
backfilled on n3 leaves room for that; but best fit, re-planned from scratch, now puts the 7 on
n3 (it fits there exactly) and finds no node for the 4 with its 24 cores."""

from __future__ import annotations

import pytest

from batchsched import backfill
from batchsched.backfill import GangDemand, Planner, Running, Vector, plan

GPU = "nvidia.com/gpu"


def node(gpus: int = 8) -> Vector:
    return {GPU: gpus, "cpu": 64_000, "pods": 110}


def pod(gpus: int, cpu: int = 1000) -> Vector:
    return {GPU: gpus, "cpu": cpu, "pods": 1}


ALLOC = {"n0": node(), "n1": node(4), "n2": node(4), "n3": node()}
RUNNING = [
    Running("n0", pod(0, 42_000), None),
    Running("n1", pod(4), None),
    Running("n2", pod(4), None),
]
HEAD = GangDemand("head", (pod(4, 24_000), pod(7), pod(1), pod(1)), tuple(ALLOC), None)
BACKFILLED = Running("n3", pod(1), None)


def gpus_by_node(assignment: tuple[tuple[str, Vector], ...]) -> list[tuple[str, int]]:
    return sorted((node, member[GPU]) for node, member in assignment)


def test_a_pod_backfilled_on_room_the_reservation_leaves_free_does_not_move_it() -> None:
    planner = Planner(ALLOC, RUNNING, now=0.0)
    reservation = planner.reserve(HEAD)
    assert reservation is not None and reservation.start == 0
    assert gpus_by_node(reservation.assignment) == [("n0", 1), ("n0", 7), ("n3", 1), ("n3", 4)]
    assert planner.conflicts([BACKFILLED]) == []
    again = plan(ALLOC, [*RUNNING, BACKFILLED], [HEAD], now=0.0)
    assert again.start_of("head") == 0 and again.never == ()


def test_a_gang_of_mixed_members_is_reserved_where_best_fit_alone_would_strand_a_member() -> None:
    reservation = Planner(ALLOC, [*RUNNING, BACKFILLED], now=0.0).reserve(HEAD)
    assert reservation is not None and reservation.start == 0
    assert gpus_by_node(reservation.assignment) == [("n0", 1), ("n0", 7), ("n3", 1), ("n3", 4)]


def test_with_no_backtracking_allowed_a_gang_gets_best_fit_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The search is bounded (PACK_BACKTRACKS per gang); past it the planner answers as best
    fit alone would, here: never, as n3's backfilled pod never ends."""
    monkeypatch.setattr(backfill, "PACK_BACKTRACKS", 0)
    assert Planner(ALLOC, [*RUNNING, BACKFILLED], now=0.0).reserve(HEAD) is None


@pytest.mark.parametrize(
    ("running", "members", "start", "gpus"),
    [
        pytest.param(
            [Running("n0", pod(2), None), Running("n1", pod(3), 50.0)],
            (pod(4), pod(4), pod(3)),
            50.0,
            [("n0", 4), ("n1", 3), ("n1", 4)],
            id="free room that adds up but no split of it holds the members waits for an end",
        ),
        pytest.param(
            [Running("n0", pod(2), None), Running("n1", pod(3), None)],
            (pod(4), pod(4), pod(3)),
            None,
            [],
            id="a gang that no split of the room ever holds gets no reservation",
        ),
        pytest.param(
            [Running("n0", pod(2), None), Running("n1", pod(3), None)],
            (pod(4), pod(4), pod(2)),
            0.0,
            [("n0", 2), ("n0", 4), ("n1", 4)],
            id="best fit keeps its answer where it finds one",
        ),
    ],
)
def test_a_gang_of_mixed_members_starts_when_some_split_of_the_room_holds_it(
    running: list[Running],
    members: tuple[Vector, ...],
    start: float | None,
    gpus: list[tuple[str, int]],
) -> None:
    gang = GangDemand("head", members, ("n0", "n1"), 100.0)
    reservation = Planner({"n0": node(), "n1": node()}, running, now=0.0).reserve(gang)
    if start is None:
        assert reservation is None
    else:
        assert reservation is not None and reservation.start == start
        assert gpus_by_node(reservation.assignment) == gpus
