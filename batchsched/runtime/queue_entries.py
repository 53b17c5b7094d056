"""The entries of the scheduling queue (runtime/queue.py), and what counts as a spec change.

Purely computational: an active heap entry (`Ranked`), a backoff or pool entry (`Timed`),
a pod in flight (`Flight`) and one back from flight (`Landed`); `spec_changed` tells an
update that may change where a pod fits from a status-only one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Final

from batchsched.expected_runtime import ESTIMATED_START_ANNOTATION
from batchsched.framework.interfaces import KeyedQueueSort, OrderKey, QueuedPod
from batchsched.model.pod import PodView

Less = Callable[[QueuedPod, QueuedPod], bool]
OrderKeyOf = Callable[[QueuedPod], OrderKey]

# Everything but the pod's status can make a difference to where it fits.
_STATUS_FIELDS: Final = frozenset({"phase", "start_time"})
_SPEC_FIELDS: Final = tuple(
    f.name for f in dataclasses.fields(PodView) if f.name not in _STATUS_FIELDS
)


# Annotations the scheduler writes itself: a change in them alone changes nothing it decides.
OWN_ANNOTATIONS: Final = frozenset({ESTIMATED_START_ANNOTATION})


def spec_changed(old: PodView, new: PodView) -> bool:
    """True when `new` differs from `old` in anything but status (phase) and the scheduler's
    own annotations."""
    for name in _SPEC_FIELDS:
        before, after = getattr(old, name), getattr(new, name)
        if name == "annotations":
            before = {k: v for k, v in before.items() if k not in OWN_ANNOTATIONS}
            after = {k: v for k, v in after.items() if k not in OWN_ANNOTATIONS}
        if before != after:
            return True
    return False


class Ranked:
    """An active heap entry: QueueSort order first, insertion order on ties.

    With a keyed QueueSort (`order_key`) the order is the key's, computed once here; else
    every comparison asks `less` both ways."""

    __slots__ = ("key", "less", "qp", "seq")

    def __init__(
        self, qp: QueuedPod, seq: int, less: Less, order_key: OrderKeyOf | None = None
    ) -> None:
        self.qp = qp
        self.seq = seq
        self.less = less
        self.key = (order_key(qp), seq) if order_key is not None else None

    def __lt__(self, other: Ranked) -> bool:
        if self.key is not None and other.key is not None:
            return self.key < other.key
        if self.less(self.qp, other.qp):
            return True
        if self.less(other.qp, self.qp):
            return False
        return self.seq < other.seq


def order_key_of(less: Less) -> OrderKeyOf | None:
    """The key of the QueueSort plugin whose `less` this is, when it has one."""
    owner = getattr(less, "__self__", None)
    return owner.order_key if isinstance(owner, KeyedQueueSort) else None


@dataclasses.dataclass(frozen=True, slots=True, eq=False)
class Timed:
    """A backoff entry (`at` = when backoff ends) or a pool entry (`at` = when it was parked)."""

    qp: QueuedPod
    at: float
    early: bool = False  # backing off after "no node fits", not an error: may leave early
    # Parked for a wait of its own (`SchedulingQueue.park`): no cluster event moves it.
    gated: bool = False


@dataclasses.dataclass(slots=True)
class Flight:
    pod: PodView  # the version being scheduled
    updated: PodView | None = None  # the newest version seen while in flight
    changed: bool = False  # its spec differs from `pod`: the cycle's failure may be stale
    deleted: bool = False


@dataclasses.dataclass(frozen=True, slots=True)
class Landed:
    """A pod back from flight: the version to requeue, and whether it changed meanwhile."""

    qp: QueuedPod
    changed: bool
