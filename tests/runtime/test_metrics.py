"""SchedulerMetrics exports kube-scheduler's series names and labels, in its own registry."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from batchsched.metrics import SchedulerMetrics, exponential_buckets

# (attribute, family name as exposed, type, label values for one child)
METRICS: list[tuple[str, str, str, dict[str, str]]] = [
    (
        "schedule_attempts",
        "scheduler_schedule_attempts",
        "counter",
        {"result": "scheduled", "profile": "gpu-scheduler"},
    ),
    (
        "attempt_duration",
        "scheduler_scheduling_attempt_duration_seconds",
        "histogram",
        {"result": "unschedulable", "profile": "gpu-scheduler"},
    ),
    (
        "extension_point_duration",
        "scheduler_framework_extension_point_duration_seconds",
        "histogram",
        {"extension_point": "Bind", "status": "Success", "profile": "gpu-scheduler"},
    ),
    ("pod_scheduling_attempts", "scheduler_pod_scheduling_attempts", "histogram", {}),
    ("preemption_attempts", "scheduler_preemption_attempts", "counter", {}),
    ("preemption_victims", "scheduler_preemption_victims", "histogram", {}),
    ("pending_pods", "scheduler_pending_pods", "gauge", {"queue": "active"}),
    (
        "queue_incoming_pods",
        "scheduler_queue_incoming_pods",
        "counter",
        {"queue": "active", "event": "PodAdd"},
    ),
    ("cache_size", "scheduler_cache_size", "gauge", {"type": "nodes"}),
    (
        "leader_election_master_status",
        "leader_election_master_status",
        "gauge",
        {"name": "gpu-scheduler"},
    ),
    ("invalid_objects", "batchsched_invalid_objects", "counter", {"kind": "Pod"}),
    ("bind_failures", "batchsched_bind_failures", "counter", {"reason": "DefaultBinder"}),
    ("assumed_expired", "batchsched_assumed_pods_expired", "counter", {}),
    ("informer_relists", "batchsched_informer_relists", "counter", {"resource": "pods"}),
    ("config_errors", "batchsched_config_errors", "counter", {"source": "queues.yaml"}),
]


def _touch(metrics: SchedulerMetrics, attribute: str, labels: dict[str, str], kind: str) -> None:
    metric = getattr(metrics, attribute)
    child = metric.labels(**labels) if labels else metric
    if kind == "histogram":
        child.observe(1.0)
    elif kind == "counter":
        child.inc()
    else:
        child.set(1)


@pytest.mark.parametrize(
    ("attribute", "family", "kind", "labels"),
    METRICS,
    ids=[f"{m[1]} is a {m[2]} labelled by {sorted(m[3]) or 'nothing'}" for m in METRICS],
)
def test_each_metric_renders_with_its_kube_name_and_labels(
    attribute: str, family: str, kind: str, labels: dict[str, str]
) -> None:
    metrics = SchedulerMetrics()
    _touch(metrics, attribute, labels, kind)
    families = {f.name: f for f in text_string_to_metric_families(metrics.render().decode())}
    assert families[family].type == kind
    sample_names = {s.name for s in families[family].samples}
    expected = {"counter": f"{family}_total", "histogram": f"{family}_count", "gauge": family}
    assert expected[kind] in sample_names
    for sample in families[family].samples:
        assert set(labels.items()) <= set(sample.labels.items())


def test_the_scheduling_attempt_histogram_has_kubes_fifteen_exponential_buckets() -> None:
    metrics = SchedulerMetrics()
    metrics.attempt_duration.labels(result="scheduled", profile="p").observe(0.0015)
    text = metrics.render().decode()
    assert 'le="0.001"' in text
    assert 'le="16.384"' in text
    assert 'le="32.768"' not in text
    assert exponential_buckets(0.001, 2, 15)[-1] == pytest.approx(16.384)


def test_two_schedulers_in_one_process_keep_separate_registries() -> None:
    first, second = SchedulerMetrics(), SchedulerMetrics()
    first.assumed_expired.inc()
    assert b"batchsched_assumed_pods_expired_total 1.0" in first.render()
    assert b"batchsched_assumed_pods_expired_total 0.0" in second.render()


def test_pending_pods_reports_every_queue_even_when_empty() -> None:
    metrics = SchedulerMetrics()
    metrics.set_pending({"active": 3, "backoff": 1})
    text = metrics.render().decode()
    assert 'scheduler_pending_pods{queue="active"} 3.0' in text
    assert 'scheduler_pending_pods{queue="unschedulable"} 0.0' in text
    assert 'scheduler_pending_pods{queue="gated"} 0.0' in text


def test_cache_size_and_leader_status_helpers_set_their_gauges() -> None:
    metrics = SchedulerMetrics()
    metrics.set_cache_size(nodes=5, pods=40, assumed_pods=2)
    metrics.set_leader("gpu-scheduler", True)
    text = metrics.render().decode()
    assert 'scheduler_cache_size{type="assumed_pods"} 2.0' in text
    assert 'leader_election_master_status{name="gpu-scheduler"} 1.0' in text


@pytest.mark.parametrize(
    ("start", "factor", "count"),
    [(0, 2, 3), (1, 1, 3), (1, 2, 0)],
    ids=["a zero start is rejected", "a factor of one is rejected", "zero buckets are rejected"],
)
def test_exponential_buckets_reject_degenerate_shapes(
    start: float, factor: float, count: int
) -> None:
    with pytest.raises(ValueError):
        exponential_buckets(start, factor, count)
