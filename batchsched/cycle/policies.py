"""The cycle's handle and the policies it asks, each a narrow interface.

The live runtime implements them over watch-fed state (runtime/backfill_waits.py,
batchsched/tenants.py); a driver without tenant queues or backfill passes None. Every method
is a question: none of them writes anything, posts anything or waits.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from batchsched.backfill import Running
from batchsched.framework.lone_batches import LoneBatches
from batchsched.framework.runner import ProfileRunner
from batchsched.gang.core import Reservation
from batchsched.model.pod import PodView
from batchsched.snapshot import Snapshot

Placed = Sequence[tuple[PodView, str]]


class Admission(Protocol):
    """Quota admission: "" when the pods (one gang, or one pod) may start, else why not."""

    def refuses(self, pods: Sequence[PodView]) -> str: ...

    def refuses_placed(self, placed: Placed) -> str:
        """The same once the nodes are known (per-GPU-model maxes on a mixed cluster)."""
        ...


class Holds(Protocol):
    """Backfill reservations: whether starting these placements now delays a reserved
    workload (the reason, or "")."""

    def starting(self, placed: Placed) -> list[Running]: ...

    def held_back(self, key: str, priority: int, starting: Sequence[Running]) -> str: ...


class Handle(Protocol):
    """What a cycle may read: the snapshot (which it changes only through trials and
    reservations), each pod's profile, the reservations of gangs waiting at Permit, and the
    policies in force."""

    @property
    def snapshot(self) -> Snapshot: ...

    @property
    def admission(self) -> Admission | None: ...

    @property
    def holds(self) -> Holds | None: ...

    def runner_for(self, pod: PodView) -> ProfileRunner: ...

    def waiting(self) -> Mapping[str, Sequence[Reservation]]: ...


class SnapshotHandle:
    """A handle for drivers without tenant queues, backfill or waiting gangs (the simulator):
    one runner for every pod, so its rotating start index carries from cycle to cycle."""

    admission: Admission | None = None
    holds: Holds | None = None
    lone_batches: LoneBatches | None = None  # kept lone-pod batches (the simulator's)

    def __init__(self, snapshot: Snapshot, runner: ProfileRunner) -> None:
        self._snapshot = snapshot
        self._runner = runner

    @property
    def snapshot(self) -> Snapshot:
        return self._snapshot

    def runner_for(self, pod: PodView) -> ProfileRunner:
        return self._runner

    def waiting(self) -> Mapping[str, Sequence[Reservation]]:
        return {}
