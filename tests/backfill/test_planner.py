"""The reservation planner: earliest start and nodes for a head gang, reservations that hold
their window, and the EASY backfill check (`conflicts`)."""

from __future__ import annotations

import dataclasses

import pytest

from batchsched.backfill import (
    FOREVER,
    GangDemand,
    Planner,
    Reservation,
    Running,
    Vector,
    plan,
    vector,
)
from batchsched.model.resources import Resources

GPU = "nvidia.com/gpu"


def node(gpus: int = 8) -> Vector:
    return {GPU: gpus, "cpu": 64_000, "pods": 110}


def pod(gpus: int, cpu: int = 1000) -> Vector:
    return {GPU: gpus, "cpu": cpu, "pods": 1}


def gang(
    key: str,
    members: int,
    gpus: int,
    runtime: float | None,
    nodes: tuple[str, ...],
    protected: bool = True,
) -> GangDemand:
    return GangDemand(key, tuple(pod(gpus) for _ in range(members)), nodes, runtime, protected)


def busy(name: str, until: float | None, gpus: int = 8) -> Running:
    return Running(name, pod(gpus), until)


NODES4 = ("n0", "n1", "n2", "n3")
ALLOC4 = {n: node() for n in NODES4}


@pytest.mark.parametrize(
    ("running", "members", "start", "nodes"),
    [
        pytest.param(
            [busy("n0", 10), busy("n1", 20), busy("n2", 30), busy("n3", 40)],
            2,
            20,
            {"n0", "n1"},
            id="two nodes wanted: the second end time frees them",
        ),
        pytest.param(
            [busy("n0", 10), busy("n1", 20), busy("n2", 30), busy("n3", 40)],
            3,
            30,
            {"n0", "n1", "n2"},
            id="three nodes wanted: the third end time",
        ),
        pytest.param(
            [busy("n0", None), busy("n1", 10), busy("n2", 20), busy("n3", None)],
            2,
            20,
            {"n1", "n2"},
            id="pods with unknown runtime never free their nodes",
        ),
        pytest.param(
            [
                busy("n0", 30, 4),
                busy("n0", 10, 4),
                busy("n1", None),
                busy("n2", None),
                busy("n3", None),
            ],
            1,
            30,
            {"n0"},
            id="a node is free when its last pod in the way ends",
        ),
        pytest.param(
            [busy("n0", 50), busy("n1", None)],
            3,
            50,
            {"n0", "n2", "n3"},
            id="two nodes free now are not enough: waits for the end that frees a third",
        ),
        pytest.param([busy("n0", 50)], 2, 0, {"n1", "n2"}, id="enough free now: starts now"),
        pytest.param(
            [busy("n0", -5), busy("n1", None), busy("n2", None), busy("n3", None)],
            1,
            0,
            {"n0"},
            id="a pod past its expected end is counted as ending now",
        ),
    ],
)
def test_a_head_gang_is_reserved_at_the_earliest_end_that_frees_enough_nodes(
    running: list[Running], members: int, start: float, nodes: set[str]
) -> None:
    planner = Planner(ALLOC4, running, now=0.0)
    reservation = planner.reserve(gang("head", members, 8, 100.0, NODES4))
    assert reservation is not None
    assert (reservation.start, reservation.end) == (start, start + 100.0)
    assert len(reservation.nodes) == members
    if len(nodes) == members:
        assert reservation.nodes == nodes


def test_a_gang_that_needs_a_node_that_never_frees_gets_no_reservation() -> None:
    running = [busy("n0", None), busy("n1", 10), busy("n2", 20), busy("n3", None)]
    planner = Planner(ALLOC4, running, now=0.0)
    assert planner.reserve(gang("head", 3, 8, 100.0, NODES4)) is None
    assert planner.plan().never == ("head",)
    assert planner.plan().reservations == ()


def test_a_gang_only_considers_the_nodes_it_may_run_on() -> None:
    running = [busy("n0", 10), busy("n1", 20), busy("n2", 30), busy("n3", 40)]
    reservation = Planner(ALLOC4, running, 0.0).reserve(gang("head", 1, 8, 5.0, ("n2", "n3")))
    assert reservation is not None and (reservation.start, reservation.nodes) == (
        30.0,
        frozenset({"n2"}),
    )


