"""Preemptors parked while their victims go, and what each victim's going means for them.

A preemptor whose plan is in flight is not tried (`InFlight.gates_cycles`): it waits parked
in the queue, where no cluster event moves it (`SchedulingQueue.park`), for every pod
deleted anywhere moved it before, only for its cycle to park it again or, during its last
eviction's request, to fail on its victims still there. Instead, the going of one of its
own victims tells it how far they are (its condition and one Event, no cycle; the first at
once, then at most one each `NEWS_INTERVAL_S`), and the going of the last on its nominated
nodes sends it back (`SchedulingQueue.activate`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from batchsched.model.pod import PodView
from batchsched.runtime.live import Live
from batchsched.runtime.preemption_flight import InFlight

# The least time between two progress notes of one plan (the status writer's MIN_REWRITE_S).
NEWS_INTERVAL_S: Final = 5.0


class VictimWatch:
    def __init__(self, live: Live) -> None:
        self.s = live
        self._flights_of: dict[str, set[str]] = {}  # victim uid -> keys of plans naming it

    def add(self, flight: InFlight) -> None:
        for victim in flight.plan.victim_pods():
            self._flights_of.setdefault(victim.uid, set()).add(flight.key)

    def drop(self, flight: InFlight) -> None:
        for victim in flight.plan.victim_pods():
            keys = self._flights_of.get(victim.uid, set())
            keys.discard(flight.key)
            if not keys:
                self._flights_of.pop(victim.uid, None)

    def gone(self, pod: PodView, flights: Mapping[str, InFlight]) -> None:
        """A counted pod went: the preemptors of each plan naming it as a victim are sent
        back when their room is made, told how far the victims are otherwise."""
        snapshot = self.s.cache.snapshot
        for key in self._flights_of.get(pod.uid, ()):
            flight = flights[key]
            if flight.room_made(snapshot):
                self.s.queue.activate(p.uid for p in flight.preemptors)
            else:
                self.tell(flight, f"preemption: {flight.progress(snapshot)}")

    def tell(self, flight: InFlight, note: str) -> None:
        """A waiting preemptor's news, when it is news: its pods' condition, one Event. The
        first victim's going is told at once, later ones once `NEWS_INTERVAL_S` passed: a
        plan's victims evicted one after the other often go within a second, and a note for
        each cost a status write and an Event (1000 of each in PreemptionBasic)."""
        s = self.s
        now = s.clock.now()
        if note == flight.told or now - flight.told_at < NEWS_INTERVAL_S:
            return
        flight.told, flight.told_at = note, now
        for pod in flight.preemptors:
            s.spawn(s.status.mark_unschedulable(pod, note))
        s.record(flight.regarding(), "Warning", "FailedScheduling", "Scheduling", note)
