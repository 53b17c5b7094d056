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

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Literal

from batchsched.backfill import GangDemand, Planner, Running, vector
from batchsched.framework.profile import Profile
from batchsched.framework.runner import ProfileRunner
from batchsched.gang.core import GangRequest, Outcome, eligible_nodes, schedule_gang
from batchsched.gang.podgroup import PodGroupView
from batchsched.model.pod import PodView
from batchsched.model.resources import Resources
from batchsched.sim.batch_state import EventQueue, RunLog
from batchsched.snapshot import Snapshot
from queues.demand import PRODUCT_LABEL, capacity_of, gang_demand
from queues.fairshare import gang_order, rank_key
from queues.model import QuotaPolicy, add, subtract
from queues.quota import check_admission
from queues.usage import UsageLedger

Mode = Literal["backfill", "fifo", "greedy"]
_STARTED, _NO_FIT, _DELAYS, _QUOTA = "started", "no-fit", "delays", "quota"
_NEVER = float("inf")  # "blocked since" of a gang never blocked: behind every blocked one


@dataclass(frozen=True, slots=True)
class BatchJob:
    key: str  # "namespace/name" of its PodGroup
    tenant: str
    members: tuple[PodView, ...]
    arrival: float
    runtime: float
    priority: int = 0
    expected_runtime: float | None = -1.0  # -1: the real runtime; None: unknown
    job_class: str = ""

    @property
    def expected(self) -> float | None:
        return self.runtime if self.expected_runtime == -1.0 else self.expected_runtime


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
        self.policy = policy
        self.mode = mode
        self.ledger = UsageLedger(policy.half_life_s)
        self.capacity = capacity_of((i.node.allocatable, i.node.labels) for i in snapshot.nodes)
        self.allocatable = {
            i.name: vector(i.node.allocatable, i.node.allocatable.pods) for i in snapshot.nodes
        }
        self.log = RunLog(self.capacity)
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
                self.pending[job.key] = _Pending(job, gang_demand(job.members), _shape(job))
                self.log.arrived(job, now)
            self._pass(now)
        reasons = {key: p.reason for key, p in self.pending.items()}
        return BatchResult(self.log, self.attempts, reasons)

    # One pass

    def _pass(self, now: float) -> None:
        planner = self._carried_reservations(now) if self.mode == "backfill" else None
        failed: set[tuple[object, ...]] = set()
        delayed: set[tuple[object, ...]] = set()
        shapes = {entry.shape for entry in self.pending.values()}
        starving = sum(1 for e in self.pending.values() if self._starving(e.job, now))
        for entry in self._fair_order(now):
            job = entry.job
            starving -= self._starving(job, now)
            admission = check_admission(
                self.policy, self.ledger, job.tenant, entry.demand, job.priority,
                self.capacity, self._in_use_now,
            )  # fmt: skip
            if not admission.admitted:
                entry.reason = admission.reason
                continue
            # Within a pass capacity only shrinks: a shape that found no room (or would delay a
            # reservation, for as long a runtime) finds none later in the pass either.
            mine = (-job.priority, self._blocked_since.get(job.key, _NEVER), job.key)
            behind_all = all(self._ahead(k, now) < mine for k in self._reserved)
            delay_key = (entry.shape, job.expected) if behind_all else None
            if entry.shape in failed:
                outcome = _NO_FIT
            elif delay_key is not None and delay_key in delayed:
                outcome = _DELAYS
            else:
                outcome = self._try_place(job, now, planner)
            if outcome in (_STARTED, _QUOTA):
                continue
            if outcome == _NO_FIT:
                failed.add(entry.shape)
            elif outcome == _DELAYS and delay_key is not None:
                delayed.add(delay_key)
            if self.mode == "fifo":
                entry.reason = entry.reason or "waits behind the head of the line (strict FIFO)"
                return
            reserved = 0 if planner is None else len(planner.reservations)
            if self.mode == "backfill":
                self._blocked_since.setdefault(job.key, now)
                if job.key not in self._reserved and self._gets_reservation(job, reserved, now):
                    if planner is None:
                        planner = Planner(self.allocatable, self._running_pods(), now)
                    self._reserve(planner, job)
                    reserved += 1
                found = self._reserved.get(job.key)
                entry.estimate = None if found is None else found[0]
            if (
                shapes <= failed
                and not starving
                and (self.mode != "backfill" or reserved >= self.policy.reservations)
            ):
                return  # nothing left can start, and no reservation is left to hand out

    def _carried_reservations(self, now: float) -> Planner | None:
        """Reservations persist across passes, as the live scheduler's do: the gangs blocked
        before (first K by priority then wait, and starving ones) are re-planned first."""
        self._reserved = {}
        waiting = [k for k in self._blocked_since if k in self.pending]
        self._blocked_since = {k: self._blocked_since[k] for k in waiting}
        if not waiting:
            return None
        ordered = sorted(
            waiting, key=lambda k: (-self.pending[k].job.priority, self._blocked_since[k], k)
        )
        chosen = ordered[: self.policy.reservations] + [
            k
            for k in ordered[self.policy.reservations :]
            if self._starving(self.pending[k].job, now)
        ]
        planner = Planner(self.allocatable, self._running_pods(), now)
        for key in chosen:
            self._reserve(planner, self.pending[key].job)
        return planner

    def _ahead(self, key: str, now: float) -> tuple[int, float, str]:
        """A reserved gang's place in line: (-priority, blocked since, key), as the live
        scheduler orders reservations; it holds back only gangs behind it."""
        priority = self._reserved[key][1] if key in self._reserved else 0
        return (-priority, self._blocked_since.get(key, now), key)

    def _reserve(self, planner: Planner, job: BatchJob) -> None:
        reservation = planner.reserve(self._demand(job, protected=True))
        start = None if reservation is None else reservation.start
        self._reserved[job.key] = (start, job.priority)

    def _starving(self, job: BatchJob, now: float) -> bool:
        return now - job.arrival >= self.policy.starvation_s

    def _fair_order(self, now: float) -> Iterator[_Pending]:
        """Pending gangs, the best-ranked tenant's next gang first; ranks are recomputed after
        every admission (the ledger moves)."""
        by_tenant: dict[str, list[_Pending]] = {}
        for entry in self.pending.values():
            by_tenant.setdefault(entry.job.tenant, []).append(entry)
        for entries in by_tenant.values():
            entries.sort(
                key=lambda e: gang_order(e.job.priority, e.job.arrival, e.job.key), reverse=True
            )
        ranks: dict[str, tuple[object, tuple[object, ...]]] = {}

        def rank(tenant: str) -> tuple[object, ...]:
            head = by_tenant[tenant][-1]
            stamp = (head.job.key, self.ledger.versions(self.policy, tenant))
            cached = ranks.get(tenant)
            if cached is None or cached[0] != stamp:
                key = rank_key(self.policy, self.ledger, tenant, head.demand, self.capacity, now)
                cached = ranks[tenant] = (stamp, (key, tenant))
            return cached[1]

        while by_tenant:
            tenant = min(by_tenant, key=rank)
            entries = by_tenant[tenant]
            entry = entries.pop()
            if not entries:
                del by_tenant[tenant]
            if entry.job.key in self.pending:
                yield entry

    def _try_place(self, job: BatchJob, now: float, planner: Planner | None) -> str:
        self.attempts += 1
        group = PodGroupView(
            job.key.split("/")[0],
            job.key.split("/")[1],
            job.key,
            len(job.members),
            Resources(),
            None,
            job.arrival,
            {},
            {},
        )
        trial = self.snapshot.begin_trial()
        decision = schedule_gang(
            GangRequest(group, job.members), self.snapshot, self.runner, hold_incomplete=False
        )
        if decision.outcome is not Outcome.BIND:
            trial.discard()
            self.pending[job.key].reason = decision.message
            return _NO_FIT
        products = {r.pod.uid: self._product(r.node) for r in decision.placed}
        demand = gang_demand(job.members, products)
        # The GPU model is known once placed: per-model maxes are checked on what was placed.
        admission = check_admission(
            self.policy, self.ledger, job.tenant, demand, job.priority,
            self.capacity, self._in_use_now,
        )  # fmt: skip
        if not admission.admitted:
            trial.discard()
            self.pending[job.key].reason = admission.reason
            return _QUOTA
        end = now + job.runtime
        expected = job.expected
        ends_at = None if expected is None else now + expected
        starting = [Running(r.node, vector(r.pod.requests), ends_at) for r in decision.placed]
        if planner is not None:
            mine = (-job.priority, self._blocked_since.get(job.key, _NEVER), job.key)
            late = [
                r
                for r in planner.conflicts(starting)
                if r.key != job.key and self._ahead(r.key, now) < mine
            ]
            if late:
                trial.discard()
                first = late[0]
                self.pending[job.key].reason = (
                    f"fits now but would delay reserved gang {first.key} "
                    f"(planned start t={first.start:g}s)"
                )
                return _DELAYS
        trial.commit()
        if planner is not None:
            planner.start(starting)
        self.ledger.add(self.policy, job.tenant, demand, now)
        self._in_use_now = add(self._in_use_now, demand)
        self._running_pods_now = None
        del self.pending[job.key]
        self._blocked_since.pop(job.key, None)
        self.running[job.key] = (job, ends_at if ends_at is not None else float("inf"), demand)
        self.events.depart(end, job)
        self.log.started(job, now, demand)
        return _STARTED

    def _depart(self, job: BatchJob, now: float) -> None:
        _, _, demand = self.running.pop(job.key)
        for pod in job.members:
            self.snapshot.forget(pod)
        self.ledger.remove(self.policy, job.tenant, demand, now)
        self._in_use_now = subtract(self._in_use_now, demand)
        self._running_pods_now = None
        self.log.ended(job, now, demand)

    def _gets_reservation(self, job: BatchJob, reserved: int, now: float) -> bool:
        if reserved < self.policy.reservations:
            return True
        return now - job.arrival >= self.policy.starvation_s

    def _demand(self, job: BatchJob, protected: bool) -> GangDemand:
        nodes = self._eligible.get(job.key)
        if nodes is None:
            sample = job.members[0]
            nodes = tuple(i.name for i in eligible_nodes(self.runner, sample, self.snapshot))
            self._eligible[job.key] = nodes
        members = tuple(vector(p.requests) for p in job.members)
        return GangDemand(job.key, members, nodes, job.expected, protected)

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


def _shape(job: BatchJob) -> tuple[object, ...]:
    """Gangs alike in what they ask and where they may go: one that failed in this pass means
    the others fail too (the pass only ever takes capacity)."""
    first = job.members[0]
    return (
        tuple(
            sorted(
                (p.requests.names(), tuple(p.requests.get(n) for n in p.requests.names()))
                for p in job.members
            )
        ),
        tuple(sorted(first.node_selector.items())),
        first.node_affinity,
        tuple(first.tolerations),
        tuple(sorted(first.annotations.items())),
    )
