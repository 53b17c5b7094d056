"""Which NVLink island each allocated claim's GPUs sit in, and whether one was free.

`ClaimWatch` follows every ResourceClaim of the cluster from one watch and feeds each event,
in the API server's order, to a `ClaimLedger`: the devices every claim holds at each moment.
When a claim of the bench's namespace is first seen allocated, the ledger records its
devices and, from the claims holding devices on that node just before that write, how many
GPUs of each island of the node were free (`Placement`). One watch over all claims sees the
writes in resourceVersion order, so "just before" is the API's state when the allocation was
written, not a sample.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final

from kubernetes_asyncio.client import ApiClient

from batchsched.bench.dra_e2e_objects import RESOURCE_PATH, claim_devices
from batchsched.bench.e2e_watch import ResumedWatch
from batchsched.dra.nvidia import DRIVER

CLAIMS_PATH: Final = f"{RESOURCE_PATH}/resourceclaims"


@dataclass(frozen=True, slots=True)
class Placement:
    """One claim of the bench, as first allocated; `at` is the watch's perf_counter time."""

    claim: str  # namespace/name
    node: str
    devices: tuple[str, ...]
    free_by_island: tuple[int, ...]  # free GPUs of each island of the node, before the write
    at: float
    # Another node with an island free enough before the write ("" if none), the one whose
    # devices came free longest ago, and when its last device came free (None: no claim
    # there had been freed yet).
    free_elsewhere: str = ""
    freed_elsewhere_at: float | None = None

    @property
    def size(self) -> int:
        return len(self.devices)

    def one_island(self, islands: Sequence[frozenset[str]]) -> bool:
        return any(set(self.devices) <= island for island in islands)

    @property
    def island_free(self) -> bool:
        """An island of the node had as many free GPUs as the claim asked for."""
        return any(free >= self.size for free in self.free_by_island)

    @property
    def island_free_anywhere(self) -> bool:
        """Some node had an island with as many free GPUs as the claim asked for."""
        return self.island_free or bool(self.free_elsewhere)


@dataclass
class ClaimLedger:
    """Purely computational: the claims' watch history replayed."""

    islands: Sequence[frozenset[str]]  # device names of each NVLink island of a node
    nodes: Sequence[str]  # every node of the cluster, each with those islands
    namespace: str  # the bench's claims; the others only hold devices
    held: dict[str, tuple[str, frozenset[str]]] = field(default_factory=dict)  # uid -> node, devs
    freed_at: dict[str, float] = field(default_factory=dict)  # node -> its last release
    keys: dict[str, str] = field(default_factory=dict)  # uid -> namespace/name of held claims
    placements: list[Placement] = field(default_factory=list)
    # A device found in two allocated claims at once: "node/device: claim, claim".
    double_allocations: list[str] = field(default_factory=list)

    def see(self, kind: str, claim: Mapping[str, Any], at: float) -> None:
        meta = claim.get("metadata") or {}
        uid = str(meta.get("uid", ""))
        found = [] if kind == "DELETED" else claim_devices(claim)
        if not found:
            if uid in self.held:
                self.freed_at[self.held.pop(uid)[0]] = at
            return
        node = found[0][0]  # the driver's pool is named after its node
        devices = frozenset(d for _, d in found)
        if uid in self.held:
            return  # an allocation never changes while it exists (reservedFor may)
        key = f"{meta.get('namespace')}/{meta.get('name')}"
        taken = self._taken(node, uid)
        for device in sorted(devices & taken):
            holders = sorted(
                self.keys[o] for o, (n, d) in self.held.items() if n == node and device in d
            )
            self.double_allocations.append(f"{node}/{device}: {', '.join([*holders, key])}")
        if meta.get("namespace") == self.namespace:
            free = tuple(len(island - taken) for island in self.islands)
            other = self._free_elsewhere(node, uid, len(devices))
            placed = Placement(key, node, tuple(sorted(devices)), free, at, other)
            self.placements.append(placed)
            if other:
                self.placements[-1] = replace(placed, freed_elsewhere_at=self.freed_at.get(other))
        self.held[uid] = (node, devices)
        self.keys[uid] = key

    def _free_elsewhere(self, node: str, uid: str, size: int) -> str:
        """Another node with an island of `size` free GPUs, free for the longest."""
        found = [
            n
            for n in self.nodes
            if n != node
            and max(len(island - self._taken(n, uid)) for island in self.islands) >= size
        ]
        return min(found, key=lambda n: self.freed_at.get(n, float("-inf")), default="")

    def _taken(self, node: str, uid: str) -> frozenset[str]:
        return frozenset().union(
            *(devices for other, (n, devices) in self.held.items() if n == node and other != uid)
        )


def driver_results_only(claim: Mapping[str, Any]) -> bool:
    """Every allocated device is the GPU driver's (the bench's cluster has no other)."""
    allocation = (claim.get("status") or {}).get("allocation") or {}
    results = (allocation.get("devices") or {}).get("results") or []
    return all(r.get("driver") == DRIVER for r in results)


class ClaimWatch(ResumedWatch):
    """Every ResourceClaim of the cluster, fed to `ledger` in the API server's order."""

    def __init__(self, api: ApiClient, ledger: ClaimLedger) -> None:
        super().__init__(api, CLAIMS_PATH)
        self.ledger = ledger
        self.foreign_devices = 0  # allocations naming another driver: not judged

    def _listed(self, listing: Mapping[str, object]) -> None:
        now = time.perf_counter()
        for item in _items(listing.get("items")):
            self._see("ADDED", item, now)

    def _seen(self, kind: str, obj: Mapping[str, object]) -> None:
        self._see(kind, obj, time.perf_counter())

    def _see(self, kind: str, claim: Mapping[str, Any], at: float) -> None:
        if not driver_results_only(claim):
            self.foreign_devices += 1
            return
        self.ledger.see(kind, claim, at)


def _items(items: object) -> Iterable[Mapping[str, Any]]:
    return [i for i in items if isinstance(i, Mapping)] if isinstance(items, list) else []
