"""The tenant layer's shortcuts (issue #17) decide what the plain arithmetic decides: a policy
that can refuse nothing skipping `check_admission`, remembered per-pod demands and
admissions, and a watch update that counts what the pod already counted leaving the ledger
alone. A layer with the shortcuts and one without watch the same cache through random
assume / confirm / update / remove / forget / reload sequences; usage, history and every
quota answer must agree after each step."""

from __future__ import annotations

import math
from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from batchsched.cache import SchedulerCache
from batchsched.clock import FakeClock
from batchsched.model.pod import PodView
from batchsched.tenants import TenantLayer
from queues.demand import PRODUCT_LABEL, pod_demand
from queues.model import GPU, QUEUE_LABEL, QuotaPolicy, Tenant, single_tenant_policy
from tests.builders import PodBuilder, make_node, make_pod

NODES = ("h100-node", "a100-node", "plain-node")
NAMESPACES = ("ns-a", "ns-b", "ns-x")


class PlainLayer(TenantLayer):
    """The layer as it was before the shortcuts: every answer from the quota arithmetic."""

    def recounted(self, old: PodView, new: PodView) -> None:
        self.uncounted(old)
        self.counted(new)

    def _demand(self, pod: PodView, product: str | None) -> dict[str, int]:
        return pod_demand(pod, product, self._devices(pod))

    def refuses(self, pods: Sequence[PodView]) -> str:
        self._last = None
        admission = self.admit(pods)
        return "" if admission.admitted else admission.reason

    def refuses_placed(self, placed: Sequence[tuple[PodView, str]]) -> str:
        self._last = None
        admission = self.admit_placed(placed)
        return "" if admission.admitted else admission.reason


def restricted(
    limit: bool = False, lend: bool = True, floor: int | None = None, default: str | None = None
) -> QuotaPolicy:
    """Two teams under one organisation; with `limit` a max on team a's GPUs and H100s, with
    `lend` False team b keeps its guarantee from borrowers, `floor` the organisation's
    lowest priority. Each alone makes the policy able to refuse."""
    maxes = {GPU: 6000, f"{GPU}@H100": 3000} if limit else {}
    tenants = [
        Tenant("org", min_priority=floor),
        Tenant("org/a", parent="org", max=maxes, namespaces=frozenset({"ns-a"}), queues=_QA),
        Tenant(
            "org/b",
            parent="org",
            guaranteed={GPU: 4000},
            lend_idle=lend,
            namespaces=frozenset({"ns-b"}),
        ),
    ]
    return QuotaPolicy({t.name: t for t in tenants}, default_tenant=default)


_QA = frozenset({"qa"})
POLICIES = (
    single_tenant_policy(),
    QuotaPolicy({"only": Tenant("only", namespaces=frozenset({"ns-a"}))}),  # no default
    restricted(default="org/b"),  # refuses nothing but pods of no tenant
    restricted(limit=True),
    restricted(lend=False, default="org/b"),
    restricted(floor=0),
    restricted(limit=True, lend=False, floor=0, default="org/a"),
)

pod_specs = st.tuples(
    st.sampled_from(NAMESPACES),
    st.integers(0, 3),  # GPUs
    st.integers(-1, 2),  # priority
    st.booleans(),  # labelled with team a's queue
)


def build(index: int, spec: tuple[str, int, int, bool]) -> PodBuilder:
    namespace, gpus, priority, queue = spec
    pod = make_pod(f"p{index}", "ns-x").gpus(gpus).priority(priority)
    pod._obj["metadata"]["namespace"] = namespace  # one uid per index, whatever the namespace
    pod._obj["metadata"]["uid"] = f"uid-{index}"
    return pod.label(QUEUE_LABEL, "qa") if queue else pod


steps = st.lists(
    st.tuples(
        st.sampled_from(["assume", "confirm", "update", "remove", "forget", "reload", "tick"]),
        st.integers(0, 5),  # which pod
        st.sampled_from(NODES),
        pod_specs,
        st.integers(0, len(POLICIES) - 1),
    ),
    max_size=40,
)


def setup(policy: QuotaPolicy) -> tuple[SchedulerCache, TenantLayer, PlainLayer, FakeClock]:
    clock = FakeClock()
    cache = SchedulerCache(clock)
    ours = lambda pod: pod.scheduler_name == "gpu-scheduler"  # noqa: E731
    fast, plain = TenantLayer(policy, clock, ours), PlainLayer(policy, clock, ours)
    for layer in (fast, plain):
        layer.attach(cache.snapshot)
        cache.watchers.append(layer)
    for name, product in zip(NODES, ("H100", "A100", None), strict=True):
        node = make_node(name).gpus(8).cpu("64").memory("256Gi")
        cache.add_node((node.label(PRODUCT_LABEL, product) if product else node).view())
    return cache, fast, plain, clock


def agree(fast: TenantLayer, plain: PlainLayer, probes: Sequence[PodView], now: float) -> None:
    assert fast.in_use == plain.in_use
    assert fast.started == plain.started
    for tenant in sorted(set(fast.ledger.tenants()) | set(plain.ledger.tenants())):
        assert fast.ledger.current(tenant) == plain.ledger.current(tenant)
        mine, theirs = fast.ledger.effective(tenant, now), plain.ledger.effective(tenant, now)
        assert set(mine) == set(theirs)
        assert all(math.isclose(mine[r], theirs[r], rel_tol=1e-9) for r in mine)
    for pod in probes:
        assert fast.refuses([pod]) == plain.refuses([pod])
        for node in NODES:
            assert fast.refuses_placed([(pod, node)]) == plain.refuses_placed([(pod, node)])
    assert fast.refuses(probes) == plain.refuses(probes)


@settings(max_examples=150, deadline=None)
@given(
    st.integers(0, len(POLICIES) - 1),
    steps,
    st.lists(pod_specs, min_size=1, max_size=4),
)
def test_the_shortcuts_count_and_admit_as_the_plain_arithmetic_does(
    first: int,
    sequence: list[tuple[str, int, str, tuple[str, int, int, bool], int]],
    probe_specs: list[tuple[str, int, int, bool]],
) -> None:
    cache, fast, plain, clock = setup(POLICIES[first])
    probes = [build(100 + i, spec).view() for i, spec in enumerate(probe_specs)]
    pods: dict[int, PodBuilder] = {}
    for op, index, node, spec, policy in sequence:
        pod = pods.setdefault(index, build(index, spec))
        if op == "assume" and not cache.is_assumed(f"uid-{index}"):
            if cache.snapshot.node_of(f"uid-{index}") is None:
                cache.assume(pod.view(), node)
        elif op == "confirm":
            cache.add_pod(pod.node(node).view())  # a fresh parse, as the watch gives
        elif op == "update":  # the watch shows it changed (labels, requests)
            pods[index] = build(index, spec)
            cache.add_pod(pods[index].node(node).view())
        elif op == "remove":
            cache.remove_pod(pod.view())
        elif op == "forget":
            cache.forget(pod.view())
        elif op == "reload":
            for layer in (fast, plain):
                layer.set_policy(POLICIES[policy])
        elif op == "tick":
            clock.advance(60.0 * (index + 1))
        agree(fast, plain, probes, clock.now())
