"""`simulate --quota`: the live tenant layer on the virtual clock (quota holds, borrowing,
fair-share order, per-tenant results, the known-unfit shortcut with quotas)."""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

from batchsched.config import default_config
from batchsched.framework.profile import Profile
from batchsched.model.node import NodeView
from batchsched.sim.engine import Simulator
from batchsched.sim.tenants import SimTenants, render_tenants
from batchsched.sim.workload import SimPod, sim_pod
from batchsched.snapshot import Snapshot
from queues.config import parse_quota_config
from queues.model import QuotaPolicy
from tests.builders import make_node, make_pod
from tests.sim.test_engine import Log

TWO_TENANTS = """
apiVersion: batchsched.io/v1alpha1
kind: QuotaConfig
tenants:
- name: a
  namespaces: [a]
  {a}
- name: b
  namespaces: [b]
  {b}
"""


def policy(a: str = "", b: str = "") -> QuotaPolicy:
    return parse_quota_config(TWO_TENANTS.format(a=a, b=b))


def profile(percentage: int | None = None) -> Profile:
    built = default_config().build_profiles()["gpu-scheduler"]
    if percentage is None:
        return built
    return dataclasses.replace(built, percentage_of_nodes_to_score=percentage)


def gpu_node(gpus: int = 4, name: str = "n1") -> NodeView:
    return make_node(name).cpu("32").memory("128Gi").gpus(gpus).view()


def pod(name: str, tenant: str, at: float, runtime: float | None = None, gpus: int = 1) -> SimPod:
    view = make_pod(name, namespace=tenant).cpu("1").gpus(gpus).view()
    return sim_pod(view, at, runtime)


def run(
    nodes: list[NodeView],
    pods: list[SimPod],
    quota: QuotaPolicy | None,
    record_reasons: bool = True,
    percentage: int | None = None,
) -> tuple[Simulator, Log]:
    log, snapshot = Log(), Snapshot(nodes)
    tenants = None
    if quota is not None:
        tenants = SimTenants(quota, "gpu-scheduler", snapshot)
    sim = Simulator(
        snapshot,
        profile(percentage),
        log,
        seed=1,
        record_reasons=record_reasons,
        tenants=tenants,
    )
    sim.run(pods)
    return sim, log


def placed_at(log: Log) -> dict[str, float]:
    return {name: when for when, name, _ in log.of("placed")}


def test_a_tenant_at_its_max_waits_while_another_runs_on_free_gpus() -> None:
    pods = [
        pod("a1", "a", 0, runtime=10),
        pod("a2", "a", 0, runtime=10),
        pod("b1", "b", 0, runtime=10),
        pod("b2", "b", 0, runtime=10),
    ]
    sim, log = run([gpu_node(4)], pods, policy(a="max: {nvidia.com/gpu: 1}"))
    # Four GPUs, four pods: a2 alone waits, for its tenant's max, until a1 leaves at 10.
    assert placed_at(log) == {"a1": 0, "b1": 0, "b2": 0, "a2": 10}
    assert sim.tenants is not None
    rows = sim.tenants.summary()
    assert rows["a"]["pods_held_by_quota"] == 1 and rows["b"]["pods_held_by_quota"] == 0
    assert rows["a"]["gpus_peak"] == 1.0 and rows["b"]["gpus_peak"] == 2.0
    assert rows["a"]["wait_max_s"] == 10 and rows["a"]["gpus_max"] == 1.0


def test_without_a_quota_file_the_same_pods_all_start_at_once() -> None:
    pods = [pod(f"a{i}", "a", 0, runtime=10) for i in range(2)]
    _, log = run([gpu_node(4)], [*pods, pod("b1", "b", 0, runtime=10)], None)
    assert set(placed_at(log).values()) == {0}


def test_a_quota_hold_lifts_on_a_departure_from_a_node_the_pod_could_not_use() -> None:
    # a1 holds node n1's only GPU; a2 asks for 2 GPUs, which only n2 has room for, but
    # tenant a's max (2) refuses it while a1 runs. a1's departure frees nothing a2 could use
    # on n1, yet lifts the quota: a2 must be tried again then.
    pods = [
        pod("a1", "a", 0, runtime=10),
        pod("a2", "a", 1, runtime=10, gpus=2),
    ]
    nodes = [gpu_node(1, "n1"), gpu_node(2, "n2")]
    _, log = run(nodes, pods, policy(a="max: {nvidia.com/gpu: 2}"))
    assert placed_at(log) == {"a1": 0, "a2": 10}
    assert ("a2", "n2") in {(name, node) for _, name, node in log.of("placed")}


def test_a_quota_held_pod_says_so_while_it_waits() -> None:
    pods = [pod("a1", "a", 0), pod("a2", "a", 0)]
    sim, _ = run([gpu_node(4)], pods, policy(a="max: {nvidia.com/gpu: 1}"))
    (uid,) = sim.last_failure
    assert sim.last_failure[uid].startswith("quota: tenant a would exceed its max 1")


def test_a_tenant_borrows_idle_guarantee_that_its_owner_lends() -> None:
    pods = [pod(f"a{i}", "a", 0) for i in range(4)]
    lend = policy(a="guaranteed: {nvidia.com/gpu: 1}", b="guaranteed: {nvidia.com/gpu: 2}")
    _, log = run([gpu_node(4)], pods, lend)
    assert len(placed_at(log)) == 4  # 3 borrowed: b lends its idle 2


