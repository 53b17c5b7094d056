"""The binding cycle of one pod, and telling a user why a pod waits.

A binding task runs PreBind/Bind/PostBind (bounded concurrency); on failure it unreserves
and forgets the pod and requeues it with backoff, on success it confirms the assumed pod and
hands its `Scheduled` Event to the background senders (runtime/event_sender.py). The attempt
is observed when its binding ends, as kube-scheduler does.
"""

from __future__ import annotations

import asyncio
import logging
import time

from batchsched.framework.cycle_state import CycleState
from batchsched.framework.interfaces import QueuedPod
from batchsched.framework.profile import Profile
from batchsched.framework.runner import ProfileRunner, ScheduleResult
from batchsched.framework.status import Code, Status, is_ok
from batchsched.model.pod import PodView
from batchsched.runtime.live import Live

logger = logging.getLogger(__name__)


class Binding:
    def __init__(self, live: Live, concurrency: int) -> None:
        self.live = live
        self._slots = asyncio.Semaphore(concurrency)

    def start(
        self,
        queued: QueuedPod,
        runner: ProfileRunner,
        result: ScheduleResult,
        cycle_started: float | None = None,
    ) -> None:
        self.live.spawn(self.bind(queued, runner, result, cycle_started))

    async def bind(
        self,
        queued: QueuedPod,
        runner: ProfileRunner,
        result: ScheduleResult,
        cycle_started: float | None = None,
    ) -> None:
        live = self.live
        pod, node = queued.pod, result.node_name
        assert node is not None
        async with self._slots:
            started = time.perf_counter()
            status = await _run_bind_plugins(runner.profile, result.state, pod, node)
            live.metrics.extension_point_duration.labels(
                extension_point="Bind",
                status=status.code.kube_name,
                profile=runner.profile.scheduler_name,
            ).observe(time.perf_counter() - started)
        if cycle_started is not None:
            outcome = "scheduled" if is_ok(status) else "error"
            live.observe(outcome, runner, time.perf_counter() - cycle_started)
        if is_ok(status):
            live.cache.finish_binding(pod)
            live.queue.done(pod.uid)
            live.counts.bound += 1
            for plugin in runner.profile.post_bind:
                plugin.post_bind(result.state, pod, node)
            # In the background (runtime/event_sender.py): the binding is done, and a slow
            # Event must not hold a task (and a connection) per pod.
            live.record(
                pod, "Normal", "Scheduled", "Binding", f"Successfully assigned {pod.key} to {node}"
            )
            return
        live.counts.bind_failures += 1
        live.metrics.bind_failures.labels(reason=status.plugin or "Bind").inc()
        logger.warning("binding failed pod=%s node=%s error=%s", pod.key, node, status.message())
        if live.cache.snapshot.node_of(pod.uid) is not None:
            runner.unreserve(result.state, pod, node, live.cache.snapshot)
        live.cache.forget(pod)
        live.queue.requeue_backoff(queued)

    def report_failure(self, pod: PodView, message: str, *, event: bool = True) -> None:
        """The pod's PodScheduled=False condition, and its FailedScheduling Event unless
        `event` is False (a gang's members: one Event on the gang says it for all)."""
        self.live.spawn(self._report_failure(pod, message, event))

    async def _report_failure(self, pod: PodView, message: str, event: bool) -> None:
        await self.live.status.mark_unschedulable(pod, message)
        if event:
            self.live.record(pod, "Warning", "FailedScheduling", "Scheduling", message)


async def _run_bind_plugins(profile: Profile, state: CycleState, pod: PodView, node: str) -> Status:
    for pre_bind in profile.pre_bind:
        status = await pre_bind.pre_bind(state, pod, node)
        if not is_ok(status):
            return status.with_plugin(pre_bind.name)
    for bind in profile.bind:
        status = await bind.bind(state, pod, node)
        if status.code is not Code.SKIP:
            return status.with_plugin(bind.name)
    return Status(Code.ERROR, ("no bind plugin bound the pod",))
