"""The App's round every second (runtime/app.py): deadlines, PodGroup statuses, gauges, and
a summary line every ten seconds.

Only the leader acts on deadlines and writes what they change; every replica keeps its
gauges current and logs its summary.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from batchsched.gang.podgroup import PodGroupView
from batchsched.gang.status import StatusWrite, status_write
from batchsched.kube.podgroups import PodGroupStatusWriter
from batchsched.runtime.app_quotas import Quotas
from batchsched.runtime.capacity_gauges import CapacityGauges
from batchsched.runtime.gangs import rfc3339
from batchsched.runtime.handlers import PodEvents
from batchsched.runtime.preempting import Preempting
from batchsched.runtime.preemption_notes import NotePublisher
from batchsched.runtime.queue_status_writer import QueueStatusWriter, live_statuses
from batchsched.runtime.scheduler import Scheduler

logger = logging.getLogger(__name__)

HOUSEKEEPING_INTERVAL_S = 1.0
SUMMARY_INTERVAL_S = 10.0
STATUS_GRACE_S = 2.0  # a gang waiting less than this gets no "Scheduling" status write


class Housekeeping:
    """`run` as a task: every `HOUSEKEEPING_INTERVAL_S` until cancelled. The cache, queue,
    metrics and gangs are the scheduler's."""

    def __init__(
        self,
        scheduler: Scheduler,
        group_status: PodGroupStatusWriter,
        preempting: Preempting,
        notes: NotePublisher,
        quotas: Quotas,
        pod_events: PodEvents,
        *,
        leading: Callable[[], bool],
        synced: Callable[[], bool],
        flush_events: Callable[[], Awaitable[int]] | None = None,
        flush_status: Callable[[Callable[[str], bool]], Awaitable[int]] | None = None,
        queue_status: QueueStatusWriter | None = None,
    ) -> None:
        self.scheduler = scheduler
        self.cache = scheduler.cache
        self.queue = scheduler.queue
        self.metrics = scheduler.metrics
        self.gangs = scheduler.gangs
        self.capacity = CapacityGauges(self.metrics)
        self.group_status = group_status
        self.preempting = preempting
        self.notes = notes
        self.quotas = quotas
        self.pod_events = pod_events
        self.leading = leading  # this replica may act (it leads, or elects no leader)
        self.synced = synced  # the informers the scheduling loop waits for have synced
        self.flush_events = flush_events  # Event series counts due (kube/events.py)
        self.flush_status = flush_status  # conditions deferred (kube/pod_status.py)
        self.queue_status = queue_status  # each pending gang's place, on its PodGroup

    async def run(self) -> None:
        last_summary = time.monotonic()
        while True:
            await asyncio.sleep(HOUSEKEEPING_INTERVAL_S)
            self.scheduler.expire_assumed()  # only with an assume TTL; none by default
            if self.leading():
                # Only the leader acts on deadlines and writes what they change: a standby
                # holds no reservations, and what it sees is written when it leads.
                now = self.scheduler.clock.now()
                self.scheduler.gang_waits.expire(now)
                self.preempting.expire(now)
                self.scheduler.check_reservations()
                await self.notes.publish()
                self._write_group_status()
                if self.leading():  # still, after the writes above
                    await self.quotas.publish_estimates()
                if self.flush_events is not None and self.leading():
                    await self.flush_events()
                if self.flush_status is not None and self.leading():
                    await self.flush_status(self._waiting)
                await self._publish_queue_status()
            elif self.queue_status is not None:
                self.queue_status.forget()
            self._set_gauges()
            if time.monotonic() - last_summary >= SUMMARY_INTERVAL_S:
                last_summary = time.monotonic()
                if self.synced():
                    self.quotas.warn_capacity()
                self._log_summary()

    async def _publish_queue_status(self) -> None:
        writer = self.queue_status
        if writer is None or not writer.due() or not self.leading():
            return
        # Once per pass, never per event: the order costs O(n log n) in the pending gangs.
        await writer.publish(lambda: live_statuses(self.scheduler), self.gangs.groups)

    def _waiting(self, uid: str) -> bool:
        """The pod is still ours to place: queued, and neither bound nor reserved."""
        return self.queue.holds(uid) and self.cache.snapshot.node_of(uid) is None

    def _write_group_status(self) -> None:
        now = self.scheduler.clock.now()
        dirty, self.gangs.dirty = self.gangs.dirty, set()
        for key in dirty:
            if not self.gangs.settled(key, now, STATUS_GRACE_S):
                self.gangs.dirty.add(key)  # look again at the next round
                continue
            group = self.gangs.group(key)
            if group is not None:
                wall = time.time()
                status = self.gangs.status_of(key, self.cache.snapshot, wall)
                held = self.gangs.rejections.get(key)
                write = status_write(group, status, held, rfc3339(wall))
                # Most dirty gangs show their status already (a member arrived, a gang is
                # still Pending): no task for them.
                if write is not None and self.group_status.needed(group, write):
                    self.scheduler.spawn(self._write_status(key, group, write))

    async def _write_status(self, key: str, group: PodGroupView, write: StatusWrite) -> None:
        if not await self.group_status.update(group, write):
            self.gangs.dirty.add(key)  # lost (API unavailable, a conflict): the next round

    def _set_gauges(self) -> None:
        self.metrics.set_pending({**self.queue.counts(), "gated": len(self.pod_events.gated)})
        snapshot = self.cache.snapshot
        self.metrics.set_cache_size(
            nodes=len(snapshot),
            pods=sum(len(info.pods) for info in snapshot.nodes),
            assumed_pods=self.cache.assumed_count(),
        )
        self.capacity.publish_nodes(snapshot)
        self.capacity.publish_gangs(self.gangs, self.queue.holds, time.time())

    def _log_summary(self) -> None:
        c = self.scheduler.counts
        logger.info(
            "summary attempts=%d scheduled=%d unschedulable=%d errors=%d bound=%d "
            "bind_failures=%d pending=%s",
            c.attempts,
            c.scheduled,
            c.unschedulable,
            c.errors,
            c.bound,
            c.bind_failures,
            self.queue.counts(),
        )
