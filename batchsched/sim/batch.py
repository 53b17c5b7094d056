"""The batch simulator: gangs from tenants, on a virtual clock, through the tenant queues.

The per-pod simulator (`engine.py`) measures placement; this one measures the queue: who
starts when. At each instant (departures first, then arrivals), one pass walks the pending
gangs in fair-share order (`queues.fairshare`: the tenant with the best rank goes next, its
oldest highest-priority gang first; ranks move as the pass admits gangs) and for each gang:

  1. quota: `queues.quota.check_admission` (max, priority range, protected guarantees);
  2. placement: the gang core (`schedule_gang`) on a trial of the shared snapshot, with the
     same plugins as the live scheduler;
  3. backfill: a gang that fits now starts only if no protected reservation starts later
     because of it (`batchsched.backfill.delays`); a gang that does not fit gets a
     reservation while fewer than K gangs hold one (or when it is starving).

Modes: `backfill` (the above), `fifo` (the first gang that cannot start stops the pass: strict
head-of-line order) and `greedy` (whoever fits starts; no reservations).
Expected runtimes are the jobs' real runtimes unless a job says otherwise.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Literal

from batchsched.backfill import GangDemand, Planner, Reservation, Running, vector
from batchsched.backfill_verdicts import NodeVerdicts
from batchsched.cycle.cycle import schedule_workload
from batchsched.cycle.decision import Bind, Reject, Why
from batchsched.cycle.policies import Placed
from batchsched.cycle.workload import Workload
from batchsched.framework.profile import Profile
from batchsched.framework.runner import ProfileRunner
from batchsched.gang.core import eligible_nodes
from batchsched.model.pod import PodView
from batchsched.plugins.backfill_reservations import attach_reservation_guard
from batchsched.preemption.domains import required_domains
from batchsched.sim.batch_cycle import BatchHandle
from batchsched.sim.batch_jobs import BatchJob
from batchsched.sim.batch_shapes import NEVER, PassMemo, fair_order, shape_of
from batchsched.sim.batch_state import EventQueue, RunLog
from batchsched.sim.claims import bind_claims, release_claims
from batchsched.snapshot import Snapshot
from queues.demand import PRODUCT_LABEL, capacity_of, gang_demand, sole_product
from queues.model import QuotaPolicy, add, subtract
from queues.quota import check_admission
from queues.usage import UsageLedger

__all__ = ["BatchJob", "BatchResult", "BatchSimulator", "Mode"]

Mode = Literal["backfill", "fifo", "greedy"]
_STARTED, _NO_FIT, _DELAYS, _QUOTA = "started", "no-fit", "delays", "quota"


@dataclass(slots=True)
class _Pending:
    job: BatchJob
    demand: dict[str, int]  # quota demand before placement (no GPU model yet)
    shape: tuple[object, ...]
    reason: str = ""
    estimate: float | None = None  # planned start, while it holds a reservation


@dataclass
class BatchResult:
    log: RunLog
    attempts: int = 0
    reasons: dict[str, str] = field(default_factory=dict)  # still pending at the end: why


class BatchSimulator:
    def __init__(
        self,
        snapshot: Snapshot,
        profile: Profile,
        policy: QuotaPolicy,
        mode: Mode = "backfill",
        seed: int = 0,
    ) -> None:
        self.snapshot = snapshot
        self.runner = ProfileRunner(profile, seed)
        attach_reservation_guard({profile.scheduler_name: profile}, self)
        self._planner: Planner | None = None  # this pass's reservations
        self._now = 0.0
        self._job_of: dict[str, BatchJob] = {}  # pending member uid -> its job
        self.policy = policy
        self.mode = mode
        self.ledger = UsageLedger(policy.half_life_s)
        self.capacity = capacity_of((i.node.allocatable, i.node.labels) for i in snapshot.nodes)
        self.allocatable = {
            i.name: vector(i.node.allocatable, i.node.allocatable.pods) for i in snapshot.nodes
        }
        self.log = RunLog(self.capacity)
        self._sole = sole_product(self.capacity)
        self.events = EventQueue()
        self.pending: dict[str, _Pending] = {}
        self.running: dict[str, tuple[BatchJob, float, dict[str, int]]] = {}
        self._eligible: dict[str, tuple[str, ...]] = {}
        self._blocked_since: dict[str, float] = {}  # gangs that found no room, since when
        self._reserved: dict[str, tuple[float | None, int]] = {}  # this pass: start, priority
        self._running_pods_now: list[Running] | None = None
        self._in_use_now: dict[str, int] = {}
        self.attempts = 0

    def run(self, jobs: Sequence[BatchJob]) -> BatchResult:
        for job in jobs:
            self.events.arrive(job.arrival, job)
        while self.events:
            now, departures, arrivals = self.events.pop_instant()
            for job in departures:
                self._depart(job, now)
            for job in arrivals:
                self.pending[job.key] = _Pending(job, self._demand_of(job), shape_of(job))
                self._job_of.update((p.uid, job) for p in job.members)
                self.log.arrived(job, now)
            self._pass(now)
            while not self.events and self.pending:
                # Nothing left to happen: pass again while passes still start gangs (one may
                # have released a reservation that held the others back).
                waiting = len(self.pending)
                self._pass(now)
                if len(self.pending) == waiting:
                    break
        reasons = {key: p.reason for key, p in self.pending.items()}
        return BatchResult(self.log, self.attempts, reasons)

    # One pass

    def _pass(self, now: float) -> None:
        planner = self._carried_reservations(now) if self.mode == "backfill" else None
        self._planner, self._now = planner, now
        starving = sum(1 for e in self.pending.values() if self._starving(e.job, now))
        memo = PassMemo.begin(self.pending.values(), starving, self._reserved)
        for entry in self._fair_order(now):
            job = entry.job
            memo.starving -= self._starving(job, now)
            memo.unvisited.discard(job.key)
            admission = check_admission(
                self.policy, self.ledger, job.tenant, entry.demand, job.priority,
                self.capacity, self._in_use_now,
            )  # fmt: skip
            if not admission.admitted:
                entry.reason = admission.reason
                self._unblock(job.key, planner)  # quota, not capacity, holds it: no reservation
                continue
            outcome = self._attempt(entry, now, planner, memo)
            if outcome in (_STARTED, _QUOTA):
                continue
            if self.mode == "fifo":
                entry.reason = entry.reason or "waits behind the head of the line (strict FIFO)"
                return
            reserved = 0 if planner is None else len(planner.reservations)
            if self.mode == "backfill":
                planner, reserved = self._keep_in_line(entry, now, planner, reserved)
            done = not memo.starving and not memo.unvisited
            if done and self.mode == "backfill":
                done = reserved >= self.policy.reservations
            if done and memo.all_stuck():
                return  # nothing left can start, and no reservation is left to hand out

    def _attempt(self, entry: _Pending, now: float, planner: Planner | None, memo: PassMemo) -> str:
        """Try to start an admitted gang, unless one alike has failed earlier in the pass.

        Within a pass capacity only shrinks: a shape that found no room (or would delay a
        reservation, for as long a runtime) finds none later in the pass either. Where a gang
        may go also depends on which reservations are ahead of it in line: gangs alike in shape
        and in those are alike."""
        job = entry.job
        place = self._place(job)
        ahead = frozenset(k for k in self._reserved if k != job.key and self._ahead(k, now) < place)
        fit_key = (entry.shape, ahead, job.key in self._reserved)
        delay_key = (*fit_key, job.expected)
        if fit_key in memo.failed:
            outcome = _NO_FIT
        elif delay_key in memo.delayed:
            outcome = _DELAYS
        else:
            outcome = self._try_place(job, now, planner)
        if outcome == _QUOTA:
            self._unblock(job.key, planner)
        elif outcome == _NO_FIT:
            memo.found_no_room(fit_key, entry.shape)
        elif outcome == _DELAYS:
            memo.would_delay(delay_key, entry.shape, job.expected)
        return outcome

    def _keep_in_line(
        self, entry: _Pending, now: float, planner: Planner | None, reserved: int
    ) -> tuple[Planner | None, int]:
        """A gang that cannot start: blocked from now on, and given a reservation while fewer
        than K gangs hold one (or when it is starving). Returns the pass's planner (made here
        for the first reservation) and how many reservations it holds."""
        job = entry.job
        self._blocked_since.setdefault(job.key, now)
        if job.key not in self._reserved and self._gets_reservation(job, reserved, now):
            if planner is None:
                planner = Planner(self.allocatable, self._running_pods(), now)
                self._planner = planner
            self._reserve(planner, job)
            reserved += 1
        found = self._reserved.get(job.key)
        entry.estimate = None if found is None else found[0]
        return planner, reserved

    def _carried_reservations(self, now: float) -> Planner | None:
        """Reservations persist across passes, as the live scheduler's do: the gangs blocked
        before (first K by priority then wait, and starving ones) are re-planned first."""
        self._reserved = {}
        waiting = [k for k in self._blocked_since if k in self.pending and self._admits(k)]
        self._blocked_since = {k: self._blocked_since[k] for k in waiting}
        if not waiting:
            return None
        ordered = sorted(waiting, key=lambda k: self._place(self.pending[k].job))
        chosen = ordered[: self.policy.reservations] + [
            k
            for k in ordered[self.policy.reservations :]
            if self._starving(self.pending[k].job, now)
        ]
        planner = Planner(self.allocatable, self._running_pods(), now)
        for key in chosen:
            self._reserve(planner, self.pending[key].job)
        return planner

    def verdicts(self, pod: PodView) -> NodeVerdicts | None:
        """The BackfillReservations plugin's question: where must this pod not start now?"""
        job = self._job_of.get(pod.uid)
        planner = self._planner
        if job is None or planner is None:
            return None
        now = self._now
        mine = self._place(job)
        ahead = frozenset(
            r.key
            for r in planner.reservations
            if r.protected and r.key != job.key and self._ahead(r.key, now) < mine
        )
        if not ahead:
            return None
        end = None if job.expected is None else now + job.expected
        return NodeVerdicts(planner, ahead, vector(pod.requests), end)

    def _place(self, job: BatchJob) -> tuple[int, float, float, str]:
        """A gang's place in line: priority, how long blocked (never: last), age, key."""
        since = self._blocked_since.get(job.key, NEVER)
        return (-job.priority, since, job.arrival, job.key)

    def _ahead(self, key: str, now: float) -> tuple[int, float, float, str]:
        """A reserved gang's place in line, as the live scheduler orders reservations; it
        holds back only gangs behind it."""
        entry = self.pending.get(key)
        if entry is None:
            return (0, now, now, key)
        return self._place(entry.job)

    def _unblock(self, key: str, planner: Planner | None) -> None:
        self._blocked_since.pop(key, None)
        if self._reserved.pop(key, None) is not None and planner is not None:
            planner.release(key)

    def _reserve(self, planner: Planner, job: BatchJob) -> None:
        reservation = planner.reserve(self._demand(job, protected=True))
        start = None if reservation is None else reservation.start
        self._reserved[job.key] = (start, job.priority)

    def _demand_of(self, job: BatchJob) -> dict[str, int]:
        """Quota demand before placement; per-model too when the cluster has one GPU model."""
        if self._sole is None:
            return gang_demand(job.members)
        return gang_demand(job.members, {p.uid: self._sole for p in job.members})

    def _admits(self, key: str) -> bool:
        entry = self.pending[key]
        job = entry.job
        return check_admission(
            self.policy, self.ledger, job.tenant, entry.demand, job.priority,
            self.capacity, self._in_use_now,
        ).admitted  # fmt: skip

    def _starving(self, job: BatchJob, now: float) -> bool:
        return now - job.arrival >= self.policy.starvation_s

    def _fair_order(self, now: float) -> Iterator[_Pending]:
        """Pending gangs, the best-ranked tenant's next gang first; ranks are recomputed after
        every admission (the ledger moves)."""
        return fair_order(
            list(self.pending.values()), self.pending, self.policy, self.ledger, self.capacity, now
        )

    def _try_place(self, job: BatchJob, now: float, planner: Planner | None) -> str:
        """One workload cycle for the gang (batch_cycle.py gives it this simulator's quota
        and backfill checks); start it when the cycle binds it."""
        self.attempts += 1
        expected = job.expected
        ends_at = None if expected is None else now + expected
        delayed = (
            None
            if planner is None
            else lambda starting: self._delayed_reservation(job, now, planner, starting)
        )
        handle = BatchHandle(self.snapshot, self.runner, ends_at, self._quota(job), delayed)
        workload = Workload(job.key, job.members, gang=True, group=job.pod_group(), hold=False)
        decision = schedule_workload(handle, workload)
        if isinstance(decision, Bind):
            products = {r.pod.uid: self._product(r.node) for r in decision.placed}
            demand = gang_demand(job.members, products)
            self._start(job, now, planner, list(decision.starts), demand, ends_at)
            return _STARTED
        why = decision.why if isinstance(decision, Reject) else Why.UNSCHEDULABLE
        self.pending[job.key].reason = decision.message.removeprefix("quota: ")
        return {Why.QUOTA_PLACED: _QUOTA, Why.BACKFILL: _DELAYS}.get(why, _NO_FIT)

    def _quota(self, job: BatchJob) -> Callable[[Placed], str]:
        """The GPU model is known once placed: per-model maxes are checked on what was."""

        def refuses(placed: Placed) -> str:
            products = {pod.uid: self._product(node) for pod, node in placed}
            admission = check_admission(
                self.policy, self.ledger, job.tenant, gang_demand(job.members, products),
                job.priority, self.capacity, self._in_use_now,
            )  # fmt: skip
            return "" if admission.admitted else admission.reason

        return refuses

    def _delayed_reservation(
        self, job: BatchJob, now: float, planner: Planner, starting: list[Running]
    ) -> Reservation | None:
        """The first reservation ahead of `job` in line that its start would delay."""
        mine = self._place(job)
        late = [
            r
            for r in planner.conflicts(starting)
            if r.key != job.key and self._ahead(r.key, now) < mine
        ]
        return late[0] if late else None

    def _start(
        self,
        job: BatchJob,
        now: float,
        planner: Planner | None,
        starting: list[Running],
        demand: dict[str, int],
        ends_at: float | None,
    ) -> None:
        """Book a gang whose placement was committed: running until it departs."""
        if planner is not None:
            planner.release(job.key)
            planner.start(starting)
        self.ledger.add(self.policy, job.tenant, demand, now)
        self._in_use_now = add(self._in_use_now, demand)
        self._running_pods_now = None
        del self.pending[job.key]
        for pod in job.members:  # every member is placed: minMember is all of them
            self._job_of.pop(pod.uid, None)
            bind_claims(self.snapshot.dra, pod)  # PreBind's write (sim/claims.py)
        self._blocked_since.pop(job.key, None)
        self.running[job.key] = (job, ends_at if ends_at is not None else float("inf"), demand)
        self.events.depart(now + job.runtime, job)
        self.log.started(job, now, demand)

    def _depart(self, job: BatchJob, now: float) -> None:
        _, _, demand = self.running.pop(job.key)
        for pod in job.members:
            self.snapshot.forget(pod)
            release_claims(self.snapshot.dra, pod)
        self.ledger.remove(self.policy, job.tenant, demand, now)
        self._in_use_now = subtract(self._in_use_now, demand)
        self._running_pods_now = None
        self.log.ended(job, now, demand)

    def _gets_reservation(self, job: BatchJob, reserved: int, now: float) -> bool:
        return reserved < self.policy.reservations or now - job.arrival >= self.policy.starvation_s

    def _demand(self, job: BatchJob, protected: bool) -> GangDemand:
        nodes = self._eligible.get(job.key)
        if nodes is None:
            sample = job.members[0]
            nodes = tuple(i.name for i in eligible_nodes(self.runner, sample, self.snapshot))
            self._eligible[job.key] = nodes
        members = tuple(vector(p.requests) for p in job.members)
        domains = required_domains(self.runner.profile, job.pod_group(), self.snapshot.nodes)
        return GangDemand(job.key, members, nodes, job.expected, protected, domains)

    def _running_pods(self) -> list[Running]:
        if self._running_pods_now is not None:
            return self._running_pods_now
        out = []
        for job, ends_at, _ in self.running.values():
            end = None if ends_at == float("inf") else ends_at
            for pod in job.members:
                info = self.snapshot.node_of(pod.uid)
                if info is not None:
                    out.append(Running(info.name, vector(pod.requests), end))
        self._running_pods_now = out
        return out

    def _product(self, node: str) -> str:
        info = self.snapshot.get(node)
        return info.node.labels.get(PRODUCT_LABEL, "") if info is not None else ""
