"""GpuTopology's prices for the places left on scarce nodes (gpu/scarcity.py), kept current.

`Scarcity` knows which pod shapes only a few kinds of node could host (from the arriving mix
and the cluster's supply), counts the places each such group still has in the snapshot and
the cluster's idle GPUs, and prices a place by the demand still to come. It follows the
snapshot's change log, so a cycle costs the nodes changed since the last one; it recounts
every node only when the snapshot, its GPU nodes or the supply changed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from batchsched.node_info import NodeInfo
from batchsched.snapshot import Snapshot
from gpu.scarcity import ScarceGroup, ScarcePrices, mean_gpu_request, places, scarce_groups
from gpu.workload import PodShape
from gpu.workload_estimate import Host, WorkloadEstimate

__all__ = ["Scarcity"]

NO_PRICES: Final = ScarcePrices((), ())
PRICE_STEPS: Final = 16  # a price moves by a 16th of a pod's GPUs (each move re-scores nodes)


class Scarcity:
    """Per scarce group, the places left and their price; `update` says when prices moved."""

    __slots__ = (
        "_at",
        "_grouped_at",
        "_groups",
        "_hosts_of",
        "_mark",
        "_mean",
        "_nodes",
        "_priced_at",
        "_supply",
        "idle",
        "max_host_share",
        "places",
        "prices",
        "whole_nodes",
    )

    def __init__(self, max_host_share: float, whole_nodes: bool = False) -> None:
        self.max_host_share = max_host_share
        self.whole_nodes = whole_nodes
        self._supply: Mapping[Host, int] = {}
        self._groups: tuple[ScarceGroup, ...] = ()
        self._hosts_of: dict[PodShape, frozenset[Host] | None] = {}  # scarce_groups' memo
        self._grouped_at = -1  # the estimate's refreshes when the groups were made
        self.prices = NO_PRICES
        # (snapshot id, gpu_hosts_version, node count) the per-node counts were taken at
        self._at: tuple[int, int, int] = (-1, -1, -1)
        self._mark = 0
        # GPU node name -> (idle milli-GPU, places per group)
        self._nodes: dict[str, tuple[int, tuple[int, ...]]] = {}
        self.idle = 0  # the cluster's idle milli-GPU
        self.places: tuple[int, ...] = ()  # per group
        self._priced_at: tuple[int, tuple[int, ...]] = (-1, ())
        self._mean: tuple[int, float] = (-1, 0.0)  # (estimate refreshes, mean milli-GPU per pod)

    def update(
        self, snapshot: Snapshot, supply: Mapping[Host, int], estimate: WorkloadEstimate
    ) -> bool:
        """Bring the counts up to the snapshot, and the groups and prices up to the estimate
        (re-read each time it refreshed); True when the prices changed."""
        if not supply:  # no GPU nodes: nothing to price (and nothing to count)
            self._supply, self._groups = supply, ()
            return self._set(NO_PRICES)
        if supply is not self._supply:
            self._supply, self._hosts_of, self._grouped_at = supply, {}, -1
            self._at = (-1, -1, -1)
        if estimate.refreshes != self._grouped_at:
            self._grouped_at = estimate.refreshes
            groups = scarce_groups(
                estimate.mix(), supply, self.max_host_share, self._hosts_of, self.whole_nodes
            )
            if [g.envelope for g in groups] != [g.envelope for g in self._groups]:
                self._at = (-1, -1, -1)  # recount every node for the new groups
            self._groups = groups
        if not self._groups:
            return self._set(NO_PRICES)
        self._count(snapshot)
        key = (estimate.refreshes, self.places)
        if key == self._priced_at:
            return False
        self._priced_at = key
        mean = self._mean_request(estimate)
        to_come = self.idle / mean if mean > 0 else 0.0
        counted = estimate.counted()
        prices = [
            ScarcePrices.price(group, counted, to_come, left, PRICE_STEPS)
            for group, left in zip(self._groups, self.places, strict=True)
        ]
        return self._set(ScarcePrices(self._groups, prices))

    def _mean_request(self, estimate: WorkloadEstimate) -> float:
        """The arriving mix's mean milli-GPU per pod, as of the estimate's last refresh."""
        if self._mean[0] != estimate.refreshes:
            self._mean = (estimate.refreshes, mean_gpu_request(estimate.mix()))
        return self._mean[1]

    def _set(self, prices: ScarcePrices) -> bool:
        if prices.priced == self.prices.priced:
            return False
        self.prices = prices
        return True

    def _count(self, snapshot: Snapshot) -> None:
        at = (id(snapshot), snapshot.gpu_hosts_version, len(snapshot.nodes))
        changed = snapshot.changed_since(self._mark) if at == self._at else None
        self._mark = snapshot.change_mark()
        if changed is None:
            self._at = at
            self._nodes = {}
            self.idle = 0
            self.places = (0,) * len(self._groups)
            changed = snapshot.nodes
        for info in changed:
            self._note(info)

    def _note(self, info: NodeInfo) -> None:
        ledger = info.gpu
        old = self._nodes.pop(info.name, None)
        totals = list(self.places)
        if old is not None:
            self.idle -= old[0]
            for i, n in enumerate(old[1]):
                totals[i] -= n
        if ledger is not None:
            free, whole = ledger.free, ledger.whole_free
            cpu_left = info.alloc_milli_cpu - info.req_milli_cpu
            memory_left = info.alloc_memory - info.req_memory
            counts = tuple(
                0
                if g.envelope.gpu_count > whole  # the usual answer, without a look at each GPU
                else places(g.envelope, ledger.model, cpu_left, memory_left, free)
                for g in self._groups
            )
            idle = ledger.free_total
            self._nodes[info.name] = (idle, counts)
            self.idle += idle
            for i, n in enumerate(counts):
                totals[i] += n
        self.places = tuple(totals)
