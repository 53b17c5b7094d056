"""The live views computed from objects: queue order and quota, explain, the GPU view."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from batchsched.config import default_config
from batchsched.framework.profile import Profile
from batchsched.gang.podgroup import parse_pod_group
from batchsched.views.explain import explain, find_workload
from batchsched.views.gpus import gpu_view
from batchsched.views.queue import queue_view
from batchsched.views.state import LiveState
from queues.config import parse_quota_config
from queues.model import QuotaPolicy, single_tenant_policy
from tests.builders import make_node, make_pod

NOW = 1_700_000_000.0

QUOTA = """
apiVersion: batchsched.io/v1alpha1
kind: QuotaConfig
tenants:
  - name: heavy
    namespaces: [heavy]
    guaranteed: {nvidia.com/gpu: 4}
    max: {nvidia.com/gpu: 8}
  - name: light
    namespaces: [light]
    guaranteed: {nvidia.com/gpu: 4}
    max: {nvidia.com/gpu: 5}
"""


def profiles() -> dict[str, Profile]:
    return dict(default_config().build_profiles())


def policy() -> QuotaPolicy:
    return parse_quota_config(QUOTA, "test")


def created(seconds_ago: int) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(NOW - seconds_ago, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def pod_group(name: str, namespace: str, min_member: int, age: int = 100) -> dict[str, object]:
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"pg-{name}",
            "creationTimestamp": created(age),
        },
        "spec": {"minMember": min_member},
    }


def cluster() -> LiveState:
    """Two 8-GPU nodes; tenant heavy runs 6 GPUs, light runs nothing."""
    nodes = [make_node(f"n{i}").cpu("64").memory("512Gi").gpus(8).view() for i in range(2)]
    running = [
        make_pod("run-a", "heavy").gpus(4).node("n0").phase("Running").created(created(900)),
        make_pod("run-b", "heavy").gpus(2).node("n1").phase("Running").created(created(900)),
    ]
    pending = [
        make_pod("h-old", "heavy").gpus(1).created(created(300)),
        make_pod("l-new", "light").gpus(1).created(created(10)),
        make_pod("big", "light").gpus(8).created(created(200)),
    ]
    gang = [
        make_pod(f"g-{i}", "heavy")
        .gpus(2)
        .label("scheduling.x-k8s.io/pod-group", "train")
        .created(created(50))
        for i in range(2)
    ]
    return LiveState(
        nodes=nodes,
        pods=[b.view() for b in (*running, *pending, *gang)],
        pod_groups=[parse_pod_group(pod_group("train", "heavy", 3))],
        scheduled_messages={"heavy/h-old": "0/2 nodes are available: 2 Insufficient cpu."},
        now=NOW,
    )


def test_the_queue_puts_the_tenant_below_its_guarantee_first_then_fifo_within_a_tenant() -> None:
    view = queue_view(cluster(), profiles(), policy())
    order = [(r.position, r.tenant, r.tenant_position, r.workload) for r in view.rows]
    # light uses nothing (below guarantee, share 0): both its pods come before heavy's,
    # oldest first; heavy's oldest pod before its gang.
    assert order == [
        (1, "light", 1, "light/big"),
        (2, "light", 2, "light/l-new"),
        (3, "heavy", 1, "heavy/h-old"),
        (4, "heavy", 2, "heavy/train"),
    ]


def test_without_a_quota_file_the_order_is_the_queue_sort_order_alone() -> None:
    view = queue_view(cluster(), profiles(), single_tenant_policy())
    assert [r.workload for r in view.rows] == [
        "heavy/h-old",
        "light/big",
        "heavy/train",
        "light/l-new",
    ]


def test_queue_rows_give_reasons_quota_members_and_the_schedulers_last_message() -> None:
    rows = {r.workload: r for r in queue_view(cluster(), profiles(), policy()).rows}
    assert rows["heavy/train"].reason == "waiting for members: 2/3 exist"
    assert rows["heavy/train"].gang and rows["heavy/train"].pending == 2
    assert rows["light/big"].reason.startswith("quota: ")  # 8 GPUs > light's max of 5
    # Refused by its quota: no start is planned for it (the scheduler reserves nothing).
    assert (rows["light/big"].start_in_s, rows["light/big"].start_source) == (None, "")
    assert rows["heavy/h-old"].reason == "0/2 nodes are available: 2 Insufficient cpu."
    assert rows["light/l-new"].gpus == 1.0


def test_the_tenant_table_shows_used_guaranteed_max_and_pending() -> None:
    tenants = {t.tenant: t for t in queue_view(cluster(), profiles(), policy()).tenants}
    heavy, light = tenants["heavy"], tenants["light"]
    assert (heavy.used_gpus, heavy.guaranteed_gpus, heavy.max_gpus, heavy.pending) == (
        6.0,
        4.0,
        8.0,
        2,
    )
    assert (light.used_gpus, light.pending) == (0.0, 2)
    assert heavy.fair_share > light.fair_share == 0.0


def test_a_planned_start_comes_from_the_running_pods_expected_runtimes() -> None:
    state = cluster()
    runtime = "batchsched.io/expected-runtime"
    pods = [
        make_pod("run-a", "heavy")
        .gpus(8)
        .node("n0")
        .phase("Running")
        .annotation(runtime, "1h")
        .created(created(1800)),
        make_pod("run-b", "heavy")
        .gpus(8)
        .node("n1")
        .phase("Running")
        .annotation(runtime, "2h")
        .created(created(1800)),
        make_pod("wait", "light").gpus(8).created(created(10)),
    ]
    state = LiveState(state.nodes, [p.view() for p in pods], now=NOW)
    (row,) = queue_view(state, profiles(), single_tenant_policy()).rows
    assert row.start_source == "planned"
    assert row.start_in_s is not None and abs(row.start_in_s - 1800) < 2


def test_explain_gives_per_node_reasons_and_the_gpus_missing_on_one_node() -> None:
    state = cluster()
    pods = find_workload(state, "big", "light")
    found = explain(state, profiles(), policy(), pods)
    assert found.nodes.startswith("0/2 nodes are available")
    assert "nvidia.com/gpu" in found.nodes
    assert found.quota != "admitted"
    assert any("more GPU(s) free on one node" in c for c in found.changes), found.changes
    assert found.position == 1


def test_explain_a_gang_names_its_members_and_quorum() -> None:
    state = cluster()
    found = explain(state, profiles(), policy(), find_workload(state, "podgroup/train", "heavy"))
    assert found.gang is not None
    assert (found.gang.min_member, found.gang.pending, found.gang.bound) == (
        3,
        ("g-0", "g-1"),
        0,
    )
    assert found.changes[0].startswith("1 more member pod(s) must be created")


def test_the_gpu_view_counts_used_and_free_gpus_per_node_and_in_total() -> None:
    view = gpu_view(cluster())
    by_node = {n.node: n for n in view.nodes}
    assert (by_node["n0"].allocatable, by_node["n0"].used, by_node["n0"].free) == (8, 4.0, 4)
    assert (by_node["n1"].used, by_node["n1"].free) == (2.0, 6)
    assert (view.allocatable, view.used, view.free) == (16, 6.0, 10)


def test_no_start_is_planned_for_a_workload_its_quota_refuses_even_where_it_would_fit() -> None:
    nodes = [make_node("n0").cpu("64").memory("512Gi").gpus(8).view()]
    pods = [make_pod("big", "light").gpus(8).created(created(10)).view()]
    (row,) = queue_view(LiveState(nodes, pods, now=NOW), profiles(), policy()).rows
    assert row.reason.startswith("quota: tenant light would exceed its max 5")
    assert (row.start_in_s, row.start_source) == (None, "")


def test_the_gpus_missing_are_counted_only_on_nodes_the_pod_may_use() -> None:
    product = "nvidia.com/gpu.product"
    nodes = [
        make_node("h100").cpu("64").memory("512Gi").gpus(8).label(product, "H100").view(),
        make_node("l4").cpu("64").memory("512Gi").gpus(8).label(product, "L4").view(),
    ]
    pods = [
        make_pod("run", "heavy").gpus(6).node("h100").phase("Running").view(),
        make_pod("want", "heavy").gpus(4).node_selector(**{product: "H100"}).view(),
    ]
    state = LiveState(nodes, pods, now=NOW)
    found = explain(
        state, profiles(), single_tenant_policy(), find_workload(state, "want", "heavy")
    )
    assert found.changes == (
        "needs 2 more GPU(s) free on one node (4 per pod; most free on one node: 2 on h100)",
        "needs 2 more GPU(s) free on the nodes it may use (4 asked, 2 free)",
    )


def test_the_namespace_and_tenant_filters_keep_only_their_rows() -> None:
    from argparse import Namespace

    from batchsched.views.live import compute

    def shown(**flags: str | None) -> list[str]:
        args = Namespace(command="queue", output="json", seed=0, namespace=None, tenant=None)
        for name, value in flags.items():
            setattr(args, name, value)
        out = json.loads(compute(args, cluster(), profiles(), policy()))
        return [r["workload"] for r in out["rows"]] + [t["tenant"] for t in out["tenants"]]

    assert shown(namespace="light") == ["light/big", "light/l-new", "heavy", "light"]
    assert shown(tenant="heavy") == ["heavy/h-old", "heavy/train", "heavy"]


def test_a_bad_quota_file_is_reported_naming_the_file_before_any_connection(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from batchsched.cli import main

    bad = tmp_path / "quotas.yaml"
    bad.write_text("apiVersion: batchsched.io/v1alpha1\nkind: QuotaConfig\ntenants: 3\n")
    # The kubeconfig does not exist either: the quota file is what must be named.
    code = main(["queue", "--quota", str(bad), "--kubeconfig", str(tmp_path / "none")])
    out, err = capsys.readouterr()
    assert (code, out) == (2, "")
    assert err.startswith(f"batchsched queue: {bad}")


def test_only_the_first_planned_workloads_get_a_start_planned_here() -> None:
    from batchsched.views.queue import PLANNED

    nodes = [make_node("n0").cpu("512").memory("4Ti").gpus(64).view()]
    pods = [
        make_pod(f"p{i:02}", "light").gpus(1).created(created(100 - i)).view() for i in range(40)
    ]
    rows = queue_view(LiveState(nodes, pods, now=NOW), profiles(), single_tenant_policy()).rows
    assert [r.start_in_s for r in rows] == [0.0] * PLANNED + [None] * (40 - PLANNED)


def test_explain_plans_reclaiming_a_guarantee_from_a_tenant_above_its_own() -> None:
    nodes = [make_node("n0").cpu("64").memory("512Gi").gpus(8).view()]
    pods = [
        make_pod(f"run-{i}", "heavy").gpus(4).node("n0").phase("Running").created(created(900))
        for i in range(2)
    ]
    state = LiveState(
        nodes, [p.view() for p in pods] + [make_pod("want", "light").gpus(4).view()], now=NOW
    )
    found = explain(state, profiles(), policy(), find_workload(state, "want", "light"))
    # Same priority: only the guarantee light is below makes heavy's pods victims.
    assert found.preemption.startswith("preempting pod heavy/run-"), found.preemption
    assert found.changes[-1].startswith("or preemption: preempting pod heavy/run-")
