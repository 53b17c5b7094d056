"""The batch simulator's pass order and what lets it skip work inside one pass: gangs alike in
what they ask and where they may go fail alike, since a pass only ever takes capacity. Pure."""

from __future__ import annotations

from collections.abc import Container, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Final, Protocol, TypeVar

from batchsched.sim.batch_jobs import BatchJob
from queues.fairshare import gang_order, rank_key
from queues.model import Amounts, QuotaPolicy
from queues.usage import UsageLedger


class Waiting(Protocol):
    @property
    def job(self) -> BatchJob: ...

    @property
    def demand(self) -> dict[str, int]: ...


W = TypeVar("W", bound=Waiting)


class Shaped(Protocol):
    @property
    def job(self) -> BatchJob: ...

    @property
    def shape(self) -> tuple[object, ...]: ...


NEVER: Final = float("inf")


@dataclass(slots=True)
class PassMemo:
    """What one pass has learnt so far (keys of gangs that found no room or would delay a
    reservation: the gangs alike fail alike), and what it has left to visit."""

    shortest: dict[tuple[object, ...], float]  # shape -> shortest expected runtime
    starving: int  # starving gangs not visited yet
    unvisited: set[str]  # gangs holding a reservation, not visited yet
    failed: set[tuple[object, ...]] = field(default_factory=set)  # fit keys
    delayed: set[tuple[object, ...]] = field(default_factory=set)  # delay keys
    stuck: set[tuple[object, ...]] = field(default_factory=set)  # shapes that found no room
    # shape -> expected runtimes that would delay a reservation
    stuck_for: dict[tuple[object, ...], list[float | None]] = field(default_factory=dict)

    @classmethod
    def begin(cls, pending: Iterable[Shaped], starving: int, reserved: Iterable[str]) -> PassMemo:
        shortest: dict[tuple[object, ...], float] = {}
        for e in pending:
            runtime = NEVER if e.job.expected is None else e.job.expected
            shortest[e.shape] = min(shortest.get(e.shape, NEVER), runtime)
        return cls(shortest, starving, set(reserved))

    def found_no_room(self, fit_key: tuple[object, ...], shape: tuple[object, ...]) -> None:
        self.failed.add(fit_key)
        self.stuck.add(shape)

    def would_delay(
        self, delay_key: tuple[object, ...], shape: tuple[object, ...], runtime: float | None
    ) -> None:
        self.delayed.add(delay_key)
        self.stuck_for.setdefault(shape, []).append(runtime)

    def all_stuck(self) -> bool:
        """Every pending shape found no room, or would delay a reservation even with the
        shortest runtime any pending gang of that shape has (a longer one overlaps it more)."""
        for shape, low in self.shortest.items():
            if shape in self.stuck:
                continue
            runtimes = [NEVER if r is None else r for r in self.stuck_for.get(shape, [])]
            if not runtimes or min(runtimes) > low:
                return False
        return True


def shape_of(job: BatchJob) -> tuple[object, ...]:
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
        job.topology,  # one domain of a level, or anywhere: not the same places
    )


def fair_order(
    entries: Sequence[W],
    pending: Container[str],
    policy: QuotaPolicy,
    ledger: UsageLedger,
    capacity: Amounts,
    now: float,
) -> Iterator[W]:
    """The best-ranked tenant's next gang first (queues.fairshare); ranks are recomputed when
    the ledger moves, so a pass that admits gangs re-orders the rest as it goes. Gangs that
    left `pending` meanwhile are skipped."""
    by_tenant: dict[str, list[W]] = {}
    for entry in entries:
        by_tenant.setdefault(entry.job.tenant, []).append(entry)
    for queue in by_tenant.values():
        queue.sort(key=lambda e: gang_order(e.job.priority, e.job.arrival, e.job.key), reverse=True)
    ranks: dict[str, tuple[object, tuple[object, ...]]] = {}

    def rank(tenant: str) -> tuple[object, ...]:
        head = by_tenant[tenant][-1]
        stamp = (head.job.key, ledger.version)
        cached = ranks.get(tenant)
        if cached is None or cached[0] != stamp:
            key = rank_key(policy, ledger, tenant, head.demand, capacity, now)
            cached = ranks[tenant] = (stamp, (key, tenant))
        return cached[1]

    while by_tenant:
        tenant = min(by_tenant, key=rank)
        queue = by_tenant[tenant]
        entry = queue.pop()
        if not queue:
            del by_tenant[tenant]
        if entry.job.key in pending:
            yield entry
