"""One node's GPU accounting: free milli-GPU per GPU and which GPUs each pod holds.

The snapshot owns one ledger per GPU node and changes it only through its undo-logged
methods. The aggregates (`whole_free`, `max_free`, `free_total`) are kept up to date on every
change so that Filter compares integers and never walks the GPUs.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypeAlias

from gpu.placement import GpuChoice, best_gpu_set
from gpu.requests import GpuRequest
from gpu.topology import MILLI_PER_GPU, NodeTopology

__all__ = ["GpuLedger", "Grants"]

# (GPU index, milli-GPU) per GPU a pod holds: ((3, 1000), (4, 1000)) or ((2, 460),).
Grants: TypeAlias = tuple[tuple[int, int], ...]


class GpuLedger:
    __slots__ = (
        "_best_sets",
        "allocated_milli",
        "capacity",
        "capacity_milli",
        "free",
        "free_total",
        "grants",
        "max_free",
        "model",
        "topology",
        "whole_free",
    )

    def __init__(self, topology: NodeTopology) -> None:
        self.topology = topology
        self.model = topology.model
        # An unhealthy GPU offers nothing; pods the API already runs there drive it negative.
        self.capacity = tuple(MILLI_PER_GPU if g.healthy else 0 for g in topology.gpus)
        self.capacity_milli = sum(self.capacity)
        self.free = list(self.capacity)
        self.grants: dict[str, Grants] = {}
        self.whole_free = 0
        self.max_free = 0
        self.free_total = 0
        self.allocated_milli = 0  # what pods hold, overcommitted GPUs included
        self._best_sets: dict[int, GpuChoice | None] = {}
        self._refresh()

    def best_set(self, count: int) -> GpuChoice | None:
        """`best_gpu_set` for the current state, remembered until the ledger changes."""
        sets = self._best_sets
        if count in sets:
            return sets[count]
        found = sets[count] = best_gpu_set(self.topology, self.free, count)
        return found

    def sorted_free(self) -> tuple[int, ...]:
        """Free milli per GPU, largest first, negatives as 0: the node's GPU state up to a
        renaming of GPUs, which is all the fragmentation measure looks at."""
        return tuple(sorted((f if f > 0 else 0 for f in self.free), reverse=True))

    def fits(self, grants: Grants) -> bool:
        """Every GPU named is healthy and has room for what it is asked to give."""
        need: dict[int, int] = {}
        for index, milli in grants:
            if not 0 <= index < len(self.free) or milli <= 0:
                return False
            need[index] = need.get(index, 0) + milli
        return all(self.free[i] >= m for i, m in need.items())

    def take(self, uid: str, grants: Grants, overcommit: bool = False) -> None:
        """Hand `grants` to pod `uid`. Without `overcommit` they must fit (a bug otherwise);
        with it (pods the API already bound) they are recorded as they are."""
        if uid in self.grants:
            raise ValueError(f"pod {uid} already holds GPUs {self.grants[uid]}")
        if not overcommit and not self.fits(grants):
            raise ValueError(f"GPUs {grants} do not fit the free milli-GPU {self.free}")
        for index, milli in grants:
            if not 0 <= index < len(self.free):
                raise ValueError(f"no GPU {index} on a node with {len(self.free)} GPUs")
            self.free[index] -= milli
        self.grants[uid] = grants
        self._refresh()

    def release(self, uid: str) -> Grants:
        """Give back what `uid` holds; () when it holds nothing."""
        grants = self.grants.pop(uid, ())
        for index, milli in grants:
            self.free[index] += milli
        if grants:
            self._refresh()
        return grants

    def default_grants(self, request: GpuRequest) -> Grants:
        """A deterministic assignment for a pod with no known one: the lowest-index GPUs with
        room, then (for pods the API bound past our accounting) the GPUs with the most free."""
        if request.count:
            whole = [i for i, f in enumerate(self.free) if f >= MILLI_PER_GPU]
            chosen = whole[: request.count]
            if len(chosen) < request.count:
                rest = _most_free_first(self.free, exclude=chosen)
                chosen += rest[: request.count - len(chosen)]
            return tuple((i, MILLI_PER_GPU) for i in sorted(chosen))
        if request.milli:
            for i, f in enumerate(self.free):
                if f >= request.milli:
                    return ((i, request.milli),)
            fallback = _most_free_first(self.free, exclude=())
            return ((fallback[0], request.milli),) if fallback else ()
        return ()

    def _refresh(self) -> None:
        whole = total = 0
        top = -MILLI_PER_GPU
        for f in self.free:
            if f >= MILLI_PER_GPU:
                whole += 1
            if f > 0:
                total += f
            if f > top:
                top = f
        self.whole_free = whole
        self.max_free = top if self.free else 0
        self.free_total = total
        self.allocated_milli = self.capacity_milli - sum(self.free)
        self._best_sets.clear()


def _most_free_first(free: list[int], exclude: Iterable[int]) -> list[int]:
    skip = set(exclude)
    return sorted((i for i in range(len(free)) if i not in skip), key=lambda i: (-free[i], i))
