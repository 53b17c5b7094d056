"""Gauges the housekeeping round refreshes each second from the cache, the queue and the gang
tracker: GPUs per node (allocatable and allocated, by model) and the pending gangs with the
age of the oldest.

They are what the dashboard's GPU-allocation and fragmentation panels and the "gang pending
too long" alert read (deploy/monitoring). Every replica publishes them from its own state, so
they work with or without leader election. A round must stay cheap on a big cluster: a node
whose figures did not change is not written again, and pending gangs are found from the
tracker's members with one queue lookup per member, not by parsing every queued pod.
"""

from __future__ import annotations

from collections.abc import Callable

from batchsched.metrics import SchedulerMetrics
from batchsched.model.resources import NVIDIA_GPU
from batchsched.runtime.gangs import GangTracker
from batchsched.snapshot import Snapshot
from queues.demand import PRODUCT_LABEL

UNKNOWN_MODEL = "unknown"  # a GPU node without the GPU feature discovery product label


class CapacityGauges:
    def __init__(self, metrics: SchedulerMetrics) -> None:
        self.metrics = metrics
        self._nodes: dict[str, tuple[str, int, int]] = {}  # name -> (model, allocatable, used)

    def publish_nodes(self, snapshot: Snapshot) -> None:
        gauge = self.metrics.node_gpus
        seen: dict[str, tuple[str, int, int]] = {}
        for info in snapshot.nodes:
            allocatable = info.alloc_scalar.get(NVIDIA_GPU, 0)
            if allocatable <= 0:
                continue
            figures = (
                info.node.labels.get(PRODUCT_LABEL, UNKNOWN_MODEL),
                allocatable,
                info.req_scalar.get(NVIDIA_GPU, 0),
            )
            seen[info.name] = figures
            old = self._nodes.get(info.name)
            if old == figures:
                continue
            if old is not None and old[0] != figures[0]:
                self._remove(info.name, old[0])  # relabelled: the old model's series go
            gauge.labels(node=info.name, model=figures[0], state="allocatable").set(allocatable)
            gauge.labels(node=info.name, model=figures[0], state="allocated").set(figures[2])
        for name in self._nodes.keys() - seen.keys():  # deleted, or no GPUs any more
            self._remove(name, self._nodes[name][0])
        self._nodes = seen

    def _remove(self, node: str, model: str) -> None:
        for state in ("allocatable", "allocated"):
            self.metrics.node_gpus.remove(node, model, state)

    def publish_gangs(self, gangs: GangTracker, queued: Callable[[str], bool], now: float) -> None:
        """Pending: a PodGroup that has not started whole and has a member in the queue; its
        age runs from the PodGroup's creation (`now` is wall time, as creation times are)."""
        created = [
            group.creation_time
            for key, group in gangs.groups.items()
            if key not in gangs.quorum_reached and any(map(queued, gangs.members.get(key, ())))
        ]
        self.metrics.gangs_pending.set(len(created))
        self.metrics.gang_oldest_pending.set(max(0.0, now - min(created, default=now)))