@pytest.mark.parametrize(
    ("second", "start"),
    [
        pytest.param(
            gang("b", 1, 8, 10.0, ("n1",)), 0.0, id="a gang that ends before the window starts now"
        ),
        pytest.param(
            gang("b", 1, 8, 20.0, ("n1",)), 0.0, id="one ending as the window opens starts now"
        ),
        pytest.param(
            gang("b", 1, 8, 30.0, ("n1",)), 120.0, id="one overlapping the window waits for its end"
        ),
        pytest.param(
            gang("b", 1, 8, None, ("n1",)), 120.0, id="one of unknown runtime waits for its end"
        ),
        pytest.param(
            gang("b", 1, 4, 30.0, ("n2",)),
            0.0,
            id="one on a node the reservation leaves alone starts now",
        ),
    ],
)
def test_a_reservation_blocks_later_reservations_on_its_nodes_during_its_window(
    second: GangDemand, start: float
) -> None:
    alloc = {"n0": node(), "n1": node(), "n2": node(4)}
    planner = Planner(alloc, [busy("n0", 20)], now=0.0)
    head = planner.reserve(gang("head", 2, 8, 100.0, ("n0", "n1")))
    assert head is not None and (head.start, head.end, head.nodes) == (
        20.0,
        120.0,
        frozenset({"n0", "n1"}),
    )
    found = planner.reserve(second)
    assert found is not None and found.start == start


def test_a_reservation_of_unknown_runtime_holds_its_nodes_forever() -> None:
    planner = Planner({"n0": node()}, [busy("n0", 20, 4)], now=0.0)
    head = planner.reserve(gang("head", 1, 8, None, ("n0",)))
    assert head is not None and (head.start, head.end) == (20, FOREVER)
    before = planner.reserve(gang("b", 1, 1, 1.0, ("n0",)))
    assert before is not None and before.start == 0  # fits before the window
    assert planner.reserve(gang("c", 1, 1, 30.0, ("n0",))) is None


def test_plan_reserves_in_order_and_reports_starts() -> None:
    result = plan(
        ALLOC4,
        [busy("n0", 10), busy("n1", 20), busy("n2", 30), busy("n3", 40)],
        [gang("a", 4, 8, 5.0, NODES4), gang("b", 1, 8, 5.0, NODES4)],
        now=0.0,
    )
    assert [r.key for r in result.reservations] == ["a", "b"]
    assert result.start_of("a") == 40
    assert result.start_of("b") == 10  # before a's window, on the first node to free
    assert result.start_of("nobody") is None


# conflicts: n0 busy until 50, n1 runs forever, n2 and n3 free now. The head wants two whole
# nodes for 100 s from 50: its reservation is n0 and one of n2/n3; the other stays out of it.
def _reserved(protected: bool = True) -> tuple[Planner, Reservation]:
    planner = Planner(ALLOC4, [busy("n0", 50), busy("n1", None)], now=0.0)
    head = planner.reserve(gang("head", 3, 8, 100.0, NODES4, protected))
    assert head is not None and head.start == 50 and head.nodes == {"n0", "n2", "n3"}
    return planner, head


@pytest.mark.parametrize(
    ("starting", "allowed"),
    [
        pytest.param(
            [Running("n2", pod(8), 40.0)],
            True,
            id="a gang ending before the reservation starts passes",
        ),
        pytest.param([Running("n2", pod(8), 50.0)], True, id="a gang ending as it starts passes"),
        pytest.param(
            [Running("n2", pod(8), 60.0)], False, id="a gang ending inside its window is refused"
        ),
        pytest.param(
            [Running("n2", pod(1), None)],
            False,
            id="a gang with unknown runtime on its nodes is refused",
        ),
        pytest.param(
            [Running("n2", pod(1), 40.0), Running("n3", pod(1), 51.0)],
            False,
            id="one late member is enough to refuse",
        ),
    ],
)
def test_conflicts_on_a_reservation_that_starts_later(
    starting: list[Running], allowed: bool
) -> None:
    planner, head = _reserved()
    assert planner.conflicts(starting) == ([] if allowed else [head])


