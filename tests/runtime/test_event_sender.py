"""Events posted in the background through a bounded buffer (runtime/event_sender.py)."""

from __future__ import annotations

import asyncio
import logging

import pytest

from batchsched.cache import SchedulerCache
from batchsched.clock import FakeClock
from batchsched.config import default_config
from batchsched.kube.binder import ObjectRef
from batchsched.metrics import SchedulerMetrics
from batchsched.model.pod import PodView
from batchsched.plugins.default_binder import DefaultBinder
from batchsched.runtime.event_sender import EVENT_BUFFER, EVENT_SENDERS, EventSender
from batchsched.runtime.handlers import NodeEvents, PodEvents
from batchsched.runtime.queue import SchedulingQueue
from batchsched.runtime.scheduler import Scheduler
from tests.builders import make_node, make_pod

REF = ObjectRef("v1", "Pod", "default", "p", "uid-p")


class Sink:
    """Records what reaches it; holds every post until `release` is set, when `held`."""

    def __init__(self, *, held: bool = False, fail_on: str = "") -> None:
        self.posted: list[str] = []
        self.release = asyncio.Event()
        if not held:
            self.release.set()
        self.fail_on = fail_on
        self.in_flight = 0
        self.most_in_flight = 0

    async def record(
        self, regarding: PodView | ObjectRef, type_: str, reason: str, action: str, note: str
    ) -> bool:
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await self.release.wait()
        finally:
            self.in_flight -= 1
        if note == self.fail_on:
            raise RuntimeError("a bug in one post")
        self.posted.append(note)
        return True

    async def mark_unschedulable(self, pod: PodView, message: str) -> None:
        pass


async def test_buffered_events_are_all_posted_by_at_most_the_senders_at_a_time() -> None:
    sink = Sink(held=True)
    sender = EventSender(sink, senders=3)
    for i in range(20):
        assert sender.send(REF, "Normal", "Scheduled", "Binding", f"e{i}")
    await asyncio.sleep(0)  # let the senders start: each takes one Event and waits
    assert sink.in_flight == 3 and sender.buffered == 17
    sink.release.set()
    await sender.drain()
    assert sorted(sink.posted) == sorted(f"e{i}" for i in range(20))
    assert sink.most_in_flight == 3


async def test_a_full_buffer_drops_the_new_event_at_once_logs_it_and_counts_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    sink = Sink(held=True)
    dropped: list[str] = []
    sender = EventSender(sink, senders=1, capacity=2, on_drop=dropped.append)
    assert sender.send(REF, "Normal", "Scheduled", "Binding", "a")
    await asyncio.sleep(0)  # the one sender holds "a"; the buffer is empty again
    assert sender.send(REF, "Normal", "Scheduled", "Binding", "b")
    assert sender.send(REF, "Normal", "Scheduled", "Binding", "c")
    with caplog.at_level(logging.WARNING):
        assert not sender.send(REF, "Warning", "FailedScheduling", "Scheduling", "d")
    assert dropped == ["FailedScheduling"] and sender.dropped == 1
    assert "event dropped" in caplog.text and "default/p" in caplog.text
    sink.release.set()
    await sender.drain()
    assert sink.posted == ["a", "b", "c"]


async def test_an_event_whose_post_raises_does_not_stop_the_ones_after_it() -> None:
    sink = Sink(fail_on="bad")
    sender = EventSender(sink, senders=1)
    for note in ("a", "bad", "c"):
        sender.send(REF, "Normal", "Scheduled", "Binding", note)
    await sender.drain()
    assert sink.posted == ["a", "c"]


async def test_drain_drops_what_is_left_after_the_grace_and_leaves_no_task_behind() -> None:
    sink = Sink(held=True)  # an API server that stopped answering
    dropped: list[str] = []
    sender = EventSender(sink, senders=2, on_drop=dropped.append)
    for i in range(5):
        sender.send(REF, "Normal", "Scheduled", "Binding", f"e{i}")
    await asyncio.sleep(0)
    await sender.drain(grace=0.01)
    assert sender.buffered == 0 and dropped == ["Scheduled"] * 3
    # The two posts in flight were cancelled, not left pending for the loop to destroy.
    others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    assert others == [] and sink.in_flight == 0


def scheduler_with(sink: Sink, metrics: SchedulerMetrics) -> tuple[Scheduler, PodEvents]:
    clock = FakeClock()
    profiles = default_config().build_profiles()
    for plugin in profiles["gpu-scheduler"].bind:
        assert isinstance(plugin, DefaultBinder)
        plugin.client = Binds()
    cache = SchedulerCache(clock)
    queue = SchedulingQueue(profiles["gpu-scheduler"].queue_sort.less, clock)
    scheduler = Scheduler(profiles, cache, queue, sink, sink, metrics, clock)
    NodeEvents(cache, queue).on_add(make_node("n1").view())
    return scheduler, PodEvents(cache, queue, scheduler.admits)


class Binds:
    async def bind(self, namespace: str, name: str, uid: str, node_name: str) -> None:
        pass


async def test_a_binding_ends_without_waiting_for_its_scheduled_event() -> None:
    sink = Sink(held=True)
    scheduler, pods = scheduler_with(sink, SchedulerMetrics())
    pods.on_add(make_pod("a").view())
    queued = scheduler.queue.pop_ready()
    assert queued is not None
    scheduler.schedule_one(queued)
    # The binding task only (it must end: the Event is still held by the sink).
    await asyncio.wait_for(scheduler.live.tasks.drain(), timeout=5)
    assert scheduler.live.counts.bound == 1 and sink.posted == []
    assert sink.in_flight == 1
    sink.release.set()
    await scheduler.drain()
    assert sink.posted == ["Successfully assigned default/a to n1"]


async def test_the_scheduler_counts_events_dropped_from_a_full_buffer_by_reason() -> None:
    sink = Sink(held=True)
    metrics = SchedulerMetrics()
    scheduler, _ = scheduler_with(sink, metrics)
    for _ in range(EVENT_SENDERS + EVENT_BUFFER + 2):
        scheduler.live.record(REF, "Warning", "FailedScheduling", "Scheduling", "no fit")
        await asyncio.sleep(0)
    dropped = metrics.registry.get_sample_value(
        "batchsched_events_dropped_total", {"reason": "FailedScheduling"}
    )
    assert dropped == 2
    sink.release.set()
    await scheduler.drain()
    assert len(sink.posted) == EVENT_SENDERS + EVENT_BUFFER
