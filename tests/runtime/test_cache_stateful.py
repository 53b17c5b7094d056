"""Random event sequences through SchedulerCache, checking its accounting after every step."""

from __future__ import annotations

from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from batchsched.cache import SchedulerCache
from batchsched.clock import FakeClock
from batchsched.model.node import NodeView
from batchsched.model.pod import PodView
from tests.builders import make_node, make_pod
from tests.runtime.test_cache import accounting_errors

TTL = 30.0
NODES = ("n0", "n1", "n2")
PODS = tuple(f"p{i}" for i in range(6))
ANTI = {
    "requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": "kubernetes.io/hostname"}
    ]
}

node_names = st.sampled_from(NODES)
pod_names = st.sampled_from(PODS)
node_variants = st.tuples(st.sampled_from(("2", "8")), st.booleans(), st.booleans())
pod_variants = st.tuples(
    st.sampled_from(("100m", "1", "3")),
    st.sampled_from((0, 1, 2)),
    st.sampled_from((0, 80)),
    st.booleans(),
)


def node_view(name: str, variant: tuple[str, bool, bool]) -> NodeView:
    cpu, has_image, prefer_no_schedule = variant
    builder = make_node(name).cpu(cpu).gpus(4)
    if has_image:
        builder.image([f"img-{name}:1", "shared:1"], 100)
    if prefer_no_schedule:
        builder.taint("spot", "", "PreferNoSchedule")
    return builder.view()


def pod_view(
    name: str, variant: tuple[str, int, int, bool], node: str = "", **fields: Any
) -> PodView:
    cpu, gpus, port, anti = variant
    builder = make_pod(name).cpu(cpu).label("app", "x")
    if gpus:
        builder.gpus(gpus)
    if port:
        builder.host_port(port)
    if anti:
        builder.affinity("podAntiAffinity", ANTI)
    if node:
        builder.node(node)
    for path, value in fields.items():
        builder.set(path.replace("__", "."), value)
    return builder.view()


def uid(name: str) -> str:
    return f"uid-default-{name}"


class CacheMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.clock = FakeClock()
        self.cache = SchedulerCache(self.clock, assume_ttl=TTL)
        self.nodes: dict[str, NodeView] = {}
        self.node_of: dict[str, str] = {}  # every pod the cache should know: uid -> node
        self.versions: dict[str, PodView] = {}
        self.assumed: dict[str, float | None] = {}  # uid -> deadline

    # Nodes

    @rule(name=node_names, variant=node_variants)
    def add_node(self, name: str, variant: tuple[str, bool, bool]) -> None:
        self.nodes[name] = node_view(name, variant)
        self.cache.add_node(self.nodes[name])

    @precondition(lambda self: self.nodes)
    @rule(data=st.data(), variant=node_variants)
    def update_node(self, data: st.DataObject, variant: tuple[str, bool, bool]) -> None:
        name = data.draw(st.sampled_from(sorted(self.nodes)))
        old, self.nodes[name] = self.nodes[name], node_view(name, variant)
        self.cache.update_node(old, self.nodes[name])

    @precondition(lambda self: self.nodes)
    @rule(data=st.data())
    def remove_node(self, data: st.DataObject) -> None:
        name = data.draw(st.sampled_from(sorted(self.nodes)))
        self.cache.remove_node(self.nodes.pop(name))

    # Bound pods from the watch (an add of an assumed pod confirms it)

    @rule(name=pod_names, node=node_names, variant=pod_variants)
    def add_pod(self, name: str, node: str, variant: tuple[str, int, int, bool]) -> None:
        self._bound(pod_view(name, variant, node))

    @precondition(lambda self: self.node_of)
    @rule(data=st.data(), variant=pod_variants, deleting=st.booleans())
    def update_pod(
        self, data: st.DataObject, variant: tuple[str, int, int, bool], deleting: bool
    ) -> None:
        key = data.draw(st.sampled_from(sorted(self.node_of)))
        old = self.versions[key]
        stamp = "2024-01-01T00:00:00Z" if deleting else None
        new = pod_view(old.name, variant, self.node_of[key], metadata__deletionTimestamp=stamp)
        self.cache.update_pod(old, new)
        self.assumed.pop(key, None)  # the watch showing the pod bound confirms an assumed one
        self._record(new)

    @precondition(lambda self: self.node_of)
    @rule(data=st.data(), phase=st.sampled_from(("Succeeded", "Failed")))
    def finish_pod(self, data: st.DataObject, phase: str) -> None:
        key = data.draw(st.sampled_from(sorted(self.node_of)))
        old = self.versions[key]
        new = pod_view(old.name, ("1", 0, 0, False), self.node_of[key], status__phase=phase)
        self.cache.update_pod(old, new)
        self._gone(key)

    @rule(name=pod_names, node=node_names)
    def remove_pod(self, name: str, node: str) -> None:
        self.cache.remove_pod(make_pod(name).node(node).view())
        self._gone(uid(name))

    @precondition(lambda self: self.assumed)
    @rule(data=st.data(), elsewhere=st.booleans())
    def confirm(self, data: st.DataObject, elsewhere: bool) -> None:
        key = data.draw(st.sampled_from(sorted(self.assumed)))
        node = data.draw(node_names) if elsewhere else self.node_of[key]
        pod = self.versions[key]
        self._bound(pod_view(pod.name, _variant_of(pod), node))

    # Pods the scheduler places

    @precondition(lambda self: self.nodes)
    @rule(data=st.data(), name=pod_names, variant=pod_variants, reserved=st.booleans())
    def assume(
        self, data: st.DataObject, name: str, variant: tuple[str, int, int, bool], reserved: bool
    ) -> None:
        if uid(name) in self.node_of:
            return
        node = data.draw(st.sampled_from(sorted(self.nodes)))
        pending = pod_view(name, variant)
        if reserved:  # ProfileRunner.schedule_one reserves into the same snapshot first
            self.cache.snapshot.assume(pending, node)
        bound = self.cache.assume(pending, node)
        assert bound.node_name == node
        self._record(bound)
        self.assumed[bound.uid] = None

    @precondition(lambda self: any(d is None for d in self.assumed.values()))
    @rule(data=st.data())
    def finish_binding(self, data: st.DataObject) -> None:
        waiting = sorted(k for k, d in self.assumed.items() if d is None)
        key = data.draw(st.sampled_from(waiting))
        self.cache.finish_binding(self.versions[key])
        self.assumed[key] = self.clock.now() + TTL

    @precondition(lambda self: self.assumed)
    @rule(data=st.data(), unreserved=st.booleans())
    def forget(self, data: st.DataObject, unreserved: bool) -> None:
        key = data.draw(st.sampled_from(sorted(self.assumed)))
        if unreserved and self.cache.snapshot.node_of(key) is not None:
            self.cache.snapshot.forget(self.versions[key])  # the runner's unreserve ran first
        self.cache.forget(self.versions[key])
        self._gone(key)

    @rule(seconds=st.sampled_from((0.0, 5.0, 20.0, TTL, TTL + 1)))
    def advance_and_cleanup(self, seconds: float) -> None:
        self.clock.advance(seconds)
        now = self.clock.now()
        due = {k for k, d in self.assumed.items() if d is not None and now > d}
        expired = self.cache.cleanup_expired()
        assert {p.uid for p in expired} == due
        assert all(p.node_name == self.node_of[p.uid] for p in expired)
        for key in due:
            self._gone(key)

    # Model bookkeeping

    def _bound(self, pod: PodView) -> None:
        self.cache.add_pod(pod)
        self.assumed.pop(pod.uid, None)
        self._record(pod)

    def _record(self, pod: PodView) -> None:
        self.node_of[pod.uid] = pod.node_name
        self.versions[pod.uid] = pod

    def _gone(self, key: str) -> None:
        self.node_of.pop(key, None)
        self.versions.pop(key, None)
        self.assumed.pop(key, None)

    # Invariants

    @invariant()
    def sums_match_the_pods(self) -> None:
        assert accounting_errors(self.cache.snapshot) == []

    @invariant()
    def each_known_pod_counts_once_on_its_node_while_the_node_exists(self) -> None:
        snapshot = self.cache.snapshot
        counted = {key: info.name for info in snapshot.nodes for key in info.pods}
        expected = {k: n for k, n in self.node_of.items() if n in self.nodes}
        assert counted == expected
        for info in snapshot.nodes:
            for key, pod in info.pods.items():
                assert pod.requests == self.versions[key].requests

    @invariant()
    def assumed_pods_are_the_unconfirmed_ones(self) -> None:
        for key in PODS:
            assert self.cache.is_assumed(uid(key)) == (uid(key) in self.assumed)

    @invariant()
    def node_indices_match_the_nodes(self) -> None:
        snapshot = self.cache.snapshot
        assert sorted(info.name for info in snapshot.nodes) == sorted(self.nodes)
        images: dict[str, int] = {}
        for node in self.nodes.values():
            for image in node.image_sizes:
                images[image] = images.get(image, 0) + 1
        assert snapshot.image_node_counts == images
        prefer = any(t.effect == "PreferNoSchedule" for n in self.nodes.values() for t in n.taints)
        assert snapshot.has_prefer_no_schedule_taints == prefer
        assert snapshot.pods_with_affinity == sum(i.pods_with_affinity for i in snapshot.nodes)
        assert snapshot.pods_with_required_anti_affinity == sum(
            i.pods_with_required_anti_affinity for i in snapshot.nodes
        )


def _variant_of(pod: PodView) -> tuple[str, int, int, bool]:
    cpu = {100: "100m", 1000: "1", 3000: "3"}[pod.requests.milli_cpu]
    gpus = pod.requests.scalar.get("nvidia.com/gpu", 0)
    port = pod.host_ports[0].port if pod.host_ports else 0
    return cpu, gpus, port, pod.pod_anti_affinity is not None


CacheMachine.TestCase.settings = settings(max_examples=200, stateful_step_count=40, deadline=None)
TestCacheMachine = CacheMachine.TestCase
