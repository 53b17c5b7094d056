"""deploy/monitoring against what the scheduler and the agent really export.

The exporters run in-process (SchedulerMetrics as the runtime fills it, the agent on its fake
NVML), their /metrics text is scraped and parsed, and every metric name a dashboard query or
an alert rule selects must be in it. Renaming a metric without its queries fails here.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import CollectorRegistry
from prometheus_client.metrics import MetricWrapperBase

from batchsched.gang.podgroup import parse_pod_group
from batchsched.metrics import SchedulerMetrics
from batchsched.runtime.capacity_gauges import CapacityGauges
from batchsched.runtime.gangs import GangTracker
from gpu.agent import Agent, AgentConfig
from gpu.fake_nvml import FakeNvml, host_numa
from gpu.machines import DGX_H100
from gpu.nvml import NvmlReader
from tests.builders import make_node, make_pod, snapshot_of
from tests.monitoring.promql_names import metric_names, selectors

ROOT = Path(__file__).resolve().parents[2]
MONITORING = ROOT / "deploy" / "monitoring"
DASHBOARD = MONITORING / "dashboards" / "batchsched.json"
RULES = MONITORING / "prometheusrule.yaml"
OPERATIONS = ROOT / "docs" / "operations.md"
# Series Prometheus makes itself for every target, not the exporters.
SYNTHETIC = frozenset({"up", "scrape_duration_seconds", "scrape_samples_scraped"})
# Labels a ServiceMonitor target adds to every series (node: the agent's relabeling).
TARGET_LABELS = frozenset({"job", "instance", "pod", "namespace", "service", "endpoint", "node"})
SAMPLE = re.compile(r"([A-Za-z_:][A-Za-z0-9_:]*)(\{[^}]*\})? ")
DURATION = re.compile(r"^(\d+(ms|s|m|h|d|w|y))+$")


def touch_every_family(registry: CollectorRegistry) -> None:
    """Give each labelled family one child, so that it shows up in the exposition (an unused
    labelled metric exposes no sample, yet Prometheus will see it once the runtime uses it)."""
    for collector in list(registry._collector_to_names):
        if isinstance(collector, MetricWrapperBase) and collector._labelnames:
            child = collector.labels(*("x" for _ in collector._labelnames))
            for method in ("inc", "observe", "set"):
                if hasattr(child, method):
                    getattr(child, method)(1)
                    break


def scheduler_exposition() -> str:
    metrics = SchedulerMetrics()
    metrics.set_pending({"active": 1})
    metrics.set_cache_size(nodes=1, pods=1, assumed_pods=0)
    metrics.set_leader("batchsched", True)
    gauges = CapacityGauges(metrics)
    gauges.publish_nodes(
        snapshot_of(
            [make_node("gpu-1").gpus(8).label("nvidia.com/gpu.product", "H100")],
            [make_pod("train-0").gpus(2).node("gpu-1")],
        )
    )
    gangs = GangTracker()
    meta = {
        "name": "train",
        "namespace": "ml",
        "uid": "g",
        "creationTimestamp": "2026-01-01T00:00:00Z",
    }
    gangs.on_add(parse_pod_group({"metadata": meta, "spec": {"minMember": 2}}))
    gangs.note_pod(make_pod("train-1", "ml").label("scheduling.x-k8s.io/pod-group", "train").view())
    gauges.publish_gangs(gangs, lambda uid: True, now=1.8e9)
    touch_every_family(metrics.registry)
    return metrics.render().decode()


async def agent_exposition() -> str:
    class Sink:
        async def apply(self, obj: object) -> None:
            pass

    lib = FakeNvml(DGX_H100)
    agent = Agent(
        NvmlReader(lib, host_numa(lib.machine)),
        Sink(),
        AgentConfig("gpu-1", "fake:test", poll_s=10, heartbeat_s=60),
    )
    assert await agent.refresh(now=0.0)
    touch_every_family(agent.metrics.registry)
    return agent.metrics.render().decode()


def sample_labels(exposition: str) -> dict[str, set[str]]:
    """Series name -> label names, from the text exposition format."""
    found: dict[str, set[str]] = {}
    for line in exposition.splitlines():
        if not line or line.startswith("#"):
            continue
        match = SAMPLE.match(line)
        assert match is not None, line
        labels = set(re.findall(r'([A-Za-z_]\w*)="', match.group(2) or ""))
        found.setdefault(match.group(1), set()).update(labels)
    return found


@pytest.fixture(scope="module")
def exported() -> dict[str, set[str]]:
    series = sample_labels(scheduler_exposition())
    for name, labels in sample_labels(asyncio.run(agent_exposition())).items():
        series.setdefault(name, set()).update(labels)
    return series


def dashboard_exprs() -> list[tuple[str, str]]:
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    return [
        (f"panel {p['title']!r} {t['refId']}", t["expr"])
        for p in dashboard["panels"]
        for t in p.get("targets", [])
    ]


def rules() -> list[dict[str, Any]]:
    doc = yaml.safe_load(RULES.read_text(encoding="utf-8"))
    return [rule for group in doc["spec"]["groups"] for rule in group["rules"]]


def rule_exprs() -> list[tuple[str, str]]:
    return [(f"alert {r['alert']}", str(r["expr"])) for r in rules()]


EXPRS = dashboard_exprs() + rule_exprs()


@pytest.mark.parametrize(("where", "expr"), EXPRS, ids=[w for w, _ in EXPRS])
def test_each_query_selects_only_series_the_exporters_expose(
    exported: dict[str, set[str]], where: str, expr: str
) -> None:
    names = metric_names(expr)

    assert names, f"{where}: no metric found in {expr!r}"
    missing = names - exported.keys() - SYNTHETIC
    assert not missing, f"{where}: {sorted(missing)} not exported; {expr!r}"
    for name, labels in selectors(expr):
        unknown = labels - exported.get(name, set()) - TARGET_LABELS
        assert not unknown, f"{where}: {name} has no label {sorted(unknown)}"


def test_a_renamed_metric_is_caught(exported: dict[str, set[str]]) -> None:
    expr = 'sum(rate(scheduler_schedule_attempts_totals{job=~"$job"}[5m]))'

    assert metric_names(expr) - exported.keys() == {"scheduler_schedule_attempts_totals"}


def test_the_exposition_holds_labelled_and_histogram_series(
    exported: dict[str, set[str]],
) -> None:
    assert {"tenant", "bound"} <= exported["batchsched_tenant_quota_gpus"]
    assert "le" in exported["scheduler_scheduling_attempt_duration_seconds_bucket"]
    assert "scheduler_preemption_victims_sum" in exported
    assert {"healthy"} <= exported["batchsched_agent_gpus"]


@pytest.mark.parametrize(
    ("expr", "names"),
    [
        ('sum by (le) (rate(a_bucket{job=~"$job",le!="x"}[$__rate_interval]))', {"a_bucket"}),
        ("a * on (pod) group_left b or c unless on (pod) d", {"a", "b", "c", "d"}),
        ("histogram_quantile(0.99, sum without (x) (b_bucket)) > bool 1e3", {"b_bucket"}),
        ('max(x offset 5m) and absent(up{job="s"} == 1)', {"x", "up"}),
        ('label_replace(m, "dst", "$1", "src", "(.*)") / count by (a) (n)', {"m", "n"}),
        ("time() - max by (node) (ts_seconds)", {"ts_seconds"}),
    ],
)
def test_the_reader_finds_metric_names_and_skips_functions_labels_and_keywords(
    expr: str, names: set[str]
) -> None:
    assert metric_names(expr) == names


def test_the_rules_are_a_well_formed_prometheusrule() -> None:
    doc = yaml.safe_load(RULES.read_text(encoding="utf-8"))

    assert (doc["apiVersion"], doc["kind"]) == ("monitoring.coreos.com/v1", "PrometheusRule")
    assert doc["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    groups = doc["spec"]["groups"]
    assert len({g["name"] for g in groups}) == len(groups)
    alerts = [r["alert"] for r in rules()]
    assert len(set(alerts)) == len(alerts), "alert names repeat"
    for rule in rules():
        assert set(rule) <= {"alert", "expr", "for", "labels", "annotations"}, rule["alert"]
        assert isinstance(rule["expr"], str) and rule["expr"].strip()
        assert "for" not in rule or DURATION.match(rule["for"]), rule["alert"]
        assert rule["labels"]["severity"] in {"critical", "warning", "info"}
        assert {"summary", "description", "runbook_url"} <= set(rule["annotations"])
        assert all(isinstance(v, str) for v in rule["annotations"].values())


def github_anchor(heading: str) -> str:
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def test_every_runbook_points_at_a_section_of_the_operations_guide() -> None:
    headings = re.findall(r"^#+ (.+)$", OPERATIONS.read_text(encoding="utf-8"), re.MULTILINE)
    anchors = {github_anchor(h) for h in headings}

    for rule in rules():
        path, _, anchor = rule["annotations"]["runbook_url"].partition("#")
        assert path == "docs/operations.md", rule["alert"]
        assert anchor in anchors, f"{rule['alert']}: no section #{anchor} in {path}"


def test_the_service_monitors_carry_the_release_label_and_name_their_ports() -> None:
    docs = list(yaml.safe_load_all((MONITORING / "servicemonitor.yaml").read_text("utf-8")))

    assert len(docs) == 2
    for doc in docs:
        assert doc["metadata"]["labels"]["release"] == "kube-prometheus-stack"
        assert all(isinstance(e["port"], str) for e in doc["spec"]["endpoints"])
