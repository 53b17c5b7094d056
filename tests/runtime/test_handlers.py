"""Watch events routed into the cache and the queue, and the scheduling loop's outcomes."""

from __future__ import annotations

from batchsched.cache import SchedulerCache
from batchsched.clock import FakeClock
from batchsched.config import default_config
from batchsched.framework.interfaces import QueuedPod
from batchsched.kube.binder import ObjectRef
from batchsched.metrics import SchedulerMetrics
from batchsched.model.pod import PodView
from batchsched.plugins.default_binder import DefaultBinder
from batchsched.runtime.handlers import NodeEvents, PodEvents
from batchsched.runtime.queue import SchedulingQueue
from batchsched.runtime.scheduler import Scheduler
from tests.builders import make_node, make_pod


class Recorded:
    """Collects what the scheduler reports (the API side is tested in tests/integration)."""

    def __init__(self) -> None:
        self.unschedulable: list[tuple[str, str]] = []
        self.events: list[tuple[str, str, str]] = []

    async def mark_unschedulable(self, pod: PodView, message: str) -> None:
        self.unschedulable.append((pod.key, message))

    async def record(
        self, regarding: PodView | ObjectRef, type_: str, reason: str, action: str, note: str
    ) -> bool | None:  # as kube/events.py's EventSink; a subclass may refuse (False)
        key = f"{regarding.namespace}/{regarding.name}"
        self.events.append((key, reason, note))
        return None


class Binds:
    def __init__(self, fail: set[str] | None = None) -> None:
        self.fail = fail or set()
        self.bound: list[tuple[str, str]] = []

    async def bind(self, namespace: str, name: str, uid: str, node_name: str) -> None:
        if name in self.fail:
            raise RuntimeError("conflict")
        self.bound.append((f"{namespace}/{name}", node_name))


def setup(binds: Binds | None = None) -> tuple[Scheduler, PodEvents, NodeEvents, Recorded]:
    clock = FakeClock()
    profiles = default_config().build_profiles()
    for plugin in profiles["gpu-scheduler"].bind:
        assert isinstance(plugin, DefaultBinder)
        plugin.client = binds or Binds()
    cache = SchedulerCache(clock)
    queue = SchedulingQueue(profiles["gpu-scheduler"].queue_sort.less, clock)
    recorded = Recorded()
    scheduler = Scheduler(profiles, cache, queue, recorded, recorded, SchedulerMetrics(), clock)
    return scheduler, PodEvents(cache, queue, scheduler.admits), NodeEvents(cache, queue), recorded


def pop(scheduler: Scheduler) -> QueuedPod:
    queued = scheduler.queue.pop_ready()
    assert queued is not None
    return queued


def test_bound_pods_of_any_scheduler_count_and_only_our_pending_pods_queue() -> None:
    scheduler, pods, nodes, _ = setup()
    nodes.on_add(make_node("n1").view())
    pods.on_add(make_pod("theirs").scheduler("default-scheduler").cpu("1").node("n1").view())
    pods.on_add(make_pod("theirs-pending").scheduler("default-scheduler").view())
    pods.on_add(make_pod("ours").view())
    info = scheduler.cache.snapshot.get("n1")
    assert info is not None and info.req_milli_cpu == 1000
    assert scheduler.queue.counts()["active"] == 1


def test_a_gated_pod_waits_outside_the_queue_until_its_gate_is_removed() -> None:
    scheduler, pods, _, _ = setup()
    gated = make_pod("g").set("spec.schedulingGates", [{"name": "example.com/wait"}])
    pods.on_add(gated.view())
    assert scheduler.queue.counts()["active"] == 0 and pods.gated == {"uid-default-g"}
    pods.on_update(gated.view(), make_pod("g").view())
    assert scheduler.queue.counts()["active"] == 1 and not pods.gated


async def test_a_placed_pod_is_assumed_bound_and_confirmed_by_its_watch_event() -> None:
    binds = Binds()
    scheduler, pods, nodes, recorded = setup(binds)
    nodes.on_add(make_node("n1").view())
    pending = make_pod("a").cpu("1")
    pods.on_add(pending.view())
    scheduler.schedule_one(pop(scheduler))
    assert scheduler.cache.is_assumed("uid-default-a")
    await scheduler.drain()
    assert binds.bound == [("default/a", "n1")]
    assert ("default/a", "Scheduled", "Successfully assigned default/a to n1") in recorded.events
    pods.on_update(pending.view(), make_pod("a").cpu("1").node("n1").view())
    assert not scheduler.cache.is_assumed("uid-default-a")
    info = scheduler.cache.snapshot.get("n1")
    assert info is not None and info.req_milli_cpu == 1000


