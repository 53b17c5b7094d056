"""Where each pending gang stands in the scheduler's queue, and how that reads on its PodGroup.

Purely computational. `queue_order` lays the pending workloads out in the order the live
queue pops them (`runtime/queue.py`): one line per tenant in the profile's QueueSort order,
the tenant whose head ranks best (fair share) going next. A gang is one entry, at its best
member: when that member comes up the cycle takes the whole gang. Members enter at their
creation time, so a retry does not move a gang back in line (the live heap would, for a
moment; the reader wants the order of precedence, not the order of the next few retries).

`queue_statuses` turns the order, the gangs' last rejections and their published estimated
starts into one `QueueStatus` per gang; `differs` says whether a new status is worth a write
over the one written, ignoring moves that would rewrite every group on every start: a place
behind the first ten that moved by less than a tenth, an estimate moved by less than a minute.

Both come as steps as well (`queue_order_steps`, `queue_status_steps`): generators that pause
every `STEP_ITEMS` items, so that the leader's writer can hand the event loop back between
pieces of a pass over ten thousand gangs instead of holding it for a second
(runtime/queue_status_writer.py); `run_steps` runs them through at once.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final, TypeVar

from batchsched.framework.interfaces import OrderKey, QueuedPod
from batchsched.gang.status import NotStarted
from batchsched.model.pod import PodView
from batchsched.runtime.queue_entries import order_key_of
from queues.fairshare import RankKey

QUEUED: Final = "Queued"  # waiting its turn; nothing said against it yet
UNSCHEDULABLE: Final = "Unschedulable"  # its last cycle found no room (or quota refused)
WAITING_FOR_MEMBERS: Final = "WaitingForMembers"  # fewer members than minMember exist
EXACT_POSITIONS: Final = 10  # places up to here are written exactly
POSITION_STEP: Final = 0.1  # further back, a move by this fraction is worth a write
ESTIMATE_STEP_S: Final = 60.0
DETAIL_CHARS: Final = 300  # of the scheduler's message, kept in the one-line status
STEP_ITEMS: Final = 128  # items (pods, gangs) between two pauses of a stepped computation

Less = Callable[[QueuedPod, QueuedPod], bool]
Rank = Callable[[QueuedPod], RankKey]  # smaller goes first
T = TypeVar("T")
Steps = Generator[None, None, T]  # pauses (yields None) now and then; returns the result


def run_steps(steps: Steps[T]) -> T:
    """The result of a stepped computation, run through without pausing."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            result: T = done.value
            return result


@dataclass(frozen=True, slots=True)
class Entry:
    """One pending workload in line: a gang's key, or "pod:<ns>/<name>" for a lone pod."""

    key: str
    tenant: str
    pending: int  # members waiting


@dataclass(frozen=True, slots=True)
class QueueStatus:
    """A pending gang's place in line and why it waits. `estimated_start`: wall seconds."""

    reason: str
    position: int  # 1 = tried next, over every tenant
    total: int
    tenant: str  # "" when no quota file names tenants
    tenant_position: int
    tenant_total: int
    estimated_start: float | None = None
    detail: str = ""  # the scheduler's last message about it


def queue_order(
    pods: Iterable[QueuedPod],
    less: Less,
    gang_of: Callable[[PodView], str],
    tenant_of: Callable[[PodView], str],
    rank: Rank | None = None,
) -> list[Entry]:
    """The workloads of `pods` in the order the queue would take them, nothing binding
    meanwhile. `rank`: the tenant layer's, when tenants take turns by fair share."""
    return run_steps(queue_order_steps(pods, less, gang_of, tenant_of, rank))


def queue_order_steps(
    pods: Iterable[QueuedPod],
    less: Less,
    gang_of: Callable[[PodView], str],
    tenant_of: Callable[[PodView], str],
    rank: Rank | None = None,
) -> Steps[list[Entry]]:
    """`queue_order` in steps. Ranks are asked as each tenant's head comes up, so a pause
    between steps may see usage that changed meanwhile: the order is then the one the queue
    would take from that moment, as good as any for a status line."""
    order_key = order_key_of(less)
    best: dict[str, _Place] = {}
    count: dict[str, int] = {}
    for i, queued in enumerate(pods):
        if i % STEP_ITEMS == STEP_ITEMS - 1:
            yield
        key = gang_of(queued.pod)
        count[key] = count.get(key, 0) + 1
        place = _Place(queued, key, less, order_key(queued) if order_key is not None else None)
        held = best.get(key)
        if held is None or place < held:
            best[key] = place
    lines: dict[str, list[_Place]] = {}
    for i, place in enumerate(best.values()):
        if i % STEP_ITEMS == STEP_ITEMS - 1:
            yield
        lines.setdefault(tenant_of(place.queued.pod), []).append(place)
    for line in lines.values():
        # The head last: pop() is O(1). By key where the QueueSort has one: a tuple compare
        # in C, not a Python __lt__ per comparison (30 ms for a tenant of 2500 gangs).
        if order_key is not None:
            line.sort(key=_Place.sort_key, reverse=True)
        else:
            line.sort(reverse=True)
        yield
    ranks: dict[str, RankKey] = {}  # each tenant's head's rank, computed once per head

    def by_head(tenant: str) -> tuple[RankKey, _Place]:
        head = lines[tenant][-1]
        if rank is not None and tenant not in ranks:
            ranks[tenant] = rank(head.queued)
        return ranks.get(tenant, ()), head

    order: list[Entry] = []
    while lines:
        if len(order) % STEP_ITEMS == STEP_ITEMS - 1:
            yield
        pick = min(lines, key=by_head)
        place = lines[pick].pop()
        ranks.pop(pick, None)
        order.append(Entry(place.gang, pick, count[place.gang]))
        if not lines[pick]:
            del lines[pick]
    return order


