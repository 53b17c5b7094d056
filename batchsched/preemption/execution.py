"""Carrying out a preemption plan, as pure state: which victim to evict next, what each answer
of the Eviction API means, when to try again, and how long a preemptor waits after a refusal.
The runtime (runtime/preempting.py) does the I/O: it asks `next_victim`, evicts, and reports
each answer back.

The rules:
- A plan is started only if every eviction in it can succeed by the budgets' status:
  `budgets_exceeded` (preemption/model.py) is empty. Otherwise nothing is evicted and the
  preemptor waits (`Refusals`).
- Victims a PodDisruptionBudget covers are evicted first, one at a time: a refusal (429, a
  race with another disruption) then comes before anything else of the plan was evicted.
- Until its first eviction is accepted, a plan may be abandoned (its preemptor was placed
  elsewhere, deleted, or gave up): nothing more is evicted. A refusal of that first eviction
  ends the plan the same way.
- Once an eviction was accepted, every victim goes, whatever happens to the preemptor: a
  victim gang left half alive holds its capacity for work that can no longer run. A failed
  or refused eviction is tried again after a backoff (EVICTION_RETRY_S doubling up to
  EVICTION_RETRY_MAX_S), until the victim goes or `give_up_at`.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Final

from batchsched.model.pod import PodView
from batchsched.preemption.model import DisruptionBudget

__all__ = [
    "EVICTION_RETRY_MAX_S",
    "EVICTION_RETRY_S",
    "REFUSAL_BACKOFF_MAX_S",
    "REFUSAL_BACKOFF_S",
    "Answer",
    "Execution",
    "Refusal",
    "Refusals",
    "backoff_s",
    "eviction_order",
]

EVICTION_RETRY_S: Final = 1.0
EVICTION_RETRY_MAX_S: Final = 30.0
REFUSAL_BACKOFF_S: Final = 5.0
REFUSAL_BACKOFF_MAX_S: Final = 160.0


def backoff_s(attempts: int, first: float, cap: float) -> float:
    """Purely computational: `first` doubled per attempt after the first, at most `cap`."""
    return min(cap, first * 2.0 ** max(0, attempts - 1))


def eviction_order(
    victims: Sequence[PodView],
    budgets: Sequence[DisruptionBudget],
    nominated: Collection[str] = (),
) -> tuple[PodView, ...]:
    """Purely computational: victims a budget covers first (a refusal then ends the plan
    before anything was evicted), then those on the `nominated` nodes (the preemptors wait
    for those only: the rest of a victim gang elsewhere goes after), otherwise as planned."""

    def rank(victim: PodView) -> tuple[bool, bool]:
        return not any(b.covers(victim) for b in budgets), victim.node_name not in nominated

    return tuple(sorted(victims, key=rank))


class Answer(Enum):
    ACCEPTED = "accepted"  # evicted: the pod terminates
    GONE = "gone"  # deleted already (or a successor took its name): nothing to evict
    REFUSED = "refused"  # 429: a PodDisruptionBudget
    FAILED = "failed"  # anything else: worth another try


@dataclass(eq=False)
class Execution:
    """One plan's evictions."""

    victims: tuple[PodView, ...]  # in eviction order
    give_up_at: float  # a started plan stops retrying a victim after this
    evicted: set[str] = field(default_factory=set)  # uids accepted by the Eviction API
    gone: set[str] = field(default_factory=set)  # uids that went without our eviction
    given_up: set[str] = field(default_factory=set)
    attempts: dict[str, int] = field(default_factory=dict)  # failed tries, by uid
    not_before: dict[str, float] = field(default_factory=dict)  # retry time, by uid
    abandoned: bool = False  # nobody waits for it any more
    ended: bool = False  # refused before it started: evicts nothing more

    @property
    def started(self) -> bool:
        """An eviction was accepted: from now on every victim goes."""
        return bool(self.evicted)

    @property
    def finished(self) -> bool:
        """Nothing more to evict, now or later."""
        if self.ended or (self.abandoned and not self.started):
            return True
        return not self.pending()

    def pending(self) -> list[PodView]:
        done = self.evicted | self.gone | self.given_up
        return [v for v in self.victims if v.uid not in done]

    def next_victim(self, now: float) -> PodView | None:
        """The victim to evict now, None when none is due. Before the plan started, strictly
        in order: a victim waiting for its retry holds the others back."""
        if self.finished:
            return None
        for victim in self.pending():
            if self.not_before.get(victim.uid, now) <= now:
                return victim
            if not self.started:
                return None
        return None

    def next_retry(self) -> float | None:
        """When a victim waiting for a retry is due, None when none waits."""
        if self.finished:
            return None
        waiting = [self.not_before[v.uid] for v in self.pending() if v.uid in self.not_before]
        return min(waiting, default=None)

    def answered(self, victim: PodView, answer: Answer, now: float) -> float | None:
        """Record the Eviction API's answer. Returns the seconds until the victim is tried
        again, or None when it is not (accepted, given up, or the plan ended)."""
        uid = victim.uid
        if answer in (Answer.ACCEPTED, Answer.GONE):
            (self.evicted if answer is Answer.ACCEPTED else self.gone).add(uid)
            self.not_before.pop(uid, None)
            return None
        if answer is Answer.REFUSED and not self.started:
            self.ended = True  # nothing was evicted: the plan ends here, whole
            return None
        attempts = self.attempts[uid] = self.attempts.get(uid, 0) + 1
        wait = backoff_s(attempts, EVICTION_RETRY_S, EVICTION_RETRY_MAX_S)
        if self.started and now + wait > self.give_up_at:
            self.given_up.add(uid)
            return None
        self.not_before[uid] = now + wait
        return wait

    def went(self, uids: Iterable[str]) -> None:
        """These victims are gone (their pods were deleted): nothing to evict for them."""
        self.gone.update(uid for uid in uids if uid not in self.evicted)

    def abandon(self) -> None:
        """Nobody waits for the plan any more: a plan not yet started evicts nothing more."""
        self.abandoned = True


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a preemptor may not plan again before `until`."""

    reason: str
    until: float
    wait_s: float
    uids: tuple[str, ...]  # its pods, to try them again when the backoff ends


class Refusals:
    """Per preemptor (gang key or pod key): the last refusal and how many came in a row, so
    that a plan the budgets refuse is not planned and refused again in a tight loop."""

    def __init__(self) -> None:
        self._last: dict[str, Refusal] = {}
        self._count: dict[str, int] = {}
        self._due: set[str] = set()  # backoff running, preemptor not tried again yet

    def refuse(self, key: str, reason: str, now: float, uids: Iterable[str]) -> Refusal:
        count = self._count[key] = self._count.get(key, 0) + 1
        wait = backoff_s(count, REFUSAL_BACKOFF_S, REFUSAL_BACKOFF_MAX_S)
        refusal = Refusal(reason, now + wait, wait, tuple(uids))
        self._last[key] = refusal
        self._due.add(key)
        return refusal

    def waiting(self, key: str, now: float) -> Refusal | None:
        """The refusal `key` still waits out, if any."""
        refusal = self._last.get(key)
        return refusal if refusal is not None and now < refusal.until else None

    def ended(self, now: float) -> list[Refusal]:
        """Refusals whose backoff ended since the last call: their preemptors may try again."""
        done = [k for k in self._due if self._last[k].until <= now]
        self._due.difference_update(done)
        return [self._last[k] for k in sorted(done)]

    def forget(self, key: str) -> None:
        """The preemptor was placed, started a plan, or is gone: its count starts over."""
        self._last.pop(key, None)
        self._count.pop(key, None)
        self._due.discard(key)

    def forget_pod(self, uid: str) -> None:
        for key in [k for k, r in self._last.items() if uid in r.uids]:
            self.forget(key)

    def __len__(self) -> int:
        return len(self._last)