def test_a_gang_on_other_nodes_passes_even_with_unknown_runtime() -> None:
    planner = Planner({**ALLOC4, "n4": node()}, [busy("n0", 50), busy("n1", None)], now=0.0)
    head = planner.reserve(gang("head", 3, 8, 100.0, NODES4))
    assert head is not None and "n4" not in head.nodes
    assert planner.conflicts([Running("n4", pod(8), None), Running("n1", pod(0), None)]) == []


@pytest.mark.parametrize(
    ("gpus", "allowed"),
    [
        pytest.param(2, True, id="one that still leaves room on the reservation's node passes"),
        pytest.param(3, False, id="one that takes more than the reservation leaves is refused"),
    ],
)
def test_room_left_on_a_reservation_s_nodes_may_be_used(gpus: int, allowed: bool) -> None:
    planner = Planner({"n0": node(), "n1": node()}, [busy("n0", 50, 4), busy("n1", None, 4)], 0.0)
    head = planner.reserve(gang("head", 1, 6, 100.0, ("n0", "n1")))
    assert head is not None and (head.start, head.nodes) == (50.0, frozenset({"n0"}))
    assert planner.conflicts([Running("n0", pod(gpus), None)]) == ([] if allowed else [head])


def test_members_of_one_starting_gang_add_up_on_a_node() -> None:
    planner = Planner({"n0": node(), "n1": node()}, [busy("n0", 50, 4), busy("n1", None, 4)], 0.0)
    head = planner.reserve(gang("head", 1, 6, 100.0, ("n0", "n1")))
    assert planner.conflicts([Running("n0", pod(1), None)]) == []
    assert planner.conflicts([Running("n0", pod(1), None)] * 3) == [head]


def test_non_protected_reservations_are_not_defended() -> None:
    planner, head = _reserved(protected=False)
    assert planner.conflicts([Running("n2", pod(8), None)]) == []
    assert planner.plan().reservations == (head,)


def test_every_protected_reservation_in_the_way_is_reported() -> None:
    planner, head = _reserved()
    later = planner.reserve(gang("later", 1, 8, 60.0, ("n1", "n2", "n3", "n0")))
    assert later is not None and later.start == 150
    assert planner.conflicts([Running(n, pod(8), 500.0) for n in later.nodes]) == [head, later]


def test_a_started_gang_holds_its_node_for_later_reservations() -> None:
    planner = Planner({"n0": node()}, [], now=0.0)
    planner.start([Running("n0", pod(8), 30.0)])
    reservation = planner.reserve(gang("head", 1, 8, 10.0, ("n0",)))
    assert reservation is not None and reservation.start == 30


def test_vector_counts_every_requested_resource_and_a_pod_slot() -> None:
    requests = Resources(milli_cpu=1500, memory=2**30, pods=7, scalar={GPU: 2})
    assert vector(requests) == {"cpu": 1500, "memory": 2**30, GPU: 2, "pods": 1}
    assert vector(Resources(milli_cpu=4000, pods=110), pods=110) == {"cpu": 4000, "pods": 110}


RACKS = (frozenset({"n0", "n2"}), frozenset({"n1", "n3"}))


def test_a_gang_that_requires_one_domain_is_reserved_where_one_domain_frees_first() -> None:
    """n0 and n1 free first (10, 20), but they are in different racks: the earliest start
    inside one rack is 30 (n0 and n2)."""
    running = [busy("n0", 10), busy("n1", 20), busy("n2", 30), busy("n3", 40)]
    head = dataclasses.replace(gang("head", 2, 8, 100.0, NODES4), domains=RACKS)
    reservation = Planner(ALLOC4, running, 0.0).reserve(head)
    assert reservation is not None
    assert (reservation.start, reservation.nodes) == (30.0, frozenset({"n0", "n2"}))


def test_a_gang_too_big_for_every_domain_gets_no_reservation() -> None:
    head = dataclasses.replace(gang("head", 3, 8, 100.0, NODES4), domains=RACKS)
    planner = Planner(ALLOC4, [], 0.0)
    assert planner.reserve(head) is None
    assert planner.plan().never == ("head",)
