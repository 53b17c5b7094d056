"""A preemptor parked while its victims go: no cycle until its room is made, no move by other
pods' events, told how far its victims are as each goes, sent back when its hold is released.

The world and builders are those of tests/runtime/test_preempting.py (fake clock, faked API).
"""

from __future__ import annotations

import pytest

from batchsched.runtime.preemption_waits import NEWS_INTERVAL_S
from tests.builders import make_node, make_pod
from tests.runtime.test_preempting import FixedPlanner, full_node, high, low, world


async def test_a_cluster_event_during_the_last_eviction_request_gives_the_preemptor_no_cycle() -> (
    None
):
    # Its victims are still there while the request is made: a cycle could only fail (a
    # filter pass over every node, a status write and an Event); their going sends it back.
    victims = [low("v1", "n1"), low("v2", "n1")]
    w = world(FixedPlanner(victims, "n1"))
    full_node(w, victims)
    failed_cycles: list[int] = []

    def meanwhile(calls: int) -> None:
        w.retry()  # a cluster event while this eviction is asked for
        failed_cycles.append(w.scheduler.live.counts.unschedulable)

    w.evictions.before = meanwhile
    w.pods.on_add(high("p"))
    await w.settle()

    assert len(w.evictions.calls) == 2
    assert failed_cycles == [1, 1]  # the cycle that planned, and none during either request
    for victim in victims:
        w.pods.on_delete(victim)
    await w.settle()
    assert w.bound("p") == "n1"


async def test_a_preemptor_waiting_for_its_victims_is_not_moved_when_another_pod_goes() -> None:
    victims = [low("v1", "n1"), low("v2", "n1")]
    w = world(FixedPlanner(victims, "n1"))
    full_node(w, victims)
    bystander = make_pod("bystander").gpus(4).cpu("1").node("n2").view()
    w.nodes.on_add(make_node("n2").gpus(8).cpu("64").view())
    w.pods.on_add(bystander)
    w.pods.on_add(high("p"))
    await w.settle()
    w.retry()  # parked now: its victims are going
    assert w.scheduler.queue.counts() == {"active": 0, "backoff": 0, "unschedulable": 1}

    w.pods.on_delete(bystander)  # frees room elsewhere, but it waits for its own victims
    assert w.scheduler.queue.counts() == {"active": 0, "backoff": 0, "unschedulable": 1}
    for victim in victims:
        w.pods.on_delete(victim)
    assert w.scheduler.queue.counts()["active"] == 1  # its room is made


async def test_a_waiting_preemptor_is_told_as_each_victim_goes_without_a_cycle() -> None:
    victims = [low("v1", "n1"), low("v2", "n1"), low("v3", "n1", gpus=0)]
    w = world(FixedPlanner(victims, "n1"))
    full_node(w, victims)
    w.pods.on_add(high("p"))
    await w.settle()
    attempts = w.scheduler.live.counts.attempts

    w.pods.on_delete(victims[0])
    await w.scheduler.drain()
    assert w.told("p").endswith(", 1 of 3 terminated")
    assert w.notes("p", "FailedScheduling")[-1].endswith(", 1 of 3 terminated")
    assert w.scheduler.live.counts.attempts == attempts  # no cycle: only the news


async def test_after_the_first_victim_a_waiting_preemptor_is_told_once_per_interval() -> None:
    # Victims evicted one after another often go within a second: a note (a status write and
    # an Event) for each would say little more than the first.
    victims = [low(f"v{i}", "n1", gpus=2) for i in range(4)]
    w = world(FixedPlanner(victims, "n1"))
    full_node(w, victims)
    w.pods.on_add(high("p"))
    await w.settle()

    w.pods.on_delete(victims[0])
    w.clock.advance(NEWS_INTERVAL_S - 0.5)
    w.pods.on_delete(victims[1])  # too soon after the last note
    await w.scheduler.drain()
    assert w.notes("p", "FailedScheduling")[-1].endswith(", 1 of 4 terminated")
    w.clock.advance(0.5)
    w.pods.on_delete(victims[2])
    await w.scheduler.drain()
    notes = w.notes("p", "FailedScheduling")
    assert len(notes) == 3  # the plan, 1 of 4, 3 of 4
    assert notes[-1].endswith(", 3 of 4 terminated")


async def test_a_preemptor_released_from_its_hold_is_tried_again_at_once() -> None:
    # Parked, no cluster event moves it: the release itself must send it back.
    victims = [low("v1", "n1", gpus=8)]
    planner = FixedPlanner(victims, "n1")
    w = world(planner, hold_timeout_s=60.0)
    full_node(w, victims)
    w.pods.on_add(high("p"))
    await w.settle()
    w.retry()  # parked
    assert w.scheduler.queue.counts()["unschedulable"] == 1

    w.clock.advance(61)
    w.preempting.expire(w.clock.now())
    assert w.scheduler.queue.counts()["active"] == 1
    w.run_queue()
    assert len(planner.requests) == 2  # it planned again


@pytest.mark.parametrize(
    ("victims_on", "room_after_first"),
    [(("n1", "n2"), True), (("n2", "n2"), False)],
    ids=[
        "victims on the nominated node: room is made when they went, the rest may still go",
        "no victim on the nominated node: room is made when all of them went",
    ],
)
async def test_when_a_plan_has_made_its_room(
    victims_on: tuple[str, str], room_after_first: bool
) -> None:
    victims = [low("v1", victims_on[0], gpus=8), low("v2", victims_on[1], gpus=8)]
    w = world(FixedPlanner(victims, "n1"))
    blocker = low("blocker", "n1", gpus=8, priority=2000)
    full_node(w, [v for v in victims if v.node_name == "n1"] or [blocker], "n1")
    full_node(w, [v for v in victims if v.node_name == "n2"], "n2")
    w.pods.on_add(high("p"))
    await w.settle()
    (flight,) = w.preempting.flights.values()
    snapshot = w.scheduler.cache.snapshot
    assert not flight.room_made(snapshot)

    w.pods.on_delete(victims[0])
    assert flight.room_made(snapshot) is room_after_first
    w.pods.on_delete(victims[1])
    assert flight.room_made(snapshot)