class _Place:
    """A gang's best member, ordered as the queue orders them: by the QueueSort's key when it
    has one (computed once), else by its `less`; the same rank goes by gang key (stable)."""

    __slots__ = ("gang", "key", "less", "queued")

    def __init__(self, queued: QueuedPod, gang: str, less: Less, key: OrderKey | None) -> None:
        self.queued = queued
        self.gang = gang
        self.less = less
        self.key = key

    def sort_key(self) -> tuple[OrderKey | None, str]:
        """What `__lt__` compares, as one value, where the QueueSort has a key."""
        return self.key, self.gang

    def __lt__(self, other: _Place) -> bool:
        if self.key is not None and other.key is not None:
            if self.key != other.key:
                return self.key < other.key
        elif self.less(self.queued, other.queued):
            return True
        elif self.less(other.queued, self.queued):
            return False
        return self.gang < other.gang


def queue_statuses(
    order: Sequence[Entry],
    gangs: Callable[[str], bool],
    held: Mapping[str, NotStarted],
    estimates: Mapping[str, float],
) -> dict[str, QueueStatus]:
    """One status per entry of `order` that `gangs` says has a PodGroup to write it on.
    `held`: why each gang's last cycle did not start it; `estimates`: published starts."""
    return run_steps(queue_status_steps(order, gangs, held, estimates))


def queue_status_steps(
    order: Sequence[Entry],
    gangs: Callable[[str], bool],
    held: Mapping[str, NotStarted],
    estimates: Mapping[str, float],
) -> Steps[dict[str, QueueStatus]]:
    """`queue_statuses` in steps."""
    per_tenant: dict[str, int] = {}
    for entry in order:
        per_tenant[entry.tenant] = per_tenant.get(entry.tenant, 0) + 1
    seen: dict[str, int] = {}
    statuses: dict[str, QueueStatus] = {}
    for position, entry in enumerate(order, start=1):
        if position % STEP_ITEMS == 0:
            yield
        seen[entry.tenant] = seen.get(entry.tenant, 0) + 1
        if not gangs(entry.key):
            continue
        why = held.get(entry.key)
        reason = QUEUED
        if why is not None:
            reason = WAITING_FOR_MEMBERS if why.short_of_members else UNSCHEDULABLE
        statuses[entry.key] = QueueStatus(
            reason=reason,
            position=position,
            total=len(order),
            tenant=entry.tenant,
            tenant_position=seen[entry.tenant],
            tenant_total=per_tenant[entry.tenant],
            estimated_start=estimates.get(entry.key),
            detail=_one_line(why.message) if why is not None else "",
        )
    return statuses


def message(status: QueueStatus, now: float) -> str:
    """ "Unschedulable: position 3 of 7 in tenant team-a, 12 ahead overall; estimated start
    14:05Z; 0/4 nodes are available: ...": the line `kubectl describe` shows."""
    if status.tenant:
        where = (
            f"position {status.tenant_position} of {status.tenant_total} in tenant "
            f"{status.tenant}, {status.position - 1} ahead overall"
        )
    else:
        where = f"position {status.position} of {status.total}"
    text = f"{status.reason}: {where}"
    if status.estimated_start is not None:
        text += f"; estimated start {_minute(status.estimated_start, now)}"
    if status.detail:
        text += f"; {status.detail}"
    return text


def differs(written: QueueStatus, new: QueueStatus) -> bool:
    """Whether `new` is worth a write over `written`: a new reason or message, a place moved
    (near the head at all, further back by a tenth), a total moved by a tenth, an estimate
    appearing, going or moving by a minute or more."""
    if (written.reason, written.detail, written.tenant) != (new.reason, new.detail, new.tenant):
        return True
    places = (
        (written.position, new.position),
        (written.tenant_position, new.tenant_position),
        (written.total, new.total),
        (written.tenant_total, new.tenant_total),
    )
    if any(_moved(before, after) for before, after in places):
        return True
    before, after = written.estimated_start, new.estimated_start
    if before is None or after is None:
        return (before is None) != (after is None)
    return abs(before - after) >= ESTIMATE_STEP_S


def _moved(before: int, after: int) -> bool:
    if before == after:
        return False
    if min(before, after) <= EXACT_POSITIONS:
        return True
    return abs(after - before) >= POSITION_STEP * before


def _minute(wall: float, now: float) -> str:
    at = datetime.fromtimestamp(round(wall / 60.0) * 60.0, UTC)
    if abs(wall - now) < 20 * 3600:
        return at.strftime("%H:%MZ")
    return at.strftime("%Y-%m-%d %H:%MZ")


def _one_line(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= DETAIL_CHARS else flat[: DETAIL_CHARS - 1] + "…"
