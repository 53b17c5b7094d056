"""SchedulingQueue: ordering, backoff, the unschedulable pool and the lost-event guard."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from batchsched.clock import FakeClock
from batchsched.framework.interfaces import QueuedPod
from batchsched.plugins.priority_sort import PrioritySort
from batchsched.runtime.queue import SchedulingQueue, spec_changed
from tests.builders import PodBuilder, make_pod

EMPTY = {"active": 0, "backoff": 0, "unschedulable": 0}


def new_queue(**kwargs: float) -> tuple[SchedulingQueue, FakeClock]:
    clock = FakeClock()
    return SchedulingQueue(PrioritySort().less, clock, **kwargs), clock


def pop(queue: SchedulingQueue) -> QueuedPod:
    qp = queue.pop_ready()
    assert qp is not None
    return qp


def drain(queue: SchedulingQueue) -> list[str]:
    names = []
    while (qp := queue.pop_ready()) is not None:
        names.append(qp.pod.name)
    return names


def park(queue: SchedulingQueue, name: str) -> QueuedPod:
    """Add a pod, pop it and report that no node fits it."""
    queue.add(make_pod(name).view())
    qp = pop(queue)
    queue.requeue_unschedulable(qp, queue.scheduling_cycle())
    queue.done(qp.pod.uid)
    return qp


@pytest.mark.parametrize(
    ("arrivals", "order"),
    [
        ([("low", 0, 0), ("high", 10, 1)], ["high", "low"]),
        ([("late", 5, 2), ("early", 5, 0), ("mid", 5, 1)], ["early", "mid", "late"]),
        ([("b", 5, 0), ("a", 5, 0), ("c", 5, 0)], ["b", "a", "c"]),
        ([("x", 1, 0), ("y", 3, 0), ("z", 2, 5)], ["y", "z", "x"]),
    ],
    ids=[
        "higher priority pops first even when it came later",
        "equal priority pops in enqueue order",
        "equal priority and enqueue time pops in insertion order",
        "priority outranks how long a pod has waited",
    ],
)
def test_active_order(arrivals: list[tuple[str, int, float]], order: list[str]) -> None:
    queue, clock = new_queue()
    start = clock.now()
    for name, priority, at in sorted(arrivals, key=lambda a: a[2]):
        clock.advance(start + at - clock.now())
        queue.add(make_pod(name).priority(priority).view())
    assert drain(queue) == order


@pytest.mark.parametrize(
    ("attempts", "seconds"),
    [(0, 1.0), (1, 1.0), (2, 2.0), (3, 4.0), (4, 8.0), (5, 10.0), (9, 10.0), (10_000, 10.0)],
    ids=[
        "a pod never tried backs off the initial second",
        "the first failure backs off one second",
        "the second failure doubles it",
        "the third failure doubles it again",
        "the fourth failure waits eight seconds",
        "the fifth failure is capped at ten seconds",
        "later failures stay at the cap",
        "a pod retried for weeks stays at the cap",
    ],
)
def test_backoff_duration(attempts: int, seconds: float) -> None:
    queue, _ = new_queue()
    assert queue.backoff_duration(attempts) == seconds


def test_attempts_grow_with_every_pop_and_set_the_backoff() -> None:
    queue, clock = new_queue()
    queue.add(make_pod("a").view())
    waits = []
    for expected_attempts in range(1, 7):
        qp = pop(queue)
        assert qp.attempts == expected_attempts
        queue.requeue_backoff(qp)
        queue.done(qp.pod.uid)
        waited = 0.0
        while queue.counts()["backoff"]:
            assert queue.pop_ready() is None
            clock.advance(0.5)
            waited += 0.5
            queue.flush()
        waits.append(waited)
    assert waits == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]


@pytest.mark.parametrize(
    ("after_failure", "where_after_event"),
    [(0.5, "backoff"), (1.0, "active"), (60.0, "active")],
    ids=[
        "an event during the backoff moves the pod to backoff",
        "an event right as the backoff ends moves the pod to active",
        "an event long after the failure moves the pod to active",
    ],
)
def test_move_all_sends_parked_pods_back(after_failure: float, where_after_event: str) -> None:
    queue, clock = new_queue()
    park(queue, "a")
    clock.advance(after_failure)
    assert queue.pop_ready() is None
    assert queue.counts() == {**EMPTY, "unschedulable": 1}
    queue.move_all("NodeAdd")
    assert queue.counts() == {**EMPTY, where_after_event: 1}
    clock.advance(1.0)
    assert pop(queue).pod.name == "a"


@pytest.mark.parametrize(
    ("parked_for", "flushed"),
    [(299.0, False), (300.0, True), (301.0, True)],
    ids=[
        "a pod parked just under five minutes stays parked",
        "a pod parked five minutes is flushed back",
        "a pod parked over five minutes is flushed back",
    ],
)
def test_unschedulable_pods_are_flushed_after_five_minutes(
    parked_for: float, flushed: bool
) -> None:
    queue, clock = new_queue()
    park(queue, "a")
    clock.advance(parked_for)
    qp = queue.pop_ready()
    assert (qp is not None) is flushed
    assert queue.counts()["unschedulable"] == (0 if flushed else 1)


def test_a_pod_parked_for_a_wait_of_its_own_moves_only_when_activated() -> None:
    # A preemptor waiting for its victims: any pod's going would move it only to be parked
    # again; its own victims' going activates it.
    queue, clock = new_queue()
    queue.add(make_pod("p").view())
    queue.park(pop(queue))
    park(queue, "q")  # no node fitted it: an event may help
    queue.move_all("AssignedPodDelete")
    clock.advance(10.0)
    assert drain(queue) == ["q"]
    assert queue.counts() == {**EMPTY, "unschedulable": 1}
    queue.activate(["uid-default-p"])
    assert drain(queue) == ["p"]


@pytest.mark.parametrize(
    ("change", "moved"),
    [("spec", True), ("status", False)],
    ids=["a change to its spec moves it", "a change to its status alone does not"],
)
def test_a_parked_pod_updated_while_it_waits(change: str, moved: bool) -> None:
    queue, _ = new_queue()
    pod = make_pod("p").view()
    queue.add(pod)
    queue.park(pop(queue))
    new = (
        make_pod("p").cpu("2").view() if change == "spec" else make_pod("p").phase("Pending").view()
    )
    queue.update(pod, new)
    queue.move_all("AssignedPodDelete")  # still parked for its own wait, when not moved
    assert (queue.pop_ready() is not None) is moved


def test_the_flush_takes_only_pods_parked_long_enough() -> None:
    queue, clock = new_queue()
    park(queue, "old")
    clock.advance(200)
    park(queue, "young")
    clock.advance(100)
    queue.flush()
    assert queue.counts() == {**EMPTY, "active": 1, "unschedulable": 1}
    assert drain(queue) == ["old"]


@pytest.mark.parametrize(
    ("event_during_cycle", "lands_in"),
    [(False, "unschedulable"), (True, "backoff")],
    ids=[
        "a pod failing with no event during its cycle is parked",
        "a pod failing after an event during its cycle backs off instead of being parked",
    ],
)
def test_lost_event_guard(event_during_cycle: bool, lands_in: str) -> None:
    queue, _ = new_queue()
    queue.move_all("NodeAdd")  # an event before the cycle does not count
    queue.add(make_pod("a").view())
    qp = pop(queue)
    cycle = queue.scheduling_cycle()
    if event_during_cycle:
        queue.move_all("NodeAdd")
    queue.requeue_unschedulable(qp, cycle)
    queue.done(qp.pod.uid)
    assert queue.counts() == {**EMPTY, lands_in: 1}


def test_an_event_in_a_later_cycle_does_not_spare_an_earlier_pod_from_the_pool() -> None:
    queue, _ = new_queue()
    queue.add(make_pod("a").view())
    queue.add(make_pod("b").view())
    a = pop(queue)
    a_cycle = queue.scheduling_cycle()
    queue.move_all("PodDelete")
    b = pop(queue)
    queue.requeue_unschedulable(a, a_cycle)
    queue.requeue_unschedulable(b, queue.scheduling_cycle())
    assert queue.counts() == {**EMPTY, "backoff": 1, "unschedulable": 1}


@pytest.mark.parametrize(
    "requeue",
    ["unschedulable", "backoff"],
    ids=[
        "a pod deleted in flight is not parked after its cycle fails",
        "a pod deleted in flight is not retried after its binding fails",
    ],
)
def test_a_pod_deleted_in_flight_is_remembered_and_never_requeued(requeue: str) -> None:
    queue, _ = new_queue()
    queue.add(make_pod("a").view())
    qp = pop(queue)
    assert not queue.was_deleted(qp.pod.uid)
    queue.delete(qp.pod)
    assert queue.was_deleted(qp.pod.uid)
    if requeue == "unschedulable":
        queue.requeue_unschedulable(qp, queue.scheduling_cycle())
    else:
        queue.requeue_backoff(qp)
    queue.done(qp.pod.uid)
    assert queue.counts() == EMPTY and not queue.was_deleted(qp.pod.uid)


@pytest.mark.parametrize(
    ("where", "count"),
    [("active", "active"), ("backoff", "backoff"), ("unschedulable", "unschedulable")],
    ids=[
        "a deleted active pod is gone",
        "a deleted backing-off pod is gone",
        "a deleted parked pod is gone",
    ],
)
def test_delete_removes_the_pod_wherever_it_waits(where: str, count: str) -> None:
    queue, clock = new_queue()
    queue.add(make_pod("a").view())
    if where == "backoff":
        queue.requeue_backoff(pop(queue))
    elif where == "unschedulable":
        park(queue, "a")
    assert queue.counts()[count] == 1
    queue.delete(make_pod("a").view())
    clock.advance(1000)
    assert queue.counts() == EMPTY and queue.pop_ready() is None


@pytest.mark.parametrize(
    ("change", "where"),
    [
        (lambda b: b.label("team", "new"), "active"),
        (lambda b: b.cpu("1"), "active"),
        (lambda b: b.toleration("gpu", "", "NoSchedule", "Exists"), "active"),
        (lambda b: b.phase("Pending").set("status.reason", "x"), "unschedulable"),
        (lambda b: b, "unschedulable"),
    ],
    ids=[
        "a label change moves a parked pod back",
        "a request change moves a parked pod back",
        "a new toleration moves a parked pod back",
        "a status-only change leaves it parked",
        "an identical update leaves it parked",
    ],
)
def test_update_of_a_parked_pod(change: Callable[[PodBuilder], object], where: str) -> None:
    queue, clock = new_queue()
    park(queue, "a")
    clock.advance(5)
    builder = make_pod("a")
    change(builder)
    queue.update(make_pod("a").view(), builder.view())
    assert queue.counts() == {**EMPTY, where: 1}


def test_a_change_while_in_flight_sends_the_failed_pod_to_backoff_not_the_pool() -> None:
    queue, clock = new_queue()
    queue.add(make_pod("a").view())
    qp = pop(queue)
    queue.update(qp.pod, make_pod("a").label("fixed", "yes").view())
    queue.requeue_unschedulable(qp, queue.scheduling_cycle())
    queue.done(qp.pod.uid)
    assert queue.counts() == {**EMPTY, "backoff": 1}
    clock.advance(1)
    assert pop(queue).pod.labels["fixed"] == "yes"


def test_adding_a_pod_already_queued_updates_it_in_place() -> None:
    queue, _ = new_queue()
    queue.add(make_pod("a").priority(1).view())
    queue.add(make_pod("b").priority(5).view())
    queue.add(make_pod("a").priority(9).view())
    assert queue.counts() == {**EMPTY, "active": 2}
    assert drain(queue) == ["a", "b"]


def test_adding_a_pod_in_flight_does_not_queue_it_twice() -> None:
    queue, _ = new_queue()
    queue.add(make_pod("a").view())
    qp = pop(queue)
    queue.add(make_pod("a").view())
    assert queue.counts() == EMPTY
    queue.done(qp.pod.uid)


def test_an_update_for_an_unknown_pod_adds_it() -> None:
    queue, _ = new_queue()
    queue.update(make_pod("a").view(), make_pod("a").view())
    assert drain(queue) == ["a"]


def test_a_failed_pod_goes_behind_pods_of_its_priority_that_waited() -> None:
    queue, clock = new_queue()
    queue.add(make_pod("first").view())
    clock.advance(1)
    queue.add(make_pod("second").view())
    qp = pop(queue)
    queue.requeue_backoff(qp)
    queue.done(qp.pod.uid)
    clock.advance(5)
    assert drain(queue) == ["second", "first"]


def test_spec_changed_ignores_the_phase_only() -> None:
    base = make_pod("a").view()
    assert not spec_changed(base, make_pod("a").phase("Running").view())
    assert spec_changed(base, make_pod("a").annotation("k", "v").view())


async def test_pop_returns_a_ready_pod_at_once() -> None:
    queue, _ = new_queue()
    queue.add(make_pod("a").view())
    qp = await asyncio.wait_for(queue.pop(), timeout=5)
    assert qp.pod.name == "a" and queue.scheduling_cycle() == 1


async def test_pop_waits_until_a_pod_is_added() -> None:
    queue, _ = new_queue()
    waiter = asyncio.create_task(queue.pop())
    await asyncio.sleep(0)  # one loop turn: the task runs until it blocks on the queue
    assert not waiter.done()
    queue.add(make_pod("a").view())
    qp = await asyncio.wait_for(waiter, timeout=5)
    assert qp.pod.name == "a"


async def test_pop_waits_until_a_move_makes_a_pod_ready() -> None:
    queue, clock = new_queue()
    park(queue, "a")
    clock.advance(30)
    waiter = asyncio.create_task(queue.pop())
    await asyncio.sleep(0)
    assert not waiter.done()
    queue.move_all("NodeAdd")
    assert (await asyncio.wait_for(waiter, timeout=5)).pod.name == "a"


class LoopClock:
    """The event loop's own clock, so the queue's backoff timer fires for real."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    def now(self) -> float:
        return self._loop.time()

    def wall(self) -> float:
        return self._loop.time()


