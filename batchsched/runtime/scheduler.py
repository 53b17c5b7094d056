"""The scheduling loop and the binding cycles of one scheduler process.

One cycle, in order:
  1. pop the next pod from the queue (waits when nothing is ready);
  2. skip it if it was deleted or bound meanwhile;
  3. run the profile's pure cycle on the cache's live snapshot (PreFilter .. Permit);
  4. placed: assume it in the cache and start a binding task (bounded concurrency);
     not placed: requeue it as unschedulable and tell the user (condition + Event);
  5. a binding task runs PreBind/Bind/PostBind; on failure it forgets the pod and requeues it
     with backoff, on success it starts the assumed pod's TTL and posts `Scheduled`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Coroutine, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from batchsched.cache import SchedulerCache
from batchsched.clock import Clock
from batchsched.framework.cycle_state import CycleState
from batchsched.framework.interfaces import QueuedPod
from batchsched.framework.profile import Profile
from batchsched.framework.runner import ProfileRunner, ScheduleResult
from batchsched.framework.status import Code, Status, is_ok
from batchsched.gang.podgroup import PodGroupView, pod_group_of
from batchsched.kube.binder import ObjectRef
from batchsched.metrics import SchedulerMetrics
from batchsched.model.pod import PodView
from batchsched.runtime.backfill_waits import BackfillWaits
from batchsched.runtime.gang_cycle import GangCycle
from batchsched.runtime.gangs import GangTracker
from batchsched.runtime.queue import SchedulingQueue
from batchsched.runtime.reservations import LiveBackfill
from batchsched.runtime.tenants import TenantLayer

if TYPE_CHECKING:
    from batchsched.runtime.preempting import Preempting

logger = logging.getLogger(__name__)


class StatusWriter(Protocol):
    async def mark_unschedulable(self, pod: PodView, message: str) -> None: ...


class Recorder(Protocol):
    async def record(
        self, regarding: PodView | ObjectRef, type_: str, reason: str, action: str, note: str
    ) -> bool | None:
        """False when the Event could not be posted (None: a recorder that does not say)."""


@dataclass
class CycleCounts:
    """Totals since start, for the per-cycle INFO line and tests."""

    attempts: int = 0
    scheduled: int = 0
    unschedulable: int = 0
    errors: int = 0
    bound: int = 0
    bind_failures: int = 0


class Scheduler:
    def __init__(
        self,
        profiles: Mapping[str, Profile],
        cache: SchedulerCache,
        queue: SchedulingQueue,
        status: StatusWriter,
        events: Recorder,
        metrics: SchedulerMetrics,
        clock: Clock,
        *,
        seed: int = 0,
        bind_concurrency: int = 128,
        gangs: GangTracker | None = None,
        tenants: TenantLayer | None = None,
        backfill: LiveBackfill | None = None,
    ) -> None:
        self.tenants = tenants
        self.backfill = backfill
        self.profiles = profiles
        self.cache = cache
        self.queue = queue
        self.status = status
        self.events = events
        self.metrics = metrics
        self.clock = clock
        self.counts = CycleCounts()
        self._runners = {name: ProfileRunner(p, seed) for name, p in profiles.items()}
        self.gangs = gangs if gangs is not None else GangTracker()
        self.gang_cycle = GangCycle(self)
        self.waits = BackfillWaits(self)
        self.preempting: Preempting | None = None  # PostFilter; set by the app
        self._holding: frozenset[str] = frozenset()  # reservations holding pods back
        self._bind_slots = asyncio.Semaphore(bind_concurrency)
        self._tasks: set[asyncio.Task[object]] = set()

    def admits(self, pod: PodView) -> bool:
        """Whether a pending pod belongs in our queue: one of our profiles names it and its
        PreEnqueue plugins (scheduling gates) let it in. Gated pods wait outside the queue;
        the update that removes the last gate enqueues them."""
        profile = self.profiles.get(pod.scheduler_name)
        if profile is None:
            return False
        return all(is_ok(plugin.pre_enqueue(pod)) for plugin in profile.pre_enqueue)

    async def run(self) -> None:
        """Schedule forever (only while leading, when leader election is on)."""
        logger.info("scheduling loop started profiles=%s", ",".join(self.profiles))
        try:
            while True:
                queued = await self.queue.pop()
                self.schedule_one(queued)
                # Let watches and binding tasks run between cycles.
                await asyncio.sleep(0)
        finally:
            await self.drain()

    def runner_for(self, pod: PodView) -> ProfileRunner:
        return self._runners[pod.scheduler_name]

    def schedule_one(self, queued: QueuedPod) -> None:
        pod = queued.pod
        counted = self.cache.snapshot.node_of(pod.uid) is not None  # binding, or reserved
        if self.queue.was_deleted(pod.uid) or pod.node_name or counted:
            self.queue.done(pod.uid)
            return
        gang = pod_group_of(pod)
        with self.holds_lifted(self.waits.key_of(pod), pod.priority):
            if gang is not None:
                self.gang_cycle.run(queued, gang)
            else:
                self._schedule_pod(queued)
        self.check_reservations()

    def check_reservations(self) -> None:
        """A reservation that left the backfill plan (its gang started, was deleted or gave
        up) no longer holds anything back: the pods it held wait in the pool, so send the
        pool back (queueing hint: ReservationReleased)."""
        if self.backfill is None:
            return
        holding = self.backfill.holding()
        if self._holding - holding:
            self.queue.move_all("ReservationReleased")
        self._holding = holding

    # Preemption (runtime/preempting.py): the capacity held for preemptors, and PostFilter.

    @contextlib.contextmanager
    def holds_lifted(self, key: str, priority: int) -> Iterator[None]:
        if self.preempting is None:
            yield
            return
        with self.preempting.lifted(key, priority):
            yield

    def post_filter(
        self,
        key: str,
        pods: Sequence[PodView],
        group: PodGroupView | None,
        runner: ProfileRunner,
        message: str,
    ) -> str:
        """The failure message, with what preemption did about it."""
        if self.preempting is None:
            return message
        preemption = self.preempting.post_filter(key, pods, group, runner)
        if self.backfill is not None and self.waits.preempting(key):
            self.backfill.unblock(key)  # its capacity is held while the victims go
        return f"{message}; {preemption}" if preemption else message

    def preemptor_placed(self, key: str) -> None:
        if self.preempting is not None:
            self.preempting.placed(key)

    def _schedule_pod(self, queued: QueuedPod) -> None:
        pod = queued.pod
        runner = self._runners[pod.scheduler_name]
        cycle = self.queue.scheduling_cycle()
        if self.waits.quota_refuses([queued], cycle):
            return
        started = time.perf_counter()
        result = runner.schedule_one(pod, self.cache.snapshot)
        elapsed = time.perf_counter() - started
        self.counts.attempts += 1
        self.metrics.algorithm_duration.observe(elapsed)
        if result.placed and result.node_name is not None:
            key = self.waits.key_of(pod)
            starting = self.waits.starting([(pod, result.node_name)])
            held = self.waits.placed_refused([(pod, result.node_name)])
            held = held or self.waits.held_back(key, pod.priority, starting)
            if held:
                runner.unreserve(result.state, pod, result.node_name, self.cache.snapshot)
                self.cache.forget(pod)
                self.queue.requeue_unschedulable(queued, cycle)
                self.report_failure(pod, held)
                return
            self.waits.started(key, starting)
            self.cache.assume(pod, result.node_name)
            self.preemptor_placed(key)
            self.counts.scheduled += 1
            # The attempt is observed when its binding ends, as kube-scheduler does.
            self.spawn(self.bind(queued, runner, result, cycle_started=started))
            return
        outcome = "error" if result.status.code is Code.ERROR else "unschedulable"
        self.observe(outcome, runner, elapsed)
        message = result.message()
        if outcome == "error":
            self.counts.errors += 1
            logger.error("scheduling error pod=%s error=%s", pod.key, message)
            self.queue.requeue_backoff(queued)
        else:
            self.counts.unschedulable += 1
            logger.debug("unschedulable pod=%s reason=%s", pod.key, message)
            key = self.waits.key_of(pod)
            self.waits.blocked(key, [pod])
            self.queue.requeue_unschedulable(queued, cycle)
            message = self.post_filter(key, [pod], None, runner, message)
        self.report_failure(pod, message)

    def report_failure(self, pod: PodView, message: str) -> None:
        self.spawn(self._report_failure(pod, message))

    def observe(self, result: str, runner: ProfileRunner, seconds: float) -> None:
        profile = runner.profile.scheduler_name
        self.metrics.schedule_attempts.labels(result=result, profile=profile).inc()
        self.metrics.attempt_duration.labels(result=result, profile=profile).observe(seconds)

    async def bind(
        self,
        queued: QueuedPod,
        runner: ProfileRunner,
        result: ScheduleResult,
        cycle_started: float | None = None,
    ) -> None:
        pod, node = queued.pod, result.node_name
        assert node is not None
        async with self._bind_slots:
            started = time.perf_counter()
            status = await self._run_bind_plugins(runner.profile, result.state, pod, node)
            self.metrics.extension_point_duration.labels(
                extension_point="Bind",
                status=status.code.kube_name,
                profile=runner.profile.scheduler_name,
            ).observe(time.perf_counter() - started)
        if cycle_started is not None:
            outcome = "scheduled" if is_ok(status) else "error"
            self.observe(outcome, runner, time.perf_counter() - cycle_started)
        if is_ok(status):
            self.cache.finish_binding(pod)
            self.queue.done(pod.uid)
            self.counts.bound += 1
            for plugin in runner.profile.post_bind:
                plugin.post_bind(result.state, pod, node)
            await self.events.record(
                pod, "Normal", "Scheduled", "Binding", f"Successfully assigned {pod.key} to {node}"
            )
            return
        self.counts.bind_failures += 1
        self.metrics.bind_failures.labels(reason=status.plugin or "Bind").inc()
        logger.warning("binding failed pod=%s node=%s error=%s", pod.key, node, status.message())
        if self.cache.snapshot.node_of(pod.uid) is not None:
            runner.unreserve(result.state, pod, node, self.cache.snapshot)
        self.cache.forget(pod)
        self.queue.requeue_backoff(queued)

    async def _run_bind_plugins(
        self, profile: Profile, state: CycleState, pod: PodView, node: str
    ) -> Status:
        for pre_bind in profile.pre_bind:
            status = await pre_bind.pre_bind(state, pod, node)
            if not is_ok(status):
                return status.with_plugin(pre_bind.name)
        for bind in profile.bind:
            status = await bind.bind(state, pod, node)
            if status.code is not Code.SKIP:
                return status.with_plugin(bind.name)
        return Status(Code.ERROR, ("no bind plugin bound the pod",))

    async def _report_failure(self, pod: PodView, message: str) -> None:
        await self.status.mark_unschedulable(pod, message)
        await self.events.record(pod, "Warning", "FailedScheduling", "Scheduling", message)

    def spawn(self, work: Coroutine[object, object, object]) -> None:
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[object]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.error("background task failed", exc_info=task.exception())

    async def drain(self) -> None:
        """Wait for binding and reporting tasks in flight (used on shutdown and in tests)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    def expire_assumed(self) -> int:
        """Drop assumed pods whose binding was never confirmed by a watch event in time."""
        expired = self.cache.cleanup_expired()
        for pod in expired:
            logger.warning("assumed pod expired pod=%s node=%s", pod.key, pod.node_name)
            self.metrics.assumed_expired.inc()
        return len(expired)
