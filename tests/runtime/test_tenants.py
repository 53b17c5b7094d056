"""TenantLayer fed by the cache's watchers: usage (milli-GPUs, per team and organisation) follows
assume/add/remove/forget/expiry exactly, quota admission reads it, a policy reload recounts it,
capacity follows the nodes. On a fake clock; no API server."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from batchsched.cache import SchedulerCache
from batchsched.clock import FakeClock
from batchsched.framework.interfaces import QueuedPod
from batchsched.metrics import SchedulerMetrics
from batchsched.model.pod import PodView
from batchsched.tenants import TenantLayer
from gpu.requests import GPU_MILLI_ANNOTATION
from queues.demand import PRODUCT_LABEL
from queues.model import GPU, QuotaPolicy, Tenant, flavor_key
from tests.builders import PodBuilder, make_node, make_pod

TTL = 30.0
ORG, TEAM_A, TEAM_B = "org", "org/team-a", "org/team-b"


def policy(max_a: int | None = None, default: str | None = None) -> QuotaPolicy:
    limit = {GPU: max_a * 1000} if max_a is not None else {}
    tenants = [
        Tenant(ORG),
        Tenant(TEAM_A, parent=ORG, max=limit, namespaces=frozenset({"ns-a"})),
        Tenant(TEAM_B, parent=ORG, namespaces=frozenset({"ns-b"})),
    ]
    return QuotaPolicy({t.name: t for t in tenants}, default_tenant=default)


@dataclass
class Harness:
    cache: SchedulerCache
    layer: TenantLayer
    clock: FakeClock
    metrics: SchedulerMetrics = field(default_factory=SchedulerMetrics)

    def gpus(self, tenant: str) -> int:
        return self.layer.ledger.current(tenant).get(GPU, 0)


def harness(quota: QuotaPolicy | None = None, node_gpus: int = 8) -> Harness:
    clock = FakeClock()
    cache = SchedulerCache(clock, assume_ttl=TTL)
    metrics = SchedulerMetrics()
    layer = TenantLayer(
        quota or policy(), clock, lambda p: p.scheduler_name == "gpu-scheduler", metrics
    )
    layer.attach(cache.snapshot)
    cache.watchers.append(layer)
    cache.add_node(make_node("n1").gpus(node_gpus).label(PRODUCT_LABEL, "H100").view())
    return Harness(cache, layer, clock, metrics)


def gpu_pod(name: str, namespace: str, gpus: int) -> PodBuilder:
    return make_pod(name, namespace).gpus(gpus)


def test_assume_confirm_and_remove_count_a_pod_once_at_team_and_organisation() -> None:
    h = harness()
    pending = gpu_pod("a", "ns-a", 2)
    h.cache.assume(pending.view(), "n1")
    assert (h.gpus(TEAM_A), h.gpus(ORG), h.gpus(TEAM_B)) == (2000, 2000, 0)
    h.cache.add_pod(pending.node("n1").view())  # the watch confirms it
    assert (h.gpus(TEAM_A), h.gpus(ORG)) == (2000, 2000)
    assert h.layer.in_use.get(GPU) == 2000
    h.cache.remove_pod(pending.view())
    assert (h.gpus(TEAM_A), h.gpus(ORG), h.layer.in_use.get(GPU, 0)) == (0, 0, 0)


def test_a_forgotten_binding_and_an_expired_assumption_give_the_usage_back() -> None:
    h = harness()
    h.cache.assume(gpu_pod("failed", "ns-a", 1).view(), "n1")
    h.cache.assume(gpu_pod("lost", "ns-b", 3).view(), "n1")
    assert h.gpus(ORG) == 4000
    h.cache.forget(gpu_pod("failed", "ns-a", 1).view())
    assert (h.gpus(TEAM_A), h.gpus(TEAM_B)) == (0, 3000)
    h.cache.finish_binding(gpu_pod("lost", "ns-b", 3).view())
    h.clock.advance(TTL + 1)
    assert [p.name for p in h.cache.cleanup_expired()] == ["lost"]
    assert (h.gpus(TEAM_B), h.gpus(ORG)) == (0, 0)


def test_a_gpu_share_counts_milli_gpus_and_the_node_model_counts_too() -> None:
    h = harness()
    share = make_pod("share", "ns-a").annotation(GPU_MILLI_ANNOTATION, "250")
    h.cache.add_pod(share.node("n1").view())
    h.cache.add_pod(gpu_pod("whole", "ns-a", 1).node("n1").view())
    assert h.gpus(TEAM_A) == 1250
    assert h.layer.ledger.current(TEAM_A).get(flavor_key("H100")) == 1250


def test_pods_of_other_schedulers_use_no_tenant_quota() -> None:
    h = harness()
    theirs = gpu_pod("theirs", "ns-a", 4).scheduler("default-scheduler").node("n1")
    h.cache.add_pod(theirs.view())
    assert h.gpus(TEAM_A) == 0 and not h.layer.in_use
    h.cache.remove_pod(theirs.view())
    assert h.gpus(TEAM_A) == 0 and not h.layer.started


def test_the_tenant_gpu_gauge_follows_usage_of_team_and_organisation() -> None:
    h = harness()
    h.cache.add_pod(gpu_pod("a", "ns-a", 2).node("n1").view())
    h.cache.add_pod(gpu_pod("b", "ns-b", 1).node("n1").view())

    def gauge(tenant: str) -> float | None:
        sample = "batchsched_tenant_gpus"
        return h.metrics.registry.get_sample_value(sample, {"tenant": tenant})

    assert (gauge(TEAM_A), gauge(TEAM_B), gauge(ORG)) == (2.0, 1.0, 3.0)
    h.cache.remove_pod(gpu_pod("a", "ns-a", 2).node("n1").view())
    assert (gauge(TEAM_A), gauge(ORG)) == (0.0, 1.0)


def test_the_quota_gauge_shows_the_gpu_bounds_the_quota_file_names() -> None:
    h = harness(policy(max_a=4))
    h.cache.add_pod(gpu_pod("a", "ns-a", 2).node("n1").view())

    def bound(tenant: str, which: str) -> float | None:
        sample = "batchsched_tenant_quota_gpus"
        return h.metrics.registry.get_sample_value(sample, {"tenant": tenant, "bound": which})

    assert bound(TEAM_A, "max") == 4.0
    assert bound(TEAM_A, "guaranteed") is None  # not in the file: no series, not a 0
    h.layer.set_policy(policy(max_a=6))
    assert bound(TEAM_A, "max") == 6.0
    h.layer.set_policy(policy())
    assert bound(TEAM_A, "max") is None


Step = tuple[str, int, str, int]
steps = st.lists(
    st.tuples(
        st.sampled_from(["assume", "confirm", "remove", "forget", "expire"]),
        st.integers(0, 4),
        st.sampled_from(["ns-a", "ns-b", "theirs"]),
        st.integers(1, 3),
    ),
    max_size=30,
)


@settings(max_examples=150, deadline=None)
@given(steps)
def test_usage_always_equals_the_gpus_of_our_pods_the_cache_counts(ops: list[Step]) -> None:
    h = harness(node_gpus=1000)
    assumed: dict[str, PodView] = {}
    confirmed: dict[str, PodView] = {}
    for op, n, where, gpus in ops:
        name = f"p{n}"
        counted = assumed.get(name) or confirmed.get(name)
        builder = counted_builder(name, where, gpus, counted)
        if op == "assume" and counted is None:
            assumed[name] = h.cache.assume(builder.view(), "n1")
        elif op == "confirm":
            assumed.pop(name, None)
            confirmed[name] = builder.node("n1").view()
            h.cache.add_pod(confirmed[name])
        elif op == "remove":
            assumed.pop(name, None)
            confirmed.pop(name, None)
            h.cache.remove_pod(builder.view())
        elif op == "forget" and name in assumed:
            h.cache.forget(assumed.pop(name))
        elif op == "expire":
            for pod in assumed.values():
                h.cache.finish_binding(pod)
            h.clock.advance(TTL + 1)
            assert {p.name for p in h.cache.cleanup_expired()} == set(assumed)
            assumed.clear()
    ours = [p for p in [*assumed.values(), *confirmed.values()] if p.scheduler_name != "theirs"]
    for tenant, namespace in [(TEAM_A, "ns-a"), (TEAM_B, "ns-b")]:
        want = sum(p.requests.scalar.get(GPU, 0) for p in ours if p.namespace == namespace)
        assert h.gpus(tenant) == want * 1000
    assert h.gpus(ORG) == h.gpus(TEAM_A) + h.gpus(TEAM_B)
    assert h.layer.in_use.get(GPU, 0) == h.gpus(ORG)


def counted_builder(name: str, where: str, gpus: int, counted: PodView | None) -> PodBuilder:
    """The pod as the cache knows it (same namespace and size), or a new one."""
    if counted is not None:
        return gpu_pod(name, counted.namespace, counted.requests.scalar.get(GPU, 0)).scheduler(
            counted.scheduler_name
        )
    if where == "theirs":
        return gpu_pod(name, "ns-a", gpus).scheduler("theirs")
    return gpu_pod(name, where, gpus)


# Admission


def test_a_gang_over_its_teams_max_is_refused_with_tenant_and_amounts_named() -> None:
    h = harness(policy(max_a=8), node_gpus=16)
    h.cache.add_pod(gpu_pod("running", "ns-a", 6).node("n1").view())
    assert h.layer.admit([gpu_pod("two", "ns-a", 2).view()]).admitted
    refused = h.layer.admit([gpu_pod("m0", "ns-a", 2).view(), gpu_pod("m1", "ns-a", 1).view()])
    assert not refused.admitted
    assert refused.reason == (
        "tenant org/team-a would exceed its max 8 nvidia.com/gpu: "
        "6 nvidia.com/gpu in use + 3 nvidia.com/gpu requested"
    )
    assert h.layer.admit([gpu_pod("b", "ns-b", 8).view()]).admitted  # team-b has no max


def test_a_refusal_bumps_the_tenants_rejection_metric() -> None:
    h = harness(policy(max_a=1))
    pods = [gpu_pod("big", "ns-a", 2).view()]
    h.layer.rejected(pods, h.layer.admit(pods).reason)
    sample = h.metrics.registry.get_sample_value(
        "batchsched_quota_rejections_total", {"tenant": TEAM_A}
    )
    assert sample == 1.0


def test_a_pod_of_no_tenant_is_refused_when_the_file_names_no_default_tenant() -> None:
    h = harness()
    stray = gpu_pod("stray", "elsewhere", 1).label("batchsched.io/queue", "nope").view()
    refused = h.layer.admit([stray])
    assert not refused.admitted
    assert refused.reason == (
        "pod maps to no tenant (namespace elsewhere, label batchsched.io/queue=nope) "
        "and the quota file names no defaultTenant"
    )
    h.cache.add_pod(gpu_pod("stray-running", "elsewhere", 1).node("n1").view())
    assert not h.layer.in_use  # counted nowhere


def test_a_pod_of_no_tenant_is_admitted_and_counted_under_the_default_tenant() -> None:
    h = harness(policy(default=TEAM_B))
    stray = gpu_pod("stray", "elsewhere", 1)
    assert h.layer.admit([stray.view()]).admitted
    assert h.layer.tenant_of(stray.view()) == TEAM_B
    h.cache.add_pod(stray.node("n1").view())
    assert (h.gpus(TEAM_B), h.gpus(ORG)) == (1000, 1000)


# Reload and capacity


def test_a_new_policy_recounts_running_pods_under_their_new_tenants() -> None:
    h = harness()
    h.cache.add_pod(gpu_pod("a", "ns-a", 2).node("n1").view())
    h.cache.add_pod(gpu_pod("stray", "ns-c", 1).node("n1").view())  # no tenant yet
    started = dict(h.layer.started)
    moved = [
        Tenant("org"),
        Tenant(TEAM_A, parent=ORG),
        Tenant(TEAM_B, parent=ORG, namespaces=frozenset({"ns-a", "ns-c"})),
    ]
    h.clock.advance(60)
    h.layer.set_policy(QuotaPolicy({t.name: t for t in moved}))
    assert (h.gpus(TEAM_A), h.gpus(TEAM_B), h.gpus(ORG)) == (0, 3000, 3000)
    assert h.layer.started == started  # when they began does not move
    h.cache.remove_pod(gpu_pod("a", "ns-a", 2).node("n1").view())
    assert (h.gpus(TEAM_B), h.layer.in_use.get(GPU)) == (1000, 1000)


def test_capacity_follows_nodes_added_and_removed() -> None:
    h = harness(node_gpus=8)
    assert h.layer.capacity()[GPU] == 8000
    assert h.layer.capacity()[flavor_key("H100")] == 8000
    h.cache.add_node(make_node("n2").gpus(4).view())
    assert h.layer.capacity()[GPU] == 12000
    h.cache.update_node(make_node("n2").gpus(4).view(), make_node("n2").gpus(2).view())
    assert h.layer.capacity()[GPU] == 10000
    h.cache.remove_node(make_node("n1").view())
    assert h.layer.capacity()[GPU] == 2000
    assert flavor_key("H100") not in h.layer.capacity()


def test_a_detached_layer_has_no_capacity() -> None:
    layer = TenantLayer(policy(), FakeClock(), lambda p: True)
    assert layer.capacity() == {}


@pytest.mark.parametrize(
    ("a_gpus", "b_gpus", "first"),
    [(4, 0, TEAM_B), (0, 4, TEAM_A), (1, 3, TEAM_A)],
    ids=[
        "the idle team ranks before the busy one",
        "the other way round when usage is swapped",
        "the lighter of two busy teams ranks first",
    ],
)
def test_the_rank_prefers_the_team_with_less_usage(a_gpus: int, b_gpus: int, first: str) -> None:
    h = harness(node_gpus=16)
    for namespace, gpus in [("ns-a", a_gpus), ("ns-b", b_gpus)]:
        if gpus:
            h.cache.add_pod(gpu_pod(f"run-{namespace}", namespace, gpus).node("n1").view())
    rank_a = h.layer.rank(QueuedPod(gpu_pod("x", "ns-a", 1).view(), 0.0, 0))
    rank_b = h.layer.rank(QueuedPod(gpu_pod("y", "ns-b", 1).view(), 0.0, 0))
    assert (rank_a < rank_b) == (first == TEAM_A)


def test_a_pod_of_no_tenant_ranks_after_every_tenant() -> None:
    h = harness(node_gpus=16)
    h.cache.add_pod(gpu_pod("busy", "ns-a", 16).node("n1").view())
    busy = h.layer.rank(QueuedPod(gpu_pod("x", "ns-a", 1).view(), 0.0, 0))
    stray = h.layer.rank(QueuedPod(gpu_pod("s", "elsewhere", 1).view(), 0.0, 0))
    assert busy < stray


def test_guarantees_above_capacity_are_warned_once_until_nodes_change_it() -> None:
    tenants = {
        "a": Tenant("a", guaranteed={GPU: 6000}),
        "b": Tenant("b", guaranteed={GPU: 6000}),
    }
    h = harness(QuotaPolicy(tenants), node_gpus=8)
    first = h.layer.capacity_warnings()
    assert first == [
        "guaranteed quota sums to 12 nvidia.com/gpu but the cluster has 8 nvidia.com/gpu: "
        "not every guarantee can be met at once"
    ]
    assert h.layer.capacity_warnings() == []  # said once
    h.cache.add_node(make_node("n2").gpus(4).view())
    assert h.layer.capacity_warnings() == []  # 12 of 12: honoured
    h.cache.remove_node(make_node("n2").view())
    assert h.layer.capacity_warnings() == first  # short again: said again
