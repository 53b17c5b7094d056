"""The live gang cycle on a fake clock: waiting, timeouts, and gangs left below quorum."""

from __future__ import annotations

from batchsched.cache import SchedulerCache
from batchsched.clock import FakeClock
from batchsched.config import default_config
from batchsched.gang.podgroup import parse_pod_group
from batchsched.metrics import SchedulerMetrics
from batchsched.model.pod import PodView
from batchsched.plugins.default_binder import DefaultBinder
from batchsched.runtime.handlers import NodeEvents, PodEvents
from batchsched.runtime.queue import SchedulingQueue
from batchsched.runtime.scheduler import Scheduler
from tests.builders import make_node, make_pod
from tests.runtime.test_handlers import Binds, Recorded

LABEL = "scheduling.x-k8s.io/pod-group"


def setup(binds: Binds) -> tuple[Scheduler, PodEvents, NodeEvents, FakeClock, Recorded]:
    clock = FakeClock()
    profiles = default_config().build_profiles()
    for plugin in profiles["gpu-scheduler"].bind:
        assert isinstance(plugin, DefaultBinder)
        plugin.client = binds
    cache = SchedulerCache(clock)
    queue = SchedulingQueue(profiles["gpu-scheduler"].queue_sort.less, clock)
    recorded = Recorded()
    scheduler = Scheduler(profiles, cache, queue, recorded, recorded, SchedulerMetrics(), clock)
    pods = PodEvents(cache, queue, scheduler.admits, scheduler.gangs)
    return scheduler, pods, NodeEvents(cache, queue), clock, recorded


def add_group(scheduler: Scheduler, name: str, min_member: int, timeout: int) -> None:
    scheduler.gangs.on_add(
        parse_pod_group(
            {
                "metadata": {"name": name, "namespace": "default", "uid": f"pg-{name}"},
                "spec": {"minMember": min_member, "scheduleTimeoutSeconds": timeout},
            }
        )
    )


def run_queue(scheduler: Scheduler) -> None:
    while (queued := scheduler.queue.pop_ready()) is not None:
        scheduler.schedule_one(queued)


async def test_members_wait_then_time_out_and_release_their_reservations() -> None:
    scheduler, pods, nodes, clock, _ = setup(Binds())
    nodes.on_add(make_node("n1").gpus(8).view())
    add_group(scheduler, "g", 3, timeout=5)
    for i in range(2):
        pods.on_add(make_pod(f"g-{i}").gpus(4).label(LABEL, "g").view())
    run_queue(scheduler)
    assert scheduler.gangs.counted("default/g", scheduler.cache.snapshot) == 2
    clock.advance(6)
    scheduler.gang_waits.expire(clock.now())
    await scheduler.drain()
    assert scheduler.gangs.counted("default/g", scheduler.cache.snapshot) == 0
    assert scheduler.queue.counts()["backoff"] == 2


def waiting_events(recorded: Recorded) -> list[tuple[str, str]]:
    return [(key, note) for key, reason, note in recorded.events if reason == "Waiting"]


async def test_a_gang_still_short_of_members_after_two_seconds_gets_one_waiting_event() -> None:
    scheduler, pods, nodes, clock, recorded = setup(Binds())
    nodes.on_add(make_node("n1").gpus(8).view())
    add_group(scheduler, "g", 3, timeout=60)
    pods.on_add(make_pod("g-0").gpus(2).label(LABEL, "g").view())
    run_queue(scheduler)
    clock.advance(1.5)
    pods.on_add(make_pod("g-1").gpus(2).label(LABEL, "g").view())
    run_queue(scheduler)
    scheduler.gang_waits.expire(clock.now())
    await scheduler.drain()
    assert waiting_events(recorded) == []  # 1.5 s: its members may be just behind
    for _ in range(3):
        clock.advance(1.0)
        scheduler.gang_waits.expire(clock.now())
    await scheduler.drain()
    ((key, note),) = waiting_events(recorded)  # once per wait, with the latest reason
    assert key == "default/g" and "2 of minMember 3" in note


async def test_a_gang_whose_members_arrive_within_two_seconds_gets_no_waiting_event() -> None:
    binds = Binds()
    scheduler, pods, nodes, clock, recorded = setup(binds)
    nodes.on_add(make_node("n1").gpus(8).view())
    add_group(scheduler, "g", 3, timeout=60)
    for i in range(3):
        pods.on_add(make_pod(f"g-{i}").gpus(2).label(LABEL, "g").view())
        run_queue(scheduler)  # each member's cycle: the first two wait at Permit
        clock.advance(0.5)
        scheduler.gang_waits.expire(clock.now())
    clock.advance(5.0)
    scheduler.gang_waits.expire(clock.now())
    await scheduler.drain()
    assert len(binds.bound) == 3
    assert waiting_events(recorded) == []


