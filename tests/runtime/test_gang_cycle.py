"""The live gang cycle on a fake clock: waiting, timeouts, and stragglers of a failed bind."""

from __future__ import annotations

from batchsched.cache import SchedulerCache
from batchsched.clock import FakeClock
from batchsched.config import default_config
from batchsched.gang.podgroup import parse_pod_group
from batchsched.metrics import SchedulerMetrics
from batchsched.plugins.default_binder import DefaultBinder
from batchsched.runtime.handlers import NodeEvents, PodEvents
from batchsched.runtime.queue import SchedulingQueue
from batchsched.runtime.scheduler import Scheduler
from tests.builders import make_node, make_pod
from tests.runtime.test_handlers import Binds, Recorded

LABEL = "scheduling.x-k8s.io/pod-group"


class Deletes:
    def __init__(self) -> None:
        self.deleted: list[str] = []

    async def delete(self, namespace: str, name: str, uid: str) -> bool:
        self.deleted.append(f"{namespace}/{name}")
        return True


def setup(binds: Binds) -> tuple[Scheduler, PodEvents, NodeEvents, FakeClock, Deletes]:
    clock = FakeClock()
    profiles = default_config().build_profiles()
    for plugin in profiles["gpu-scheduler"].bind:
        assert isinstance(plugin, DefaultBinder)
        plugin.client = binds
    cache = SchedulerCache(clock)
    queue = SchedulingQueue(profiles["gpu-scheduler"].queue_sort.less, clock)
    deletes = Deletes()
    recorded = Recorded()
    scheduler = Scheduler(
        profiles, cache, queue, recorded, recorded, SchedulerMetrics(), clock, deleter=deletes
    )
    pods = PodEvents(cache, queue, scheduler.admits, scheduler.gangs)
    return scheduler, pods, NodeEvents(cache, queue), clock, deletes


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
    scheduler.gang_cycle.expire(clock.now())
    await scheduler.drain()
    assert scheduler.gangs.counted("default/g", scheduler.cache.snapshot) == 0
    assert scheduler.queue.counts()["backoff"] == 2


async def test_a_gang_left_bound_below_min_member_past_its_timeout_loses_its_stragglers() -> None:
    binds = Binds(fail={"g-2"})  # one member can never be bound
    scheduler, pods, nodes, clock, deletes = setup(binds)
    nodes.on_add(make_node("n1").gpus(8).view())
    nodes.on_add(make_node("n2").gpus(8).view())
    add_group(scheduler, "g", 3, timeout=10)
    members = [make_pod(f"g-{i}").gpus(4).label(LABEL, "g") for i in range(3)]
    for member in members:
        pods.on_add(member.view())
    run_queue(scheduler)
    await scheduler.drain()
    assert sorted(name for name, _ in binds.bound) == ["default/g-0", "default/g-1"]
    scheduler.gang_cycle.expire(clock.now())
    assert deletes.deleted == []  # the clock for the partial gang starts now
    clock.advance(11)
    scheduler.gang_cycle.expire(clock.now())
    await scheduler.drain()
    assert sorted(deletes.deleted) == ["default/g-0", "default/g-1"]
