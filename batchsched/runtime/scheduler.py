"""The scheduling loop of one scheduler process.

One cycle, in order:
  1. pop the next pod from the queue (waits when nothing is ready);
  2. skip it if it was deleted or bound meanwhile;
  3. its workload: the pod alone, or its gang's pending members with it (runtime/workloads.py);
  4. decide: the pure workload cycle on the cache's live snapshot, with preemption's held
     capacity of lower priorities lifted (batchsched/cycle/cycle.py) -> Bind, Wait or Reject;
  5. act on the decision: assume and bind, hold, requeue, preempt, tell the user
     (runtime/effects.py; binding tasks: runtime/binding.py);
  6. send the pool back when a backfill reservation stopped holding pods back.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Coroutine, Mapping

from batchsched.cache import SchedulerCache
from batchsched.clock import Clock
from batchsched.cycle.cycle import schedule_workload
from batchsched.extenders.fetch import ExtenderSet
from batchsched.framework.interfaces import QueuedPod
from batchsched.framework.profile import Profile
from batchsched.framework.runner import ProfileRunner
from batchsched.framework.status import is_ok
from batchsched.gang.podgroup import pod_group_of
from batchsched.metrics import SchedulerMetrics
from batchsched.model.pod import PodView
from batchsched.plugins.backfill_reservations import attach_reservation_guard
from batchsched.runtime.app_extenders import close_extenders, extender_set
from batchsched.runtime.backfill_waits import BackfillWaits
from batchsched.runtime.binding import Binding
from batchsched.runtime.effects import Effects
from batchsched.runtime.event_sender import EVENT_SENDERS
from batchsched.runtime.gang_waits import GangWaits
from batchsched.runtime.gangs import GangTracker
from batchsched.runtime.live import CycleCounts, Live, PostFilter, Recorder, StatusWriter
from batchsched.runtime.queue import SchedulingQueue
from batchsched.runtime.reservations import LiveBackfill
from batchsched.runtime.workloads import LiveHandle, workload_of
from batchsched.tenants import TenantLayer

__all__ = ["CycleCounts", "Recorder", "Scheduler", "StatusWriter"]

logger = logging.getLogger(__name__)

# Binds in flight at once: as many as Event senders, so Scheduled Events keep pace with binds
# (the reasons and figures are in runtime/event_sender.py).
BINDS_IN_FLIGHT = EVENT_SENDERS

# Rounds of asking the extenders before a cycle (gang members arriving during the last one).
ASK_ROUNDS = 3


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
        bind_concurrency: int = BINDS_IN_FLIGHT,
        gangs: GangTracker | None = None,
        tenants: TenantLayer | None = None,
        backfill: LiveBackfill | None = None,
        preempting: PostFilter | None = None,
    ) -> None:
        self.live = Live(
            profiles,
            cache,
            queue,
            status,
            events,
            metrics,
            clock,
            gangs if gangs is not None else GangTracker(),
            {name: ProfileRunner(p, seed) for name, p in profiles.items()},
            tenants=tenants,
            backfill=backfill,
            preempting=preempting,
        )
        self.waits = BackfillWaits(self.live)
        self.gang_waits = GangWaits(self.live)
        self.binding = Binding(self.live, bind_concurrency)
        self.effects = Effects(self.live, self.binding, self.gang_waits, self.waits)
        if backfill is not None:  # BackfillReservations asks the reservations where not to go
            attach_reservation_guard(profiles, self.waits)
        self._handle = LiveHandle(self.live, self.waits)
        self._holding: frozenset[str] = frozenset()  # reservations holding pods back
        # Profiles a config reload replaced together with their extenders: closed at the end.
        self.retired: list[Mapping[str, Profile]] = []

    # The shared state, as the app, the housekeeping round and tests read it.

    @property
    def profiles(self) -> Mapping[str, Profile]:
        return self.live.profiles

    @property
    def extenders(self) -> ExtenderSet | None:
        """The HTTP extenders asked before each cycle: those of the profiles in force (the
        profiles' Extenders plugin reads their verdicts), so a config reload changes them."""
        return extender_set(self.live.profiles)

    @property
    def cache(self) -> SchedulerCache:
        return self.live.cache

    @property
    def queue(self) -> SchedulingQueue:
        return self.live.queue

    @property
    def gangs(self) -> GangTracker:
        return self.live.gangs

    @property
    def clock(self) -> Clock:
        return self.live.clock

    @property
    def metrics(self) -> SchedulerMetrics:
        return self.live.metrics

    @property
    def events(self) -> Recorder:
        return self.live.events

    @property
    def counts(self) -> CycleCounts:
        return self.live.counts

    @property
    def tenants(self) -> TenantLayer | None:
        return self.live.tenants

    @property
    def backfill(self) -> LiveBackfill | None:
        return self.live.backfill

    @property
    def preempting(self) -> PostFilter | None:
        return self.live.preempting

    def spawn(self, work: Coroutine[object, object, object]) -> None:
        self.live.spawn(work)

    def admits(self, pod: PodView) -> bool:
        """Whether a pending pod belongs in our queue: one of our profiles names it and its
        PreEnqueue plugins (scheduling gates) let it in. Gated pods wait outside the queue;
        the update that removes the last gate enqueues them."""
        profile = self.live.profiles.get(pod.scheduler_name)
        if profile is None:
            return False
        return all(is_ok(plugin.pre_enqueue(pod)) for plugin in profile.pre_enqueue)

    async def run(self) -> None:
        """Schedule forever (only while leading, when leader election is on)."""
        logger.info("scheduling loop started profiles=%s", ",".join(self.live.profiles))
        try:
            while True:
                queued = await self.live.queue.pop()
                extenders = self.extenders
                if extenders is None:
                    self.schedule_one(queued)
                else:
                    await self.schedule_one_asking(queued, extenders)
                # Let watches and binding tasks run between cycles.
                await asyncio.sleep(0)
        finally:
            await self.drain()
            for profiles in (*self.retired, self.live.profiles):
                await close_extenders(profiles)

    def runner_for(self, pod: PodView) -> ProfileRunner:
        return self.live.runner_for(pod)

    def schedule_one(self, queued: QueuedPod) -> None:
        live = self.live
        pod = queued.pod
        counted = live.cache.snapshot.node_of(pod.uid) is not None  # binding, or reserved
        if live.queue.was_deleted(pod.uid) or pod.node_name or counted:
            live.queue.done(pod.uid)
            return
        key = pod_group_of(pod) or f"pod:{pod.key}"
        waits, news = live.waits_for_victims(key)
        if waits:
            # A preemptor is not tried while its plan's evictions are made and its victims
            # terminate (a cycle could only find them there; runtime/preemption_flight.py
            # gates_cycles): parked until the last one goes, told how far they are.
            live.queue.park(queued)
            if news:
                self.binding.report_failure(pod, news)
            return
        with live.holds_lifted(key, pod.priority):
            cycle = live.queue.scheduling_cycle()
            found = workload_of(live, queued)
            if found is not None:
                workload, batch = found
                started = time.perf_counter()
                decision = schedule_workload(self._handle, workload)
                self.effects.apply(workload, batch, decision, cycle, started)
        self.check_reservations()

    async def schedule_one_asking(self, queued: QueuedPod, extenders: ExtenderSet) -> None:
        """schedule_one, with the extenders asked first about the pod and the other pending
        members of its gang; the cycle reads their verdicts as data (plugins/extenders.py).
        Members that reached the queue while the extenders answered are asked too (a few
        rounds at most), so the cycle does not fail them for want of a verdict."""
        try:
            for _ in range(ASK_ROUNDS):
                unasked = extenders.unasked(self._asked_about(queued.pod))
                if not unasked:
                    break
                nodes = [info.node for info in self.live.cache.snapshot.nodes]
                await extenders.prefetch(unasked, nodes)
            swapped = self.extenders  # a config reload may have put others in force meanwhile
            if swapped is not extenders and swapped is not None:
                await self.schedule_one_asking(queued, swapped)
                return
            # Extenders answer for this pod only: no kept results from another pod may stand
            # in for their verdicts.
            self._handle.lone_batches = None
            self.schedule_one(queued)
        finally:
            extenders.forget()

    def _asked_about(self, pod: PodView) -> list[PodView]:
        key = pod_group_of(pod)
        if key is None:
            return [pod]
        return [pod, *self.live.queue.peek(self.live.gangs.members.get(key, set()) - {pod.uid})]

    def check_reservations(self) -> None:
        """A reservation that left the backfill plan (its gang started, was deleted or gave
        up) no longer holds anything back: the pods it held wait in the pool, so send the
        pool back (queueing hint: ReservationReleased)."""
        backfill = self.live.backfill
        if backfill is None:
            return
        holding = backfill.holding()
        if self._holding - holding:
            self.live.queue.move_all("ReservationReleased")
        self._holding = holding

    async def drain(self) -> None:
        """Wait for binding and reporting tasks in flight, then for the Events they left
        buffered (used on shutdown and in tests)."""
        await self.live.tasks.drain()
        await self.live.sender.drain()

    def expire_assumed(self) -> int:
        """Drop assumed pods whose binding was never confirmed by a watch event in time."""
        expired = self.live.cache.cleanup_expired()
        for pod in expired:
            logger.warning("assumed pod expired pod=%s node=%s", pod.key, pod.node_name)
            self.live.metrics.assumed_expired.inc()
        return len(expired)