def test_a_new_leader_keeps_the_schedule_start_time_the_group_shows() -> None:
    scheduler, pods, nodes, _, _ = setup(Binds())
    nodes.on_add(make_node("n1").gpus(8).view())
    shown = {"phase": "Scheduled", "scheduled": 2, "scheduleStartTime": "2026-11-27T05:00:00Z"}
    scheduler.gangs.on_add(
        parse_pod_group(
            {
                "metadata": {"name": "g", "namespace": "default", "uid": "pg-g"},
                "spec": {"minMember": 2},
                "status": shown,
            }
        )
    )
    for i in range(2):
        pods.on_add(bound(f"g-{i}", "n1", "Pending"))
    status = scheduler.gangs.status_of("default/g", scheduler.cache.snapshot, 1_900_000_000.0)
    # its own clock would say 2030: the start the former leader wrote stands, so the status
    # the object shows is not rewritten on a failover
    assert status["scheduleStartTime"] == "2026-11-27T05:00:00Z"
    assert (status["phase"], status["scheduled"]) == ("Scheduled", 2)


def incomplete_events(recorded: Recorded) -> list[str]:
    return [key for key, reason, _ in recorded.events if reason == "GangIncomplete"]


async def test_a_gang_left_bound_below_min_member_is_reported_once_and_nothing_is_deleted() -> None:
    binds = Binds(fail={"g-2"})  # one member can never be bound
    scheduler, pods, nodes, clock, recorded = setup(binds)
    nodes.on_add(make_node("n1").gpus(8).view())
    nodes.on_add(make_node("n2").gpus(8).view())
    add_group(scheduler, "g", 3, timeout=10)
    members = [make_pod(f"g-{i}").gpus(4).label(LABEL, "g") for i in range(3)]
    for member in members:
        pods.on_add(member.view())
    run_queue(scheduler)
    await scheduler.drain()
    assert sorted(name for name, _ in binds.bound) == ["default/g-0", "default/g-1"]
    scheduler.gang_waits.expire(clock.now())
    await scheduler.drain()
    assert incomplete_events(recorded) == []  # the clock for the partial gang starts now
    clock.advance(11)
    scheduler.gang_waits.expire(clock.now())
    clock.advance(11)
    scheduler.gang_waits.expire(clock.now())
    await scheduler.drain()
    assert incomplete_events(recorded) == ["default/g"]
    # The bound members keep their places: the scheduler has no way to delete a pod.
    assert not hasattr(scheduler, "deleter")
    assert scheduler.gangs.counted("default/g", scheduler.cache.snapshot) == 2


def bound(name: str, node: str, phase: str = "Running") -> PodView:
    return make_pod(name).gpus(4).label(LABEL, "g").node(node).phase(phase).view()


async def test_a_member_that_finished_early_counts_toward_the_quorum() -> None:
    scheduler, pods, nodes, clock, recorded = setup(Binds())
    nodes.on_add(make_node("n1").gpus(8).view())
    nodes.on_add(make_node("n2").gpus(8).view())
    add_group(scheduler, "g", 3, timeout=5)
    running = [bound("g-0", "n1"), bound("g-1", "n1"), bound("g-2", "n2")]
    for pod in running:
        pods.on_add(pod)
    pods.on_update(running[0], bound("g-0", "n1", "Succeeded"))
    for _ in range(3):
        clock.advance(6)
        scheduler.gang_waits.expire(clock.now())
    await scheduler.drain()
    assert incomplete_events(recorded) == []
    snapshot = scheduler.cache.snapshot
    assert scheduler.gangs.counted("default/g", snapshot) == 2  # g-0's GPUs are free
    status = scheduler.gangs.status_of("default/g", snapshot)
    assert (status["running"], status["succeeded"], status["phase"]) == (2, 1, "Running")


async def test_a_gang_that_started_whole_is_never_reported_when_members_go() -> None:
    scheduler, pods, nodes, clock, recorded = setup(Binds())
    nodes.on_add(make_node("n1").gpus(8).view())
    add_group(scheduler, "g", 2, timeout=5)
    first, second = bound("g-0", "n1"), bound("g-1", "n1")
    pods.on_add(first)
    pods.on_add(second)
    scheduler.gang_waits.expire(clock.now())
    pods.on_delete(first)  # e.g. a finished member garbage-collected, or a node drained
    for _ in range(3):
        clock.advance(6)
        scheduler.gang_waits.expire(clock.now())
    await scheduler.drain()
    assert incomplete_events(recorded) == []


async def test_a_late_update_of_a_bound_member_does_not_queue_it_again() -> None:
    """Before: a stale update (our own condition write, sent before the binding) arrived after
    the binding, the member went back to the queue unbound, and its next cycle placed it a
    second time: `ValueError: ... already counted`, which ended the leader."""
    scheduler, pods, nodes, _, _ = setup(Binds())
    nodes.on_add(make_node("n1").gpus(8).view())
    add_group(scheduler, "g", 2, timeout=30)
    members = [make_pod(f"g-{i}").gpus(2).label(LABEL, "g") for i in range(2)]
    for member in members:
        pods.on_add(member.view())
    run_queue(scheduler)
    await scheduler.drain()
    assert scheduler.cache.is_assumed("uid-default-g-0")  # bound, not yet seen bound
    stale = make_pod("g-0").gpus(2).label(LABEL, "g").annotation("note", "x").view()
    pods.on_update(members[0].view(), stale)
    assert scheduler.queue.counts()["active"] == 0
    run_queue(scheduler)
    assert scheduler.gangs.counted("default/g", scheduler.cache.snapshot) == 2