async def test_an_unschedulable_pod_is_reported_and_retried_when_a_node_is_added() -> None:
    scheduler, pods, nodes, recorded = setup()
    nodes.on_add(make_node("small").cpu("1").view())
    pods.on_add(make_pod("big").cpu("2").view())
    scheduler.schedule_one(pop(scheduler))
    await scheduler.drain()
    message = "0/1 nodes are available: 1 Insufficient cpu."
    assert recorded.unschedulable == [("default/big", message)]
    assert ("default/big", "FailedScheduling", message) in recorded.events
    assert scheduler.queue.counts()["unschedulable"] == 1
    nodes.on_add(make_node("large").cpu("4").view())
    assert scheduler.queue.counts()["unschedulable"] == 0


async def test_a_failed_binding_forgets_the_pod_and_retries_it_with_backoff() -> None:
    scheduler, pods, nodes, _ = setup(Binds(fail={"a"}))
    nodes.on_add(make_node("n1").view())
    pods.on_add(make_pod("a").cpu("1").view())
    scheduler.schedule_one(pop(scheduler))
    await scheduler.drain()
    info = scheduler.cache.snapshot.get("n1")
    assert info is not None and not info.pods
    assert not scheduler.cache.is_assumed("uid-default-a")
    assert scheduler.queue.counts()["backoff"] == 1
    assert scheduler.counts.bind_failures == 1


async def test_a_pod_deleted_while_in_flight_is_not_bound() -> None:
    binds = Binds()
    scheduler, pods, nodes, _ = setup(binds)
    nodes.on_add(make_node("n1").view())
    pods.on_add(make_pod("a").view())
    queued = pop(scheduler)
    pods.on_delete(make_pod("a").view())
    scheduler.schedule_one(queued)
    await scheduler.drain()
    assert binds.bound == []


async def test_a_finished_pod_frees_its_node_for_waiting_pods() -> None:
    scheduler, pods, nodes, _ = setup()
    nodes.on_add(make_node("n1").cpu("1").view())
    running = make_pod("r").cpu("1").node("n1")
    pods.on_add(running.view())
    pods.on_add(make_pod("w").cpu("1").view())
    scheduler.schedule_one(pop(scheduler))
    await scheduler.drain()
    assert scheduler.queue.counts()["unschedulable"] == 1
    pods.on_delete(running.view())
    assert scheduler.queue.counts()["unschedulable"] == 0


async def test_a_pod_that_succeeds_frees_its_node_at_once() -> None:
    scheduler, pods, nodes, _ = setup()
    nodes.on_add(make_node("n1").cpu("1").view())
    running = make_pod("r").cpu("1").node("n1").phase("Running").view()
    pods.on_add(running)
    pods.on_add(make_pod("w").cpu("1").view())
    scheduler.schedule_one(pop(scheduler))
    await scheduler.drain()
    assert scheduler.queue.counts()["unschedulable"] == 1
    pods.on_update(running, make_pod("r").cpu("1").node("n1").phase("Succeeded").view())
    info = scheduler.cache.snapshot.get("n1")
    assert info is not None and not info.pods
    assert scheduler.queue.counts()["unschedulable"] == 0
    assert scheduler.gangs.phases == {}  # not a gang member: nothing to count


def test_a_pod_recreated_under_its_name_replaces_the_old_one_everywhere() -> None:
    scheduler, pods, nodes, _ = setup()
    nodes.on_add(make_node("n1").cpu("2").view())
    old = make_pod("w-0").cpu("1").node("n1").phase("Running").view()
    pods.on_add(old)
    recreated = make_pod("w-0").set("metadata.uid", "uid-w-0-second").cpu("1").view()
    pods.on_update(old, recreated)  # what an informer keyed by name would deliver
    info = scheduler.cache.snapshot.get("n1")
    assert info is not None and not info.pods  # the old pod's cpu is free
    queued = pop(scheduler)
    assert queued.pod.uid == "uid-w-0-second"


async def test_a_pod_deleted_before_its_binding_is_seen_leaves_the_cache() -> None:
    scheduler, pods, nodes, _ = setup()
    nodes.on_add(make_node("n1").cpu("1").view())
    pending = make_pod("a").cpu("1").view()
    pods.on_add(pending)
    scheduler.schedule_one(pop(scheduler))
    await scheduler.drain()
    assert scheduler.cache.is_assumed("uid-default-a")
    pods.on_delete(pending)  # the informer only ever saw it pending
    assert not scheduler.cache.is_assumed("uid-default-a")
    info = scheduler.cache.snapshot.get("n1")
    assert info is not None and not info.pods