async def test_pop_wakes_when_the_backoff_ends() -> None:
    clock = LoopClock(asyncio.get_running_loop())
    queue = SchedulingQueue(PrioritySort().less, clock, initial_backoff=0.01)
    queue.add(make_pod("a").view())
    qp = await queue.pop()
    queue.requeue_backoff(qp)
    queue.done(qp.pod.uid)
    failed_at = clock.now()
    again = await asyncio.wait_for(queue.pop(), timeout=5)
    assert again.pod.name == "a" and clock.now() - failed_at >= 0.01


async def test_a_cancelled_pop_leaves_the_queue_usable() -> None:
    queue, _ = new_queue()
    waiter = asyncio.create_task(queue.pop())
    await asyncio.sleep(0)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    queue.add(make_pod("a").view())
    assert (await asyncio.wait_for(queue.pop(), timeout=5)).pod.name == "a"


def test_with_nothing_active_a_pod_moved_back_by_an_event_leaves_its_backoff_early() -> None:
    queue, clock = new_queue()
    park(queue, "a")
    clock.advance(0.5)
    queue.move_all("AssignedPodDelete")
    assert queue.counts() == {**EMPTY, "backoff": 1}
    assert pop(queue).pod.name == "a"  # 0.5 s of backoff left, but the queue is idle


