"""kube-scheduler's scheduling queue: an active heap, a backoff heap and an unschedulable pool.

- active: pods ready to be tried, in the profile's QueueSort order (insertion order on ties);
- backoff: pods that failed recently, each waiting initial * 2^(attempts-1) seconds (capped)
  from its last failure before it is tried again;
- unschedulable: pods no node fitted. A cluster event that may help (`move_all`) sends them to
  backoff or active, and so does sitting there longer than `unschedulable_timeout`, in case the
  event that would have helped was never seen.

A popped pod is in flight until `done`: it is in none of the three. If a cluster event arrived
after its cycle started, the "no node fits" it is about to report may be stale, so it goes to
backoff instead of the pool (kube's moveRequestCycle guard).

Call `requeue_*` before `done` for a pod whose cycle failed: `done` forgets whether the pod
was deleted while in flight, and a requeue of a deleted pod must be dropped.

The entries of the three, and `spec_changed`, are in runtime/queue_entries.py.
"""

from __future__ import annotations

import asyncio
import dataclasses
import heapq
import logging
from collections.abc import Callable, Iterable
from typing import Final

from batchsched.clock import Clock
from batchsched.framework.interfaces import QueuedPod
from batchsched.model.pod import PodView
from batchsched.runtime.queue_entries import OWN_ANNOTATIONS as OWN_ANNOTATIONS
from batchsched.runtime.queue_entries import Flight, Landed, Ranked, Timed, order_key_of
from batchsched.runtime.queue_entries import Less as Less
from batchsched.runtime.queue_entries import spec_changed as spec_changed

log = logging.getLogger(__name__)

ACTIVE: Final = "active"
BACKOFF: Final = "backoff"
UNSCHEDULABLE: Final = "unschedulable"

TenantOf = Callable[[PodView], str]
Rank = Callable[[QueuedPod], tuple[tuple[int, float], ...]]


