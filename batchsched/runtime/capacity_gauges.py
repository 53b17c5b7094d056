"""Gauges the housekeeping round recomputes from the cache and the queue each second: GPUs
per node (allocatable and allocated, by model) and the age of the oldest queued gang member.

They are what the dashboard's GPU-allocation and fragmentation panels and the "gang pending
too long" alert read (deploy/monitoring). Every replica publishes them from its own cache, so
they work with or without leader election.
"""

from __future__ import annotations

from collections.abc import Iterable

from batchsched.framework.interfaces import QueuedPod
from batchsched.gang.podgroup import pod_group_of
from batchsched.metrics import SchedulerMetrics
from batchsched.model.resources import NVIDIA_GPU
from batchsched.snapshot import Snapshot
from queues.demand import PRODUCT_LABEL

UNKNOWN_MODEL = "unknown"  # a GPU node without the GPU feature discovery product label


def publish_capacity(
    metrics: SchedulerMetrics, snapshot: Snapshot, queued: Iterable[QueuedPod], now: float
) -> None:
    """`now` is wall time (pods' creation times are wall time)."""
    # Cleared first, so a deleted node or a relabelled model leaves no stale series behind.
    metrics.node_gpus.clear()
    for info in snapshot.nodes:
        allocatable = info.node.allocatable.get(NVIDIA_GPU)
        if allocatable <= 0:
            continue
        model = info.node.labels.get(PRODUCT_LABEL, UNKNOWN_MODEL)
        allocated = info.requested.get(NVIDIA_GPU)
        metrics.node_gpus.labels(node=info.name, model=model, state="allocatable").set(allocatable)
        metrics.node_gpus.labels(node=info.name, model=model, state="allocated").set(allocated)
    created: dict[str, float] = {}
    for qp in queued:
        group = pod_group_of(qp.pod)
        if group is not None:
            created[group] = min(created.get(group, qp.pod.creation_time), qp.pod.creation_time)
    metrics.gangs_pending.set(len(created))
    oldest = min(created.values(), default=now)
    metrics.gang_oldest_pending.set(max(0.0, now - oldest))
