"""Gangs packed into one network-topology domain by the workload cycle (cycle/domains.py)."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from batchsched.cycle.cycle import schedule_workload
from batchsched.cycle.decision import Bind, Decision, Reject, Wait, Why
from batchsched.cycle.domains import DomainChoice, DomainRefusal, choose_domain
from batchsched.cycle.policies import SnapshotHandle
from batchsched.cycle.workload import Workload
from batchsched.framework.registry import EnabledPlugin, assemble_profile
from batchsched.framework.runner import ProfileRunner
from batchsched.gang.core import Reservation
from batchsched.gang.topology import CLIQUE_LABEL, RACK_LABEL, TopologyRequest
from batchsched.model.pod import PodView
from batchsched.plugins.registry import DEFAULT_PLUGINS, default_registry
from batchsched.snapshot import Snapshot
from tests.builders import NodeBuilder, PodBuilder, make_node, make_pod, snapshot_of
from tests.gang.test_gang_core import group, members

REQUIRED_RACK = TopologyRequest(RACK_LABEL, True)
PREFERRED_RACK = TopologyRequest(RACK_LABEL, False)


def profile(**args: object) -> ProfileRunner:
    config = {"TopologyDomains": dict(args)} if args else {}
    built = assemble_profile(default_registry(), "gpu-scheduler", DEFAULT_PLUGINS, config)
    return ProfileRunner(built)


def gpu_node(name: str, rack: str | None, clique: str | None = None, gpus: int = 8) -> NodeBuilder:
    node = make_node(name).gpus(gpus).cpu("64").memory("512Gi")
    if rack is not None:
        node.label(RACK_LABEL, rack)
    if clique is not None:
        node.label(CLIQUE_LABEL, clique)
    return node


def racks(*sizes: int) -> list[NodeBuilder]:
    """Racks r0, r1, ... of the given node counts; nodes r0n0, r0n1, ..."""
    return [gpu_node(f"r{r}n{n}", f"r{r}") for r, size in enumerate(sizes) for n in range(size)]


def gang_pods(
    name: str, count: int, gpus: int, cpu: str = "1", host_port: int | None = None
) -> tuple[PodView, ...]:
    found = []
    for i in range(count):
        pod = make_pod(f"{name}-{i}", "ml").gpus(gpus).cpu(cpu)
        if host_port is not None:
            pod.host_port(host_port)
        found.append(pod.label("scheduling.x-k8s.io/pod-group", name).view())
    return tuple(found)


def full(node: str, gpus: int = 8) -> PodBuilder:
    return make_pod(f"used-{node}").gpus(gpus).node(node)


def gang(
    name: str,
    count: int,
    topology: TopologyRequest | None,
    gpus: int = 8,
    min_member: int | None = None,
    pods: tuple[PodView, ...] | None = None,
    reserved: tuple[Reservation, ...] = (),
    bound: int = 0,
) -> Workload:
    view = dataclasses.replace(group(name, min_member or count), topology=topology)
    pods = pods if pods is not None else members(name, count, gpus)
    return Workload(f"ml/{name}", pods, gang=True, group=view, reserved=reserved, bound=bound)


def schedule(snap: Snapshot, workload: Workload, runner: ProfileRunner | None = None) -> Decision:
    return schedule_workload(SnapshotHandle(snap, runner or profile()), workload)


def label_of(snap: Snapshot, node: str, level: str = RACK_LABEL) -> str | None:
    info = snap.get(node)
    assert info is not None
    return info.node.labels.get(level)


def domains_used(
    snap: Snapshot, placed: Sequence[Reservation], level: str = RACK_LABEL
) -> set[str | None]:
    return {label_of(snap, r.node, level) for r in placed}


def used_gpus(snap: Snapshot) -> int:
    return sum(info.req_scalar.get("nvidia.com/gpu", 0) for info in snap.nodes)


# Required


@pytest.mark.parametrize(
    ("sizes", "used", "count", "rack"),
    [
        pytest.param((4, 4), [], 3, "r0", id="required rack: the gang fits in one rack"),
        pytest.param(
            (4, 4, 4),
            ["r0n0", "r0n1", "r1n0"],
            3,
            "r1",
            id="required rack: the rack it fits in tightest, not the emptiest",
        ),
        pytest.param((2, 8), [], 3, "r1", id="required rack: the only rack big enough"),
    ],
)
def test_a_required_rack_gang_is_bound_inside_one_rack(
    sizes: tuple[int, ...], used: list[str], count: int, rack: str
) -> None:
    snap = snapshot_of(racks(*sizes), [full(n) for n in used])
    decision = schedule(snap, gang("train", count, REQUIRED_RACK))
    assert isinstance(decision, Bind) and len(decision.placed) == count
    assert domains_used(snap, decision.placed) == {rack}
    assert used_gpus(snap) == 8 * (count + len(used))


def test_a_required_rack_gang_goes_to_a_clique_inside_the_rack_when_one_takes_it() -> None:
    """Rack r0 has cliques c0 (2 nodes, one used) and c1 (2 free nodes); rack r1 is empty.
    The 2-node gang fits r1 as a rack and c1 as a clique: the clique wins, and it lies in
    one rack, so the requirement holds."""
    nodes = [
        gpu_node("a0", "r0", "c0"),
        gpu_node("a1", "r0", "c0"),
        gpu_node("a2", "r0", "c1"),
        gpu_node("a3", "r0", "c1"),
        gpu_node("b0", "r1", "c2"),
        gpu_node("b1", "r1", "c3"),
        gpu_node("b2", "r1", "c4"),
    ]
    snap = snapshot_of(nodes, [full("a0")])
    decision = schedule(snap, gang("train", 2, REQUIRED_RACK))
    assert isinstance(decision, Bind)
    assert sorted(r.node for r in decision.placed) == ["a2", "a3"]


def test_a_clique_that_spans_two_racks_does_not_count_for_a_required_rack() -> None:
    nodes = [gpu_node("a0", "r0", "c0"), gpu_node("b0", "r1", "c0"), gpu_node("b1", "r1", "c1")]
    snap = snapshot_of(nodes, [])
    decision = schedule(snap, gang("train", 2, REQUIRED_RACK))
    assert isinstance(decision, Bind)
    assert sorted(r.node for r in decision.placed) == ["b0", "b1"]


def test_capacity_spread_over_racks_is_refused_with_the_closest_rack_named() -> None:
    # 4 racks of 4 nodes, 2 used in each: 8 free nodes, but no rack has the 3 the gang needs.
    snap = snapshot_of(racks(4, 4, 4, 4), [full(f"r{r}n{n}") for r in range(4) for n in (0, 1)])
    decision = schedule(snap, gang("train", 3, REQUIRED_RACK))
    assert decision == Reject(
        Why.UNSCHEDULABLE,
        "gang ml/train requires one topology.batchsched.io/rack domain: "
        "0 of 4 racks fit its 3 pods (best: r0, 2 of 3)",
        {},
    )
    assert used_gpus(snap) == 64  # nothing held


def test_a_rack_whose_capacity_fits_but_whose_filters_do_not_is_refused_by_its_trial() -> None:
    # Each member asks for host port 8080: one per node, though a node's GPUs hold eight.
    snap = snapshot_of(racks(2, 2))
    pods = gang_pods("p", 3, gpus=1, host_port=8080)
    decision = schedule(snap, gang("p", 3, REQUIRED_RACK, pods=pods))
    assert isinstance(decision, Reject) and decision.why is Why.UNSCHEDULABLE
    assert decision.message == (
        "gang ml/p requires one topology.batchsched.io/rack domain: "
        "0 of 2 racks fit its 3 pods (best: r0, 2 of 3)"
    )
    # Each member's own reason, from the closest trial.
    reasons = [r.message() for r in decision.results.values() if not r.placed]
    outside = "node(s) outside the gang's topology.batchsched.io/rack domain r0"
    assert reasons and outside in reasons[0]
    assert used_gpus(snap) == 0


def test_nodes_without_the_label_are_no_domain_even_with_room() -> None:
    snap = snapshot_of([gpu_node(f"x{i}", None) for i in range(8)] + racks(2))
    fits = schedule(snap, gang("small", 2, REQUIRED_RACK))
    assert isinstance(fits, Bind) and domains_used(snap, fits.placed) == {"r0"}
    refused = schedule(snap, gang("big", 3, REQUIRED_RACK))
    assert isinstance(refused, Reject)
    assert "0 of 1 racks fit its 3 pods (best: r0, 0 of 3)" in refused.message


def test_a_cluster_without_the_label_says_so() -> None:
    snap = snapshot_of([gpu_node(f"x{i}", None) for i in range(4)])
    decision = schedule(snap, gang("train", 2, REQUIRED_RACK))
    assert isinstance(decision, Reject) and decision.message == (
        "gang ml/train requires one topology.batchsched.io/rack domain: "
        "no node has the label topology.batchsched.io/rack"
    )


def test_a_required_level_that_is_not_configured_is_still_honoured() -> None:
    nodes = [gpu_node(f"n{i}", None).label("example.com/pod", f"p{i % 2}") for i in range(6)]
    snap = snapshot_of(nodes)
    decision = schedule(snap, gang("train", 3, TopologyRequest("example.com/pod", True)))
    assert isinstance(decision, Bind)
    assert domains_used(snap, decision.placed, "example.com/pod") == {"p0"}


def test_best_fit_keeps_the_big_rack_whole_for_a_later_big_gang() -> None:
    snap = snapshot_of(racks(4, 2))
    small = schedule(snap, gang("small", 2, REQUIRED_RACK))
    assert isinstance(small, Bind) and domains_used(snap, small.placed) == {"r1"}
    big = schedule(snap, gang("big", 4, REQUIRED_RACK))
    assert isinstance(big, Bind) and domains_used(snap, big.placed) == {"r0"}


def test_an_elastic_gang_goes_where_most_members_fit_placed_again_as_its_trial_was() -> None:
    # minMember 2 of 4: r1 fits the quorum tightest (2 members), r0 takes 3, r2 2; no rack
    # takes all 4, so all three are tried and r0, not the last tried, is placed again.
    snap = snapshot_of(racks(3, 2, 8), [full(f"r2n{i}", 4) for i in range(2, 8)])
    workload = gang("e", 4, REQUIRED_RACK, min_member=2)
    runner = profile()
    before = runner.mark()
    choice = choose_domain(SnapshotHandle(snap, runner), workload, runner)
    assert isinstance(choice, DomainChoice) and choice.kept is None and choice.tried == 3
    runner.rewind(before)
    decision = schedule(snap, workload, runner)
    assert isinstance(decision, Bind) and len(decision.unplaced) == 1
    assert domains_used(snap, decision.placed) == {"r0"}
    assert tuple((r.pod.uid, r.node) for r in decision.placed) == choice.trial


# Members already placed fix the domain


def test_reserved_members_fix_the_domain_even_where_another_fits_tighter() -> None:
    snap = snapshot_of(racks(4, 2))
    first = members("train", 1)
    reserved = (Reservation(snap.assume(first[0], "r0n0"), "r0n0"),)
    rest = members("train", 1, start=1)
    decision = schedule(snap, gang("train", 2, REQUIRED_RACK, pods=rest, reserved=reserved))
    assert isinstance(decision, Bind) and domains_used(snap, decision.placed) == {"r0"}


def test_bound_members_fix_the_domain() -> None:
    bound = make_pod("train-0", "ml").gpus(8).label("scheduling.x-k8s.io/pod-group", "train")
    snap = snapshot_of(racks(3, 2), [bound.node("r0n0")])
    rest = members("train", 2, start=1)
    decision = schedule(snap, gang("train", 3, REQUIRED_RACK, pods=rest, bound=1))
    assert isinstance(decision, Bind) and domains_used(snap, decision.placed) == {"r0"}


def test_a_domain_fixed_by_members_without_room_for_the_rest_is_refused() -> None:
    bound = make_pod("train-0", "ml").gpus(8).label("scheduling.x-k8s.io/pod-group", "train")
    snap = snapshot_of(racks(2, 4), [bound.node("r0n0")])
    rest = members("train", 2, start=1)
    decision = schedule(snap, gang("train", 3, REQUIRED_RACK, pods=rest, bound=1))
    assert isinstance(decision, Reject) and decision.message == (
        "gang ml/train requires one topology.batchsched.io/rack domain: its members already "
        "placed are in r0, which holds 2 of 3"
    )


def test_members_already_placed_in_two_domains_are_refused() -> None:
    label = ("scheduling.x-k8s.io/pod-group", "train")
    bound = [make_pod(f"train-{i}", "ml").gpus(8).label(*label).node(f"r{i}n0") for i in (0, 1)]
    snap = snapshot_of(racks(2, 2), bound)
    rest = members("train", 1, start=2)
    decision = schedule(snap, gang("train", 3, REQUIRED_RACK, pods=rest, bound=2))
    assert isinstance(decision, Reject) and decision.message.endswith(
        "its members already placed are not all in one topology.batchsched.io/rack domain"
    )


def test_members_that_wait_for_the_rest_are_reserved_in_a_domain_with_room_for_them() -> None:
    snap = snapshot_of(racks(4, 2))
    decision = schedule(snap, gang("late", 2, REQUIRED_RACK, min_member=4))
    assert isinstance(decision, Wait) and domains_used(snap, decision.placed) == {"r0"}


# Preferred


CLIQUES = [
    gpu_node(f"{rack}{c}{n}", rack, f"{rack}{c}")
    for rack in ("a", "b")
    for c in ("x", "y")
    for n in range(2)
]


@pytest.mark.parametrize(
    ("count", "level", "domains"),
    [
        pytest.param(2, CLIQUE_LABEL, 1, id="preferred rack: one clique when it fits"),
        pytest.param(3, RACK_LABEL, 1, id="preferred rack: else one rack"),
        pytest.param(5, RACK_LABEL, 2, id="preferred rack: else anywhere"),
    ],
)
def test_a_preferred_level_takes_the_tightest_domain_that_fits(
    count: int, level: str, domains: int
) -> None:
    snap = snapshot_of(CLIQUES)
    decision = schedule(snap, gang("train", count, PREFERRED_RACK))
    assert isinstance(decision, Bind) and len(decision.placed) == count
    assert len(domains_used(snap, decision.placed, level)) == domains


def test_a_preferred_level_that_is_not_configured_is_tried_alone_then_anywhere() -> None:
    nodes = [gpu_node(f"n{i}", None).label("example.com/pod", f"p{i % 2}") for i in range(6)]
    snap = snapshot_of(nodes)
    request = TopologyRequest("example.com/pod", False)
    one = schedule(snap, gang("one", 3, request))
    assert isinstance(one, Bind) and len(domains_used(snap, one.placed, "example.com/pod")) == 1
    anywhere = schedule(snap, gang("two", 3, request, gpus=4))
    assert isinstance(anywhere, Bind) and len(anywhere.placed) == 3


# Bounded work


def test_a_cluster_of_500_racks_tries_at_most_k_domains() -> None:
    # Every rack's capacity fits the 3 members, none of its filters do (one host port each).
    snap = snapshot_of(racks(*[2] * 500))
    pods = gang_pods("p", 3, gpus=1, host_port=8080)
    for limit, runner in ((8, profile()), (3, profile(maxDomainsPerLevel=3))):
        workload = gang("p", 3, REQUIRED_RACK, pods=pods)
        refusal = choose_domain(SnapshotHandle(snap, runner), workload, runner)
        assert isinstance(refusal, DomainRefusal) and refusal.tried == limit
        assert "0 of 500 racks fit its 3 pods" in refusal.message


def test_the_first_domain_that_takes_every_member_ends_the_search_its_trial_kept() -> None:
    snap = snapshot_of(racks(*[4] * 20))
    workload = gang("t", 4, REQUIRED_RACK)
    runner = profile()
    before = runner.mark()
    choice = choose_domain(SnapshotHandle(snap, runner), workload, runner)
    assert isinstance(choice, DomainChoice) and choice.tried == 1 and choice.kept is not None
    assert used_gpus(snap) == 32  # the kept trial holds the placement, still open
    choice.kept.trial.discard()
    assert used_gpus(snap) == 0
    runner.rewind(before)
    decision = schedule(snap, workload, runner)
    assert isinstance(decision, Bind) and used_gpus(snap) == 32
    assert tuple((r.pod.uid, r.node) for r in decision.placed) == choice.trial


# Without topology, or without the plugin


def test_a_gang_without_topology_is_placed_as_before() -> None:
    snap = snapshot_of(racks(4, 2))
    runner = profile()
    assert choose_domain(SnapshotHandle(snap, runner), gang("t", 3, None), runner) is None


def test_without_the_plugin_topology_requests_are_ignored_and_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    plugins = dict(DEFAULT_PLUGINS)
    plugins["preFilter"] = [p for p in plugins["preFilter"] if p.name != "TopologyDomains"]
    plugins["preFilter"].append(EnabledPlugin("NodeName"))  # a list of its own, not a view
    built = assemble_profile(default_registry(), "no-topology", plugins, {})
    snap = snapshot_of(racks(4, 4, 4, 4), [full(f"r{r}n{n}") for r in range(4) for n in (0, 1)])
    with caplog.at_level(logging.WARNING, logger="batchsched.cycle.domains"):
        for name in ("a", "b"):
            decision = schedule(snap, gang(name, 3, REQUIRED_RACK), ProfileRunner(built))
            assert isinstance(decision, Bind)
    ignored = [r for r in caplog.records if "TopologyDomains plugin is not enabled" in r.message]
    assert len(ignored) == 1 and "profile=no-topology" in ignored[0].message


# Properties


@st.composite
def clusters(draw: st.DrawFn) -> tuple[list[NodeBuilder], list[PodBuilder]]:
    nodes: list[NodeBuilder] = []
    used: list[PodBuilder] = []
    for i in range(draw(st.integers(1, 12))):
        rack = draw(st.sampled_from(("r0", "r1", "r2", None)))
        gpus = draw(st.sampled_from((0, 4, 8)))
        node = make_node(f"n{i}").cpu(str(draw(st.integers(4, 32)))).memory("256Gi").pods(8)
        if gpus:
            node.gpus(gpus)
        if rack is not None:
            node.label(RACK_LABEL, rack)
        nodes.append(node)
        taken = draw(st.integers(0, gpus))
        if taken:
            used.append(make_pod(f"u{i}").gpus(taken).cpu("1").node(f"n{i}"))
    return nodes, used


def usage_fits(snap: Snapshot) -> bool:
    for info in snap.nodes:
        alloc = info.node.allocatable
        requested = info.requested
        if any(requested.get(n) > alloc.get(n) for n in requested.names()):
            return False
    return True


@settings(max_examples=100, deadline=None)
@given(
    clusters(),
    st.integers(1, 5),
    st.sampled_from((1, 2, 4, 8)),
    st.sampled_from(("1", "4")),
    st.integers(0, 3),
)
def test_a_required_rack_gang_is_bound_in_one_rack_or_not_at_all_never_over_committing(
    cluster: tuple[list[NodeBuilder], list[PodBuilder]],
    count: int,
    gpus: int,
    cpu: str,
    seed: int,
) -> None:
    nodes, used = cluster
    snap = snapshot_of(nodes, used)
    before = used_gpus(snap)
    workload = gang("g", count, REQUIRED_RACK, pods=gang_pods("g", count, gpus, cpu))
    decision = schedule(snap, workload, ProfileRunner(profile().profile, seed))
    if isinstance(decision, Bind):
        racks_used = domains_used(snap, decision.placed)
        assert len(racks_used) == 1 and None not in racks_used
        assert len(decision.placed) == count
    else:
        assert isinstance(decision, Reject) and used_gpus(snap) == before
    assert usage_fits(snap)