def test_an_active_pod_goes_before_one_leaving_its_backoff_early() -> None:
    queue, clock = new_queue()
    park(queue, "a")
    clock.advance(0.5)
    queue.move_all("NodeAdd")
    queue.add(make_pod("b").view())
    assert drain(queue) == ["b", "a"]


def test_a_pod_backing_off_after_an_error_waits_its_backoff_out() -> None:
    queue, clock = new_queue()
    queue.add(make_pod("a").view())
    qp = pop(queue)
    queue.requeue_backoff(qp)
    queue.done(qp.pod.uid)
    assert queue.pop_ready() is None
    clock.advance(1.0)
    assert pop(queue).pod.name == "a"


def test_the_schedulers_own_estimated_start_annotation_is_not_a_spec_change() -> None:
    # Writing a waiting pod's estimate must not send it back to be tried again.
    queue, _ = new_queue()
    parked = park(queue, "a").pod
    annotated = make_pod("a").annotation(
        "batchsched.io/estimated-start-time", "2027-01-01T00:00:00Z"
    )
    queue.update(parked, annotated.view())
    assert queue.counts() == {**EMPTY, "unschedulable": 1}
    queue.update(annotated.view(), annotated.annotation("team", "x").view())
    assert queue.counts()["unschedulable"] == 0  # a user's annotation may matter: retried


def test_the_queue_holds_a_pod_while_queued_parked_or_in_a_cycle_and_not_once_done() -> None:
    queue, _ = new_queue()
    pod = make_pod("held").view()
    assert not queue.holds(pod.uid)
    queue.add(pod)
    active = queue.holds(pod.uid)
    queued = pop(queue)
    in_cycle = queue.holds(pod.uid)
    queue.requeue_unschedulable(queued, queue.scheduling_cycle())
    parked = queue.holds(pod.uid)
    queue.take([pod.uid])
    queue.done(pod.uid)
    assert (active, in_cycle, parked, queue.holds(pod.uid)) == (True, True, True, False)
