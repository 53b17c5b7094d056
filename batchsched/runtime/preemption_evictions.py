"""The evictions of a started preemption plan: one task per plan, one victim at a time, each
announced by a `Preempted` Event before its eviction is asked for (the rules of order, retry
and giving up: preemption/execution.py)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Final, Protocol

from batchsched.kube.eviction import EvictionOutcome, EvictionResult
from batchsched.model.pod import PodView
from batchsched.preemption.execution import Answer
from batchsched.runtime.live import Live
from batchsched.runtime.preemption_flight import InFlight

logger = logging.getLogger(__name__)

ANSWERS: Final = {
    EvictionOutcome.EVICTED: Answer.ACCEPTED,
    EvictionOutcome.GONE: Answer.GONE,
    EvictionOutcome.REFUSED: Answer.REFUSED,
    EvictionOutcome.FAILED: Answer.FAILED,
}
# Plans evicting at once (each one victim at a time, its Preempted Event first): kube-scheduler
# deletes a plan's victims with 16 workers. Unbounded, 500 plans made within seconds sent
# ~500 POSTs together and the API server answered hundreds only after the 30 s timeout
# (PreemptionBasic on the loaded 2-core box); the preemptors wait parked meanwhile.
EVICTIONS_IN_FLIGHT: Final = 16


class Evictor(Protocol):
    async def evict(self, namespace: str, name: str, uid: str) -> EvictionResult: ...


class Evictions:
    def __init__(
        self,
        live: Live,
        evictor: Evictor,
        started: Callable[[str], None],
        refused: Callable[[InFlight, PodView, str], None],
    ) -> None:
        self.live = live
        self.evictor = evictor
        self._started = started  # the first eviction of a plan was accepted (by key)
        self._refused = refused  # the first eviction was refused: nothing was evicted
        self.executing: list[InFlight] = []  # plans with evictions left, held or not
        self._slots = asyncio.Semaphore(EVICTIONS_IN_FLIGHT)

    def start(self, flight: InFlight) -> None:
        self.executing.append(flight)
        self.live.spawn(self._evict(flight))

    def retry_due(self, now: float) -> None:
        """Evictions due for a retry are made; finished plans are dropped."""
        for flight in list(self.executing):
            if flight.evicting:
                continue
            due = flight.execution.next_retry()
            if flight.execution.finished:
                self.executing.remove(flight)
            elif due is not None and due <= now:
                self.live.spawn(self._evict(flight))

    async def _evict(self, flight: InFlight) -> None:
        """Evict the victims that are due, one at a time (one such task per plan), the plan
        holding its slot from the first to the last: taken per victim, 500 plans made
        within seconds queued each victim behind every other plan's, so each plan's last
        victim went, and its preemptor bound, only at the end of the storm."""
        if flight.evicting:
            return
        flight.evicting = True
        execution = flight.execution
        try:
            async with self._slots:
                while (victim := execution.next_victim(self.live.clock.now())) is not None:
                    if self.live.cache.snapshot.node_of(victim.uid) is None:
                        execution.went([victim.uid])  # deleted meanwhile: nothing to evict
                        continue
                    result = await self._evict_one(flight, victim)
                    self._answered(flight, victim, result)
        finally:
            flight.evicting = False
            self._undefer(flight)
            if execution.finished and flight in self.executing:
                self.executing.remove(flight)
                if execution.given_up:
                    logger.warning(
                        "preemption incomplete key=%s victims_left=%d",
                        flight.key,
                        len(execution.given_up),
                    )

    async def _evict_one(self, flight: InFlight, victim: PodView) -> EvictionResult:
        if not await self._announce(flight, victim):
            return EvictionResult(EvictionOutcome.FAILED, "its Preempted Event failed")
        return await self.evictor.evict(victim.namespace, victim.name, victim.uid)

    def _undefer(self, flight: InFlight) -> None:
        """Its preemptors' cycles that waited are tried now if they wait no more (every victim
        went already, or one waits for a retry); otherwise `Preempting.victim_gone` sends
        them back as the last one goes (activated now, they would only find victims there)."""
        if flight.deferred and not flight.gates_cycles(self.live.cache.snapshot):
            flight.deferred = False
            self.live.queue.activate(p.uid for p in flight.preemptors)

    async def _announce(self, flight: InFlight, victim: PodView) -> bool:
        """The victim's `Preempted` Event, posted before its eviction is asked for (False:
        it was not, so no eviction yet): never an unexplained eviction."""
        if victim.uid not in flight.announced:
            note = flight.victim_note(victim)
            posted = await self.live.events.record(
                victim, "Normal", "Preempted", "Preempting", note
            )
            if posted is False:
                return False
            flight.announced.add(victim.uid)
        return True

    def _answered(self, flight: InFlight, victim: PodView, result: EvictionResult) -> None:
        execution = flight.execution
        first = not execution.started
        answer = ANSWERS[result.outcome]
        retry_s = execution.answered(victim, answer, self.live.clock.now())
        if answer is Answer.ACCEPTED:
            if first:
                self._started(flight.key)  # a plan started: its backoff starts over
        elif answer is Answer.GONE:
            logger.debug("victim gone before its eviction key=%s victim=%s", flight.key, victim.key)
        elif execution.ended:
            self._refused(flight, victim, result.message)
        elif retry_s is None:
            note = f"{flight.who()} gave up evicting it: {result.message}"
            self.live.record(victim, "Warning", "PreemptionIncomplete", "Preempting", note)
        else:
            logger.info(
                "eviction to retry key=%s victim=%s outcome=%s retry_s=%g message=%s",
                flight.key,
                victim.key,
                result.outcome.value,
                retry_s,
                result.message,
            )