def test_a_tenant_cannot_borrow_the_idle_guarantee_of_one_that_keeps_it() -> None:
    pods = [pod(f"a{i}", "a", 0) for i in range(4)]
    keep = policy(
        a="guaranteed: {nvidia.com/gpu: 1}",
        b="guaranteed: {nvidia.com/gpu: 2}\n  lendIdle: false",
    )
    sim, log = run([gpu_node(4)], pods, keep)
    assert len(placed_at(log)) == 2  # b's 2 idle GPUs stay free for b
    assert sim.tenants is not None
    assert sim.tenants.summary()["a"]["pods_held_by_quota"] == 2


def test_the_tenant_with_the_smaller_share_goes_next() -> None:
    # Two GPUs; a's two pods come first in queue order. Fair share gives b's pod the second
    # GPU, after a's first pod made a's share the larger.
    pods = [pod("a1", "a", 0), pod("a2", "a", 0), pod("b1", "b", 0)]
    _, log = run([gpu_node(2)], pods, policy())
    assert [name for _, name, _ in log.of("placed")] == ["a1", "b1"]
    _, plain = run([gpu_node(2)], pods, None)
    assert [name for _, name, _ in plain.of("placed")] == ["a1", "a2"]


def test_a_tenant_below_its_guarantee_goes_before_one_that_would_borrow() -> None:
    pods = [pod("a1", "a", 0), pod("b1", "b", 0)]
    _, log = run([gpu_node(1)], pods, policy(b="guaranteed: {nvidia.com/gpu: 1}"))
    assert [name for _, name, _ in log.of("placed")] == ["b1"]


def test_a_run_with_quotas_is_the_same_for_the_same_seed() -> None:
    pods = [pod(f"{t}{i}", t, float(i), runtime=5.0 + i) for i in range(12) for t in "ab"]
    quota = policy(a="max: {nvidia.com/gpu: 2}", b="guaranteed: {nvidia.com/gpu: 1}")
    runs = [run([gpu_node(3), gpu_node(2, "n2")], pods, quota) for _ in range(2)]
    first, second = ((sim.tenants.summary() if sim.tenants else {}, log) for sim, log in runs)
    assert first[0] == second[0] and first[1].events == second[1].events


def test_the_tenant_table_has_a_line_per_tenant() -> None:
    pods = [pod("a1", "a", 0), pod("a2", "a", 0)]
    sim, _ = run([gpu_node(4)], pods, policy(a="max: {nvidia.com/gpu: 1}"))
    assert sim.tenants is not None
    lines = render_tenants(sim.tenants.summary())
    assert lines[0].split()[0] == "TENANT"
    assert lines[1].split()[:4] == ["a", "2", "1", "1"]  # arrived, placed, held
    assert lines[2].split()[:3] == ["b", "0", "0"]


def test_a_copy_of_a_known_unfit_shape_is_asked_its_quota_first() -> None:
    # "big" finds no node (no node has 2 GPUs); two small pods of its tenant then fill the
    # tenant's max; "big-copy" is settled without a cycle, but as its quota's refusal, which
    # its full cycle would have been (quota comes before placement).
    pods = [
        pod("big", "a", 0, gpus=2),
        pod("small-1", "a", 1),
        pod("small-2", "a", 2),
        pod("big-copy", "a", 3, gpus=2),
    ]
    nodes = [gpu_node(1, f"n{i}") for i in range(3)]
    quota = policy(a="max: {nvidia.com/gpu: 2}")
    fast, _ = run(nodes, pods, quota, record_reasons=False, percentage=100)
    assert fast.known_unfit == 1 and fast.tenants is not None
    assert fast.tenants.summary()["a"]["pods_held_by_quota"] == 1  # big-copy


# Pods of two shapes (1 or 2 GPUs) in two tenants, arriving one a second, some leaving.
_PODS = st.lists(
    st.tuples(st.sampled_from("ab"), st.sampled_from([None, 3.0, 8.0]), st.integers(1, 2)),
    max_size=30,
)


@settings(max_examples=60, deadline=None)
@given(_PODS)
def test_the_known_unfit_shortcut_with_quotas_changes_no_placement(
    spec: list[tuple[str, float | None, int]],
) -> None:
    # A decisions-only run (known-unfit shapes on) against full cycles for every pod: a quota
    # refusal must not mark a shape, and a copy of a known-unfit shape must still be asked
    # its quota (a smaller pod of its tenant may have filled the quota since), so both runs
    # place the same pods at the same times and hold the same ones by quota as often.
    pods = [
        pod(f"p{i}", tenant, float(i), runtime, gpus)
        for i, (tenant, runtime, gpus) in enumerate(spec)
    ]
    quota = policy(a="max: {nvidia.com/gpu: 2}")
    nodes = [gpu_node(2), gpu_node(1, "n2"), gpu_node(1, "n3")]
    fast, fast_log = run(nodes, pods, quota, record_reasons=False, percentage=100)
    full, full_log = run(nodes, pods, quota, record_reasons=True, percentage=100)
    assert fast_log.of("placed") == full_log.of("placed")
    assert fast.tenants is not None and full.tenants is not None
    assert fast.tenants.totals() == full.tenants.totals()
