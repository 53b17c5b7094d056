"""The per-second GPU and gang gauges (batchsched/runtime/capacity_gauges.py)."""

from __future__ import annotations

from batchsched.gang.podgroup import parse_pod_group
from batchsched.metrics import SchedulerMetrics
from batchsched.runtime.capacity_gauges import CapacityGauges
from batchsched.runtime.gangs import GangTracker
from tests.builders import make_node, make_pod, snapshot_of

PRODUCT = "nvidia.com/gpu.product"
GROUP = "scheduling.x-k8s.io/pod-group"
GPUS = "batchsched_node_gpus"


def value(metrics: SchedulerMetrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


def test_gpu_nodes_report_allocatable_and_allocated_gpus_by_model() -> None:
    gauges = CapacityGauges(m := SchedulerMetrics())
    snapshot = snapshot_of(
        [make_node("a").gpus(8).label(PRODUCT, "H100"), make_node("b").gpus(4), make_node("c")],
        [make_pod("p").gpus(3).node("a")],
    )

    gauges.publish_nodes(snapshot)

    assert value(m, GPUS, node="a", model="H100", state="allocatable") == 8
    assert value(m, GPUS, node="a", model="H100", state="allocated") == 3
    assert value(m, GPUS, node="b", model="unknown", state="allocated") == 0
    assert value(m, GPUS, node="c", model="unknown", state="allocatable") is None


def test_a_change_is_published_and_a_gone_or_relabelled_node_leaves_no_series() -> None:
    gauges = CapacityGauges(m := SchedulerMetrics())
    gauges.publish_nodes(snapshot_of([make_node("a").gpus(8), make_node("b").gpus(8)]))

    gauges.publish_nodes(
        snapshot_of(
            [make_node("b").gpus(8).label(PRODUCT, "L4")], [make_pod("p").gpus(1).node("b")]
        )
    )

    assert value(m, GPUS, node="a", model="unknown", state="allocatable") is None
    assert value(m, GPUS, node="b", model="unknown", state="allocatable") is None
    assert value(m, GPUS, node="b", model="L4", state="allocatable") == 8
    assert value(m, GPUS, node="b", model="L4", state="allocated") == 1


def group(name: str, created: str) -> dict[str, object]:
    meta = {"name": name, "namespace": "ml", "uid": name, "creationTimestamp": created}
    return {"metadata": meta, "spec": {"minMember": 2}}


def test_the_oldest_pending_podgroup_gives_the_gang_age() -> None:
    gauges = CapacityGauges(m := SchedulerMetrics())
    gangs = GangTracker()
    old = parse_pod_group(group("old", "2026-01-01T00:00:00Z"))
    for view in (old, parse_pod_group(group("new", "2026-01-01T00:10:00Z"))):
        gangs.on_add(view)
    for name in ("old", "new", "started"):
        gangs.note_pod(make_pod(f"{name}-0", "ml").label(GROUP, name).view())
    gangs.on_add(parse_pod_group(group("started", "2025-01-01T00:00:00Z")))
    gangs.quorum_reached.add("ml/started")  # whole once: its queued surplus is not pending
    queued = {"uid-ml-old-0", "uid-ml-new-0", "uid-ml-started-0"}

    gauges.publish_gangs(gangs, queued.__contains__, old.creation_time + 3600)

    assert value(m, "batchsched_gangs_pending") == 2
    assert value(m, "batchsched_gang_oldest_pending_seconds") == 3600


def test_a_gang_with_no_member_queued_is_not_pending_and_no_gang_reads_zero() -> None:
    gauges = CapacityGauges(m := SchedulerMetrics())
    gangs = GangTracker()
    gangs.on_add(parse_pod_group(group("g", "2026-01-01T00:00:00Z")))
    gangs.note_pod(make_pod("g-0", "ml").label(GROUP, "g").view())

    gauges.publish_gangs(gangs, lambda uid: False, 2e9)

    assert value(m, "batchsched_gangs_pending") == 0
    assert value(m, "batchsched_gang_oldest_pending_seconds") == 0
