"""Hypothesis properties of the core with the default profile (DESIGN.md invariants)."""

from __future__ import annotations

from collections import defaultdict

from hypothesis import given, settings
from hypothesis import strategies as st

from batchsched.framework.registry import assemble_profile
from batchsched.framework.runner import ProfileRunner
from batchsched.model.node import NodeView
from batchsched.model.pod import PodView
from batchsched.plugins.registry import DEFAULT_PLUGINS, default_registry
from batchsched.snapshot import Snapshot
from batchsched.whatif import place_pending
from tests.builders import make_node, make_pod

PROFILE = assemble_profile(default_registry(), "gpu-scheduler", DEFAULT_PLUGINS, {})
ZONES = ("z1", "z2", "z3")


@st.composite
def nodes(draw: st.DrawFn) -> list[NodeView]:
    count = draw(st.integers(1, 8))
    found = []
    for i in range(count):
        b = (
            make_node(f"n{i}")
            .cpu(f"{draw(st.integers(1, 16))}")
            .memory(f"{draw(st.integers(1, 64))}Gi")
            .pods(draw(st.integers(1, 10)))
            .zone(draw(st.sampled_from(ZONES)))
        )
        gpus = draw(st.sampled_from((0, 0, 4, 8)))
        if gpus:
            b.gpus(gpus)
        if draw(st.booleans()):
            b.taint("dedicated", draw(st.sampled_from(("gpu", "infra"))))
        found.append(b.view())
    return found


@st.composite
def pods(draw: st.DrawFn) -> list[PodView]:
    count = draw(st.integers(1, 25))
    found = []
    for i in range(count):
        b = (
            make_pod(f"p{i}")
            .cpu(f"{draw(st.integers(0, 4000))}m")
            .memory(f"{draw(st.integers(0, 8192))}Mi")
            .priority(draw(st.integers(0, 3)))
            .label("app", draw(st.sampled_from(("a", "b"))))
        )
        gpus = draw(st.sampled_from((0, 0, 1, 2, 8)))
        if gpus:
            b.gpus(gpus)
        if draw(st.booleans()):
            b.toleration("dedicated", draw(st.sampled_from(("gpu", "infra"))), "NoSchedule")
        if draw(st.integers(0, 5)) == 0:
            b.spread(1, "topology.kubernetes.io/zone", match_labels={"app": "a"})
        if draw(st.integers(0, 5)) == 0:
            b.host_port(8080)
        found.append(b.view())
    return found


def usage(snapshot: Snapshot) -> dict[str, dict[str, int]]:
    used: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for info in snapshot.nodes:
        for pod in info.pods.values():
            for name in pod.requests.names():
                used[info.name][name] += pod.requests.get(name)
            used[info.name]["pods"] += 1
    return used


@settings(max_examples=150, deadline=None)
@given(nodes(), pods(), st.integers(0, 3))
def test_no_node_is_ever_over_committed(
    node_views: list[NodeView], pod_views: list[PodView], seed: int
) -> None:
    snapshot = Snapshot(node_views)
    runner = ProfileRunner(PROFILE, seed)
    for pod in pod_views:
        runner.schedule_one(pod, snapshot)
    for info in snapshot.nodes:
        alloc = info.node.allocatable
        for name, amount in usage(snapshot)[info.name].items():
            assert amount <= alloc.get(name), f"{info.name} over-committed on {name}"


@settings(max_examples=75, deadline=None)
@given(nodes(), pods(), st.integers(0, 1000))
def test_the_same_snapshot_and_seed_give_the_same_placements(
    node_views: list[NodeView], pod_views: list[PodView], seed: int
) -> None:
    first = place_pending(node_views, pod_views, {"gpu-scheduler": PROFILE}, seed=seed)
    second = place_pending(node_views, pod_views, {"gpu-scheduler": PROFILE}, seed=seed)
    assert first.placements == second.placements and first.reasons == second.reasons


@settings(max_examples=150, deadline=None)
@given(nodes(), pods())
def test_failure_reasons_account_for_every_node(
    node_views: list[NodeView], pod_views: list[PodView]
) -> None:
    snapshot = Snapshot(node_views)
    runner = ProfileRunner(PROFILE, 0)
    for pod in pod_views:
        result = runner.schedule_one(pod, snapshot)
        if result.failure is None or result.failure.pre_filter_message:
            continue
        assert set(result.failure.node_statuses) == {n.name for n in node_views}
        assert all(s.reasons for s in result.failure.node_statuses.values())
        counted = sum(result.failure.histogram().values())
        assert counted >= len(node_views)
        assert result.message().startswith(f"0/{len(node_views)} nodes are available: ")