def test_a_pending_pod_being_deleted_leaves_the_queue() -> None:
    scheduler, pods, _, _, _ = setup(Binds())
    pending = make_pod("p").cpu("1")
    pods.on_add(pending.view())
    assert scheduler.queue.counts()["active"] == 1
    deleting = make_pod("p").cpu("1").set("metadata.deletionTimestamp", "2026-01-01T00:00:00Z")
    pods.on_update(pending.view(), deleting.view())
    assert scheduler.queue.counts()["active"] == 0


async def test_a_member_recreated_after_the_rest_finished_is_placed_on_its_own() -> None:
    """Before: finished members did not count, the lone new member waited for 7 others that
    had already run, timed out, and waited again, forever."""
    binds = Binds()
    scheduler, pods, nodes, _, _ = setup(binds)
    nodes.on_add(make_node("n1").gpus(8).view())
    add_group(scheduler, "g", 3, timeout=5)
    for i in (0, 1):
        pods.on_add(bound(f"g-{i}", "n1", "Succeeded"))
    pods.on_add(make_pod("g-2").gpus(4).label(LABEL, "g").view())
    run_queue(scheduler)
    await scheduler.drain()
    assert binds.bound == [("default/g-2", "n1")]


async def test_a_finished_member_deleted_since_still_counts_toward_the_quorum() -> None:
    binds = Binds()
    scheduler, pods, nodes, _, _ = setup(binds)
    nodes.on_add(make_node("n1").gpus(8).view())
    add_group(scheduler, "g", 3, timeout=5)
    done = [bound(f"g-{i}", "n1", "Succeeded") for i in (0, 1)]
    for pod in done:
        pods.on_add(pod)
    pods.on_delete(done[0])  # garbage-collected after it succeeded
    pods.on_add(make_pod("g-2").gpus(4).label(LABEL, "g").view())
    run_queue(scheduler)
    await scheduler.drain()
    assert binds.bound == [("default/g-2", "n1")]


async def test_a_new_leader_counts_finished_members_deleted_before_it_watched() -> None:
    """Seen in the chaos smoke: two members of a 16-pod gang succeeded and were deleted, the
    other 14 were preempted and recreated, and a replica that became leader afterwards never
    saw the two: it waited for 16 members of which 14 exist, timing out every 30 s, forever.
    The leader writes status.succeeded with the deleted members counted; a new one reads it."""
    binds = Binds()
    scheduler, pods, nodes, _, _ = setup(binds)
    nodes.on_add(make_node("n1").gpus(8).view())
    scheduler.gangs.on_add(
        parse_pod_group(
            {
                "metadata": {"name": "g", "namespace": "default", "uid": "pg-g"},
                "spec": {"minMember": 3, "scheduleTimeoutSeconds": 5},
                "status": {"phase": "Running", "succeeded": 2, "failed": 0},
            }
        )
    )
    pods.on_add(make_pod("g-2").gpus(4).label(LABEL, "g").view())
    run_queue(scheduler)
    await scheduler.drain()
    assert binds.bound == [("default/g-2", "n1")]


def test_the_status_counts_finished_members_deleted_since_so_a_new_leader_can() -> None:
    scheduler, pods, nodes, _, _ = setup(Binds())
    nodes.on_add(make_node("n1").gpus(8).view())
    add_group(scheduler, "g", 3, timeout=5)
    done = [bound(f"g-{i}", "n1", "Succeeded") for i in (0, 1)]
    for pod in done:
        pods.on_add(pod)
    pods.on_delete(done[0])
    status = scheduler.gangs.status_of("default/g", scheduler.cache.snapshot)
    assert (status["succeeded"], status["failed"]) == (2, 0)


async def test_a_reserved_member_deleted_while_its_gang_waits_breaks_no_later_cycle() -> None:
    """Seen in the chaos smoke: the deleted member's reservation left the cache, the gang's
    next (rejecting) cycle tried to forget it again, and the leader died of a KeyError."""
    scheduler, pods, nodes, _, _ = setup(Binds())
    nodes.on_add(make_node("n1").gpus(8).view())
    add_group(scheduler, "g", 3, timeout=30)
    first = make_pod("g-0").gpus(4).label(LABEL, "g").view()
    pods.on_add(first)
    pods.on_add(make_pod("g-1").gpus(2).label(LABEL, "g").view())
    run_queue(scheduler)
    assert scheduler.cache.is_assumed(first.uid)  # reserved, waiting for a third member
    pods.on_delete(first)
    pods.on_add(make_pod("g-2").gpus(8).label(LABEL, "g").view())  # cannot fit: a rejection
    run_queue(scheduler)
    await scheduler.drain()
    assert scheduler.gangs.counted("default/g", scheduler.cache.snapshot) == 0
