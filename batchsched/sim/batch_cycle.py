"""The batch simulator's side of the workload cycle: the handle for one gang being tried.

Its quota before placement was checked by the pass already (`BatchSimulator._admits`), so
`refuses` says yes; once placed, the per-model quota and the backfill check (would starting
now delay a reservation ahead of it in line?) are the simulator's own, passed in as functions.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from batchsched.backfill import Reservation as BackfillReservation
from batchsched.backfill import Running, vector
from batchsched.cycle.policies import Placed
from batchsched.framework.runner import ProfileRunner
from batchsched.gang.core import Reservation
from batchsched.model.pod import PodView
from batchsched.snapshot import Snapshot


class BatchHandle:
    def __init__(
        self,
        snapshot: Snapshot,
        runner: ProfileRunner,
        ends_at: float | None,
        refuses_placed: Callable[[Placed], str],
        delayed: Callable[[list[Running]], BackfillReservation | None] | None,
    ) -> None:
        self._snapshot = snapshot
        self._runner = runner
        self._ends_at = ends_at
        self._refuses_placed = refuses_placed
        self._delayed = delayed  # the first reservation ahead in line a start would delay

    @property
    def snapshot(self) -> Snapshot:
        return self._snapshot

    @property
    def admission(self) -> BatchHandle:
        return self

    @property
    def holds(self) -> BatchHandle | None:
        return self if self._delayed is not None else None

    def runner_for(self, pod: PodView) -> ProfileRunner:
        return self._runner

    def waiting(self) -> Mapping[str, Sequence[Reservation]]:
        return {}

    # Admission

    def refuses(self, pods: Sequence[PodView]) -> str:
        return ""

    def refuses_placed(self, placed: Placed) -> str:
        return self._refuses_placed(placed)

    # Holds

    def starting(self, placed: Placed) -> list[Running]:
        return [Running(node, vector(pod.requests), self._ends_at) for pod, node in placed]

    def held_back(self, key: str, priority: int, starting: Sequence[Running]) -> str:
        assert self._delayed is not None
        found = self._delayed(list(starting))
        if found is None:
            return ""
        return (
            f"fits now but would delay reserved gang {found.key} (planned start t={found.start:g}s)"
        )