class SchedulingQueue:
    """Pending pods of one scheduler, in the order they should be tried."""

    def __init__(
        self,
        less: Less,
        clock: Clock,
        *,
        initial_backoff: float = 1.0,
        max_backoff: float = 10.0,
        unschedulable_timeout: float = 300.0,
        tenant_of: TenantOf | None = None,
        rank: Rank | None = None,
    ) -> None:
        self._less = less
        self._order_key = order_key_of(less)
        # Tenant queues: one active heap per tenant; `rank` says whose head goes next.
        self._tenant_of: TenantOf = tenant_of or (lambda pod: "")
        self._rank = rank
        self._clock = clock
        self._initial_backoff = initial_backoff
        self._max_backoff = max_backoff
        self._unschedulable_timeout = unschedulable_timeout
        # Heaps delete lazily: an entry counts only while its uid's dict still maps to it.
        self._active: dict[str, Ranked] = {}
        self._active_heaps: dict[str, list[Ranked]] = {}
        self._backoff: dict[str, Timed] = {}
        self._backoff_heap: list[tuple[float, int, Timed]] = []
        # Parked in order of parking; the clock is monotonic, so oldest first.
        self._unschedulable: dict[str, Timed] = {}
        self._in_flight: dict[str, Flight] = {}
        self._seq = 0
        self._cycle = 0
        self._move_request_cycle = -1
        self._ready = asyncio.Event()

    # Informer events for pending pods

    def add(self, pod: PodView) -> None:
        current = self._queued(pod.uid)
        if current is not None or pod.uid in self._in_flight:
            self.update(current.pod if current is not None else pod, pod)
            return
        self._push_active(QueuedPod(pod, self._clock.now(), 0))
        self._ready.set()

    def update(self, old: PodView, new: PodView) -> None:
        uid = new.uid
        flight = self._in_flight.get(uid)
        if flight is not None:
            flight.changed = flight.changed or spec_changed(flight.updated or flight.pod, new)
            flight.updated = new
        elif uid in self._active:
            ranked = self._active[uid]
            self._push_active(dataclasses.replace(ranked.qp, pod=new), ranked.seq)
        elif uid in self._backoff:
            timed = self._backoff[uid]
            self._push_backoff(dataclasses.replace(timed.qp, pod=new), timed.at)
        elif uid in self._unschedulable:
            parked = self._unschedulable[uid]
            qp = dataclasses.replace(parked.qp, pod=new)
            if spec_changed(parked.qp.pod, new):
                del self._unschedulable[uid]
                self._move(qp)
                self._ready.set()
            else:
                self._unschedulable[uid] = Timed(qp, parked.at, gated=parked.gated)  # same place
        else:
            self.add(new)

    def delete(self, pod: PodView) -> None:
        uid = pod.uid
        self._active.pop(uid, None)
        self._backoff.pop(uid, None)
        self._unschedulable.pop(uid, None)
        flight = self._in_flight.get(uid)
        if flight is not None:
            flight.deleted = True

    def was_deleted(self, uid: str) -> bool:
        """Whether the pod was deleted since it was popped: its binding should be skipped."""
        flight = self._in_flight.get(uid)
        return flight is not None and flight.deleted

    # The scheduling loop

    def set_tenants(self, tenant_of: TenantOf, rank: Rank | None) -> None:
        """Order by tenant from now on (a quota file was loaded): re-file the active pods."""
        self._tenant_of, self._rank = tenant_of, rank
        entries = sorted(self._active.values(), key=lambda r: r.seq)
        self._active_heaps.clear()
        for ranked in entries:
            self._push_active(ranked.qp, ranked.seq)

    def pop_ready(self) -> QueuedPod | None:
        """The next pod to try, or None; never waits. Counts a scheduling cycle.

        The head of each tenant's heap is a candidate; with a `rank`, the tenant whose head
        ranks best goes (fair share), otherwise the QueueSort order decides across heaps."""
        self.flush()
        best: tuple[str, Ranked] | None = None
        for tenant in list(self._active_heaps):
            head = self._head(tenant)
            if head is not None and (best is None or self._before(head, best[1])):
                best = (tenant, head)
        if best is None:
            return self._pop_backoff_early()
        ranked = heapq.heappop(self._active_heaps[best[0]])
        uid = ranked.qp.pod.uid
        del self._active[uid]
        self._cycle += 1
        self._in_flight[uid] = Flight(ranked.qp.pod)
        return dataclasses.replace(ranked.qp, attempts=ranked.qp.attempts + 1)

    def _pop_backoff_early(self) -> QueuedPod | None:
        """Nothing is active: a pod backing off after "no node fits" (moved back by a cluster
        event) is tried now rather than when its backoff ends, as kube-scheduler does since
        1.33 (KEP-5142); the time would be idle otherwise. Pods backing off after an error
        wait their backoff out."""
        early = [t for t in self._backoff.values() if t.early]
        if not early:
            return None
        first = min(early, key=lambda t: t.at)
        del self._backoff[first.qp.pod.uid]
        self._push_active(first.qp)
        return self.pop_ready()

    def _head(self, tenant: str) -> Ranked | None:
        heap = self._active_heaps[tenant]
        while heap and self._active.get(heap[0].qp.pod.uid) is not heap[0]:
            heapq.heappop(heap)  # deleted lazily: no longer what its uid maps to
        if not heap:
            del self._active_heaps[tenant]
            return None
        return heap[0]

    def _before(self, a: Ranked, b: Ranked) -> bool:
        if self._rank is not None:
            rank_a, rank_b = self._rank(a.qp), self._rank(b.qp)
            if rank_a != rank_b:
                return rank_a < rank_b
        return a < b

    def take(self, uids: Iterable[str]) -> list[QueuedPod]:
        """Pop these pods wherever they wait (a gang's other members join its cycle); they are
        in flight afterwards, exactly as if `pop_ready` had returned them."""
        taken = []
        for uid in uids:
            found: Ranked | Timed | None = None
            for where in (self._active, self._backoff, self._unschedulable):
                found = where.pop(uid, None)
                if found is not None:
                    break
            if found is None:
                continue
            self._in_flight[uid] = Flight(found.qp.pod)
            taken.append(dataclasses.replace(found.qp, attempts=found.qp.attempts + 1))
        return taken

    def peek(self, uids: Iterable[str]) -> list[PodView]:
        """The pods of these that wait here, left where they are (extenders are asked about
        a gang's other members before the cycle takes them)."""
        found = (self._queued(uid) for uid in uids)
        return [qp.pod for qp in found if qp is not None]

    def activate(self, uids: Iterable[str]) -> None:
        """These pods may fit now (what they waited for happened, e.g. a preemptor's victims
        are all gone): out of the pool or their backoff, to the active heap at once."""
        for uid in uids:
            found = self._unschedulable.pop(uid, None) or self._backoff.pop(uid, None)
            if found is not None:
                self._push_active(found.qp)
                self._ready.set()

    async def pop(self) -> QueuedPod:
        """Wait for the next pod to try: woken by add/move, or timed to the next expiry."""
        loop = asyncio.get_running_loop()
        while True:
            qp = self.pop_ready()
            if qp is not None:
                return qp
            self._ready.clear()
            wake_at = self._next_expiry()
            timer = None
            if wake_at is not None:
                delay = max(0.0, wake_at - self._clock.now())
                timer = loop.call_later(delay, self._ready.set)
            try:
                await self._ready.wait()
            finally:
                if timer is not None:
                    timer.cancel()

    def done(self, uid: str) -> None:
        self._in_flight.pop(uid, None)

    def holds(self, uid: str) -> bool:
        """Whether the pod waits here: queued, parked, backing off or in a cycle now."""
        return uid in self._in_flight or self._queued(uid) is not None

    def waiting(self) -> list[PodView]:
        """Every pod `holds` says waits here, the newest version of each (PodGroup status)."""
        found = [e.qp.pod for e in self._active.values()]
        found.extend(t.qp.pod for t in (*self._backoff.values(), *self._unschedulable.values()))
        found.extend(f.updated or f.pod for f in self._in_flight.values())
        return found

    def requeue_unschedulable(self, qp: QueuedPod, cycle: int) -> None:
        """No node fitted in `cycle`: park the pod until a cluster event may help."""
        landed = self._land(qp)
        if landed is None:
            return
        now = self._clock.now()
        if self._move_request_cycle >= cycle or landed.changed:
            self._push_backoff(landed.qp, now + self.backoff_duration(qp.attempts), early=True)
        else:
            self._unschedulable[qp.pod.uid] = Timed(landed.qp, now)
        self._ready.set()

    def park(self, qp: QueuedPod) -> None:
        """The pod was not tried (it waits for something of its own, e.g. the evictions of
        its preemption plan): back to the pool, with no backoff, until `activate` sends it
        back. No cluster event moves it (a preemptor waiting for its victims was moved by
        every pod deleted anywhere, 1500 in PreemptionBasic, only to be parked again); a
        change to its own spec does, and so does the pool's timeout, in case the activation
        it waits for never comes."""
        landed = self._land(qp)
        if landed is not None:
            self._unschedulable[qp.pod.uid] = Timed(landed.qp, self._clock.now(), gated=True)

    def requeue_backoff(self, qp: QueuedPod) -> None:
        """The cycle or the binding failed with an error: retry after the pod's backoff."""
        landed = self._land(qp)
        if landed is None:
            return
        self._push_backoff(landed.qp, self._clock.now() + self.backoff_duration(qp.attempts))
        self._ready.set()

    def move_all(self, event: str) -> None:
        """A cluster event that may make any parked pod schedulable: send them all back (but
        those `park` keeps for `activate`)."""
        self.move_where(event, lambda pod: True)

    def move_where(self, event: str, helps: Callable[[PodView], bool]) -> int:
        """A cluster event: send back the parked pods it may help (`helps`, a queueing hint);
        the others stay parked. Pods in flight are treated as if it helped them (their
        "no node fits" may be stale). Returns how many moved."""
        self._move_request_cycle = self._cycle
        if not self._unschedulable:
            return 0
        moved = [t for t in self._unschedulable.values() if not t.gated and helps(t.qp.pod)]
        for timed in moved:
            del self._unschedulable[timed.qp.pod.uid]
            self._move(timed.qp)
        log.debug(
            "moved unschedulable pods event=%s count=%d left=%d",
            event,
            len(moved),
            len(self._unschedulable),
        )
        if moved:
            self._ready.set()
        return len(moved)

    def flush(self) -> None:
        """Move pods whose backoff ended to active, and long-parked pods out of the pool."""
        now = self._clock.now()
        heap = self._backoff_heap
        while heap and heap[0][0] <= now:
            _, _, timed = heapq.heappop(heap)
            uid = timed.qp.pod.uid
            if self._backoff.get(uid) is timed:
                del self._backoff[uid]
                self._push_active(timed.qp)
        stale = []
        for uid, timed in self._unschedulable.items():
            if now - timed.at < self._unschedulable_timeout:
                break
            stale.append(uid)
        for uid in stale:
            self._move(self._unschedulable.pop(uid).qp)

    def scheduling_cycle(self) -> int:
        return self._cycle

    def counts(self) -> dict[str, int]:
        return {
            ACTIVE: len(self._active),
            BACKOFF: len(self._backoff),
            UNSCHEDULABLE: len(self._unschedulable),
        }

    def backoff_duration(self, attempts: int) -> float:
        # The exponent is capped first so a pod retried for weeks cannot overflow a float.
        doubling = min(max(attempts - 1, 0), 64)
        return float(min(self._initial_backoff * 2**doubling, self._max_backoff))

    # Internals

    def _queued(self, uid: str) -> QueuedPod | None:
        for where in (self._active, self._backoff, self._unschedulable):
            found = where.get(uid)
            if found is not None:
                return found.qp
        return None

    def _land(self, qp: QueuedPod) -> Landed | None:
        """End the pod's flight; None when it must not be requeued (deleted, or queued already)."""
        uid = qp.pod.uid
        flight = self._in_flight.pop(uid, None) or Flight(qp.pod)
        if flight.deleted or self._queued(uid) is not None:
            return None
        pod = flight.updated or qp.pod
        return Landed(QueuedPod(pod, self._clock.now(), qp.attempts), flight.changed)

    def _move(self, qp: QueuedPod) -> None:
        expiry = qp.enqueued_at + self.backoff_duration(qp.attempts)
        if expiry > self._clock.now():
            self._push_backoff(qp, expiry, early=True)
        else:
            self._push_active(qp)

    def _push_active(self, qp: QueuedPod, seq: int | None = None) -> None:
        if seq is None:
            seq = self._next_seq()
        ranked = Ranked(qp, seq, self._less, self._order_key)
        self._active[qp.pod.uid] = ranked
        tenant = self._tenant_of(qp.pod)
        heapq.heappush(self._active_heaps.setdefault(tenant, []), ranked)

    def _push_backoff(self, qp: QueuedPod, expiry: float, early: bool = False) -> None:
        timed = Timed(qp, expiry, early)
        self._backoff[qp.pod.uid] = timed
        heapq.heappush(self._backoff_heap, (expiry, self._next_seq(), timed))

    def _next_seq(self) -> int:
        self._seq += 1
        return self._seq

    def _next_expiry(self) -> float | None:
        """When the next backoff ends or the oldest parked pod times out, whichever is first."""
        heap = self._backoff_heap
        while heap and self._backoff.get(heap[0][2].qp.pod.uid) is not heap[0][2]:
            heapq.heappop(heap)
        times = [heap[0][0]] if heap else []
        oldest = next(iter(self._unschedulable.values()), None)
        if oldest is not None:
            times.append(oldest.at + self._unschedulable_timeout)
        return min(times, default=None)
