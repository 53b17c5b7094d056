"""What a workload cycle decides: values the drivers act on, nothing done yet.

- `Bind`: these placements stand; bind them (a gang: with its reserved members).
- `Wait`: a gang's members that exist fit and are reserved; they wait at Permit for the rest.
- `Reject`: nothing of the workload is placed; `why` says which kind of "no" it is, so the
  driver knows whether preemption may help and what to count.
- `Preempt`: PostFilter's answer after an `unschedulable` Reject: victims to evict, or why not.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum

from batchsched.backfill import Running
from batchsched.framework.runner import ScheduleResult
from batchsched.gang.core import Reservation
from batchsched.model.pod import PodView
from batchsched.preemption.model import BudgetExcess, DisruptionBudget, PreemptionPlan


class Why(Enum):
    UNSCHEDULABLE = "unschedulable"  # does not fit: PostFilter (preemption) may help
    UNRESOLVABLE = "unresolvable"  # does not fit, and no eviction could change that
    INCOMPLETE = "incomplete"  # a gang short of members does not fit: no preemption until
    # they all exist (it would evict for members that may never come)
    ERROR = "error"  # a plugin failed: retried with backoff
    QUOTA = "quota"  # its tenant's quota refuses it before placement
    QUOTA_PLACED = "quota-placed"  # it fits, but its quota refuses the nodes it would get
    BACKFILL = "backfill"  # it fits, but starting now would delay a backfill reservation
    NO_GROUP = "no-group"  # a gang member whose PodGroup is missing or invalid


@dataclass(frozen=True, slots=True)
class Bind:
    placed: tuple[Reservation, ...]  # new this cycle
    results: Mapping[str, ScheduleResult]  # by pod uid: each one's cycle state, for binding
    unplaced: tuple[PodView, ...] = ()  # a gang's elastic surplus without room: tried later
    released: tuple[str, ...] = ()  # other gangs whose waiting reservations gave way
    starts: tuple[Running, ...] = ()  # what starts now and when it should end (backfill)


@dataclass(frozen=True, slots=True)
class Wait:
    placed: tuple[Reservation, ...]
    results: Mapping[str, ScheduleResult]
    message: str


@dataclass(frozen=True, slots=True)
class Reject:
    why: Why
    message: str
    results: Mapping[str, ScheduleResult] = field(default_factory=dict)


Decision = Bind | Wait | Reject


@dataclass(frozen=True, slots=True)
class Preempt:
    """PostFilter's answer for a workload that does not fit (decided on the snapshot by
    runtime/preempting.py `Preempting.decide`, carried out by `Preempting.act`): a plan to
    start, a plan some PodDisruptionBudget does not allow (`exceeded`: nothing is evicted),
    or only a note for the user ("" when no pod could be a victim)."""

    note: str = ""
    plan: PreemptionPlan | None = None
    budgets: tuple[DisruptionBudget, ...] = ()
    exceeded: tuple[BudgetExcess, ...] = ()
    attempted: bool = False  # the planner ran
    replaces: bool = False  # the workload's last plan ended, every victim gone: drop it
