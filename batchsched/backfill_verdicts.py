"""Which nodes a pod must not start on now, so that the reservations ahead of it in line
still start when promised (batchsched/backfill.py). Purely computational."""

from __future__ import annotations

from batchsched.backfill import Planner, Running, Vector


class NodeVerdicts:
    """For one pod: which nodes it must not start on now, because a reservation ahead of it
    in line would no longer fit there (the BackfillReservations plugin asks, per node)."""

    def __init__(
        self, planner: Planner, keys: frozenset[str], requests: Vector, ends_at: float | None
    ) -> None:
        self._planner = planner
        self._keys = keys
        self._nodes = planner.nodes_of(keys)
        self._requests = requests
        self._ends_at = ends_at
        self._seen: dict[str, str] = {}

    def refuses(self, node: str) -> str:
        """The reserved gang this pod would delay on `node`, or ""."""
        if node not in self._nodes:
            return ""
        found = self._seen.get(node)
        if found is None:
            pod = Running(node, self._requests, self._ends_at)
            found = self._seen[node] = self._planner.delays(pod, self._keys)
        return found
