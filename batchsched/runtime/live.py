"""What the live scheduler's parts share: the watch-fed state, the clock, the writers, the
background tasks, and the optional policies (tenant queues, backfill, preemption).

Built once by the scheduler; the loop, the effects, the backfill holds and preemption each
take this, never the scheduler object, so none of them calls back into the loop that owns it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Coroutine, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from batchsched.cache import SchedulerCache
from batchsched.clock import Clock
from batchsched.cycle.decision import Preempt
from batchsched.framework.profile import Profile
from batchsched.framework.runner import ProfileRunner
from batchsched.gang.podgroup import PodGroupView
from batchsched.kube.binder import ObjectRef
from batchsched.metrics import SchedulerMetrics
from batchsched.model.pod import PodView
from batchsched.runtime.event_sender import EventSender
from batchsched.runtime.gangs import GangTracker
from batchsched.runtime.queue import SchedulingQueue
from batchsched.runtime.reservations import LiveBackfill
from batchsched.tenants import TenantLayer

logger = logging.getLogger(__name__)


class StatusWriter(Protocol):
    async def mark_unschedulable(self, pod: PodView, message: str) -> None: ...


class Recorder(Protocol):
    async def record(
        self, regarding: PodView | ObjectRef, type_: str, reason: str, action: str, note: str
    ) -> bool | None:
        """False when the Event could not be posted (None: a recorder that does not say)."""


class PostFilter(Protocol):
    """Preemption as the loop sees it (runtime/preempting.py)."""

    @property
    def flights(self) -> Mapping[str, object]:
        """The workloads preempting now, by key."""
        ...

    def lifted(self, key: str, priority: int) -> contextlib.AbstractContextManager[None]: ...

    def decide(
        self,
        key: str,
        pods: Sequence[PodView],
        group: PodGroupView | None,
        runner: ProfileRunner,
    ) -> Preempt: ...

    def act(
        self, key: str, pods: Sequence[PodView], group: PodGroupView | None, decision: Preempt
    ) -> str: ...

    def placed(self, key: str) -> None: ...

    def waits_for_victims(self, key: str) -> tuple[bool, str]: ...

    def nominated_node(self, pod: PodView) -> str | None: ...


@dataclass
class CycleCounts:
    """Totals since start, for the per-cycle INFO line and tests."""

    attempts: int = 0
    scheduled: int = 0
    unschedulable: int = 0
    errors: int = 0
    bound: int = 0
    bind_failures: int = 0


class Tasks:
    """The binding and reporting tasks in flight."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[object]] = set()

    def spawn(self, work: Coroutine[object, object, object]) -> None:
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[object]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.error("background task failed", exc_info=task.exception())

    async def drain(self) -> None:
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)


@dataclass
class Live:
    profiles: Mapping[str, Profile]
    cache: SchedulerCache
    queue: SchedulingQueue
    status: StatusWriter
    events: Recorder
    metrics: SchedulerMetrics
    clock: Clock
    gangs: GangTracker
    runners: Mapping[str, ProfileRunner]
    counts: CycleCounts = field(default_factory=CycleCounts)
    tasks: Tasks = field(default_factory=Tasks)
    tenants: TenantLayer | None = None  # tenant queues (runtime/tenant_wiring.py)
    backfill: LiveBackfill | None = None
    preempting: PostFilter | None = None
    # Events not awaited by their caller go through a bounded buffer and a few senders.
    sender: EventSender = field(init=False)

    def __post_init__(self) -> None:
        dropped = self.metrics.events_dropped
        self.sender = EventSender(self.events, on_drop=lambda r: dropped.labels(reason=r).inc())

    def runner_for(self, pod: PodView) -> ProfileRunner:
        return self.runners[pod.scheduler_name]

    def spawn(self, work: Coroutine[object, object, object]) -> None:
        self.tasks.spawn(work)

    def record(
        self, regarding: PodView | ObjectRef, type_: str, reason: str, action: str, note: str
    ) -> None:
        """Post an Event in the background; dropped (logged, counted) when too many wait."""
        self.sender.send(regarding, type_, reason, action, note)

    def observe(self, result: str, runner: ProfileRunner, seconds: float) -> None:
        profile = runner.profile.scheduler_name
        self.metrics.schedule_attempts.labels(result=result, profile=profile).inc()
        self.metrics.attempt_duration.labels(result=result, profile=profile).observe(seconds)

    def preempting_now(self, key: str) -> bool:
        return self.preempting is not None and key in self.preempting.flights

    def waits_for_victims(self, key: str) -> tuple[bool, str]:
        """Whether `key`'s cycle waits for its preemption plan's victims, and news to tell."""
        if self.preempting is None:
            return False, ""
        return self.preempting.waits_for_victims(key)

    @contextlib.contextmanager
    def holds_lifted(self, key: str, priority: int) -> Iterator[None]:
        """Preemption's held capacity of `key` and of lower priorities, lifted for a cycle."""
        if self.preempting is None:
            yield
            return
        with self.preempting.lifted(key, priority):
            yield
