"""The per-second GPU and gang gauges (batchsched/runtime/capacity_gauges.py)."""

from __future__ import annotations

from batchsched.framework.interfaces import QueuedPod
from batchsched.metrics import SchedulerMetrics
from batchsched.runtime.capacity_gauges import publish_capacity
from tests.builders import make_node, make_pod, snapshot_of

PRODUCT = "nvidia.com/gpu.product"
GROUP = "scheduling.x-k8s.io/pod-group"


def value(metrics: SchedulerMetrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


def test_gpu_nodes_report_allocatable_and_allocated_gpus_by_model() -> None:
    metrics = SchedulerMetrics()
    snapshot = snapshot_of(
        [make_node("a").gpus(8).label(PRODUCT, "H100"), make_node("b").gpus(4), make_node("c")],
        [make_pod("p").gpus(3).node("a")],
    )

    publish_capacity(metrics, snapshot, [], now=0.0)

    gpus = "batchsched_node_gpus"
    assert value(metrics, gpus, node="a", model="H100", state="allocatable") == 8
    assert value(metrics, gpus, node="a", model="H100", state="allocated") == 3
    assert value(metrics, gpus, node="b", model="unknown", state="allocated") == 0
    assert value(metrics, gpus, node="c", model="unknown", state="allocatable") is None


def test_a_node_gone_from_the_cache_leaves_no_series_behind() -> None:
    metrics = SchedulerMetrics()
    publish_capacity(metrics, snapshot_of([make_node("a").gpus(8)]), [], now=0.0)

    publish_capacity(metrics, snapshot_of([make_node("b").gpus(8)]), [], now=0.0)

    gpus = "batchsched_node_gpus"
    assert value(metrics, gpus, node="a", model="unknown", state="allocatable") is None
    assert value(metrics, gpus, node="b", model="unknown", state="allocatable") == 8


def test_the_oldest_queued_gang_member_gives_the_gang_age() -> None:
    metrics = SchedulerMetrics()
    old = make_pod("old").label(GROUP, "g1").created("2026-01-01T00:00:00Z").view()
    new = make_pod("new").label(GROUP, "g2").created("2026-01-01T00:10:00Z").view()
    lone = make_pod("lone").created("2025-01-01T00:00:00Z").view()
    now = old.creation_time + 3600

    publish_capacity(metrics, snapshot_of([]), [QueuedPod(p, 0.0) for p in (old, new, lone)], now)

    assert value(metrics, "batchsched_gangs_pending") == 2
    assert value(metrics, "batchsched_gang_oldest_pending_seconds") == 3600


def test_no_queued_gang_reads_zero() -> None:
    metrics = SchedulerMetrics()
    lone = make_pod("lone").created("2025-01-01T00:00:00Z").view()

    publish_capacity(metrics, snapshot_of([]), [QueuedPod(lone, 0.0)], now=2e9)

    assert value(metrics, "batchsched_gangs_pending") == 0
    assert value(metrics, "batchsched_gang_oldest_pending_seconds") == 0
