"""Topology domains, pure: levels, the domain index, candidate domains for a gang, and the
gang core kept inside one domain (`within`)."""

from __future__ import annotations

import pytest

from batchsched.framework.runner import ProfileRunner, Within
from batchsched.framework.status import Code
from batchsched.gang.core import GangRequest, Outcome, schedule_gang
from batchsched.gang.domains import (
    DomainFit,
    TopologyLevels,
    domains_of,
    gang_demand,
    rank_domains,
    shared_value,
)
from batchsched.gang.topology import (
    BLOCK_LABEL,
    CLIQUE_LABEL,
    DEFAULT_LEVELS,
    RACK_LABEL,
    ZONE_LABEL,
    TopologyRequest,
)
from batchsched.snapshot import Snapshot
from tests.builders import NodeBuilder, PodBuilder, make_node, make_pod, snapshot_of
from tests.gang.test_gang_core import PROFILE, group, members

LEVELS = TopologyLevels()


def gpu_node(name: str, rack: str | None, gpus: int = 8) -> NodeBuilder:
    node = make_node(name).gpus(gpus).cpu("64").memory("512Gi")
    return node.label(RACK_LABEL, rack) if rack is not None else node


def full(node: str, gpus: int = 8) -> PodBuilder:
    """A running pod taking `gpus` GPUs of `node`."""
    return make_pod(f"used-{node}-{gpus}").gpus(gpus).node(node)


def ranked(
    snap: Snapshot, count: int, gpus: int = 8, usable: frozenset[str] | None = None
) -> list[DomainFit]:
    demand = gang_demand(members("g", count, gpus), count)
    return rank_domains(domains_of(snap.nodes, RACK_LABEL), RACK_LABEL, demand, usable)


# Levels


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        pytest.param((), "at least one topology level", id="no level at all is refused"),
        pytest.param((RACK_LABEL, RACK_LABEL), "listed twice", id="a level listed twice"),
        pytest.param((RACK_LABEL, " "), "level 1 is empty", id="an empty level is refused"),
    ],
)
def test_bad_levels_are_refused_with_a_reason(keys: tuple[str, ...], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        TopologyLevels(keys)


@pytest.mark.parametrize(
    ("request_", "levels"),
    [
        pytest.param(
            TopologyRequest(RACK_LABEL, True),
            (CLIQUE_LABEL, RACK_LABEL),
            id="required rack: a clique inside one rack first, then the rack",
        ),
        pytest.param(
            TopologyRequest(CLIQUE_LABEL, False),
            DEFAULT_LEVELS,
            id="preferred clique: the tightest level that takes it, up to the widest",
        ),
        pytest.param(
            TopologyRequest(BLOCK_LABEL, False), DEFAULT_LEVELS, id="preferred block: all"
        ),
        pytest.param(TopologyRequest(ZONE_LABEL, False), DEFAULT_LEVELS, id="preferred zone: all"),
        pytest.param(
            TopologyRequest("example.com/pod", False),
            ("example.com/pod", *DEFAULT_LEVELS),
            id="preferred level not configured: tried first, then every configured one",
        ),
        pytest.param(
            TopologyRequest("example.com/pod", True),
            ("example.com/pod",),
            id="required level not configured: still honoured",
        ),
        pytest.param(
            TopologyRequest("", True, tier=2),
            (CLIQUE_LABEL, RACK_LABEL),
            id="volcano tier 2: up to the rack",
        ),
        pytest.param(TopologyRequest("", True, tier=9), (), id="a tier above every level: none"),
    ],
)
def test_the_levels_a_request_is_tried_at(
    request_: TopologyRequest, levels: tuple[str, ...]
) -> None:
    assert LEVELS.tried_for(request_) == levels


# The domain index and the demand


def test_nodes_without_the_label_are_in_no_domain() -> None:
    snap = snapshot_of([gpu_node("a0", "a"), gpu_node("x", None), gpu_node("a1", "a")])
    index = domains_of(snap.nodes, RACK_LABEL)
    assert {value: [i.name for i in nodes] for value, nodes in index.items()} == {"a": ["a0", "a1"]}


def test_members_that_do_not_exist_yet_are_counted_like_the_first() -> None:
    demand = gang_demand(members("g", 2, gpus=4), 5)
    assert demand.members == 5 and demand.total.get("nvidia.com/gpu") == 20
    assert demand.total.pods == 5 and demand.dominant == "nvidia.com/gpu"


def test_the_shared_domain_of_nodes_is_none_when_they_span_two_or_one_is_unlabelled() -> None:
    snap = snapshot_of([gpu_node("a0", "a"), gpu_node("a1", "a"), gpu_node("b0", "b")])
    unlabelled = snapshot_of([gpu_node("x", None)])
    a0, a1, b0 = snap.nodes
    assert shared_value([a0, a1], RACK_LABEL) == "a"
    assert shared_value([a0, b0], RACK_LABEL) is None
    assert shared_value([a0, *unlabelled.nodes], RACK_LABEL) is None
    assert shared_value([], RACK_LABEL) is None


# Candidate domains


def test_best_fit_first_the_domain_left_with_least_free_capacity() -> None:
    nodes = [gpu_node(f"big{i}", "big") for i in range(4)] + [
        gpu_node(f"small{i}", "small") for i in range(2)
    ]
    fits = ranked(snapshot_of(nodes), 2)
    assert [(f.value, f.fits, f.leftover) for f in fits] == [("small", True, 0), ("big", True, 16)]


def test_capacity_spread_over_nodes_in_pieces_too_small_for_a_member_does_not_fit() -> None:
    # 4 nodes with 4 GPUs free each: 16 GPUs free, but no node holds an 8-GPU member.
    nodes = [gpu_node(f"a{i}", "a") for i in range(4)]
    used = [full(f"a{i}", 4) for i in range(4)]
    (fit,) = ranked(snapshot_of(nodes, used), 2)
    assert not fit.fits and fit.holds == 0 and fit.leftover == 0


def test_domains_that_do_not_fit_come_last_the_closest_first() -> None:
    nodes = [gpu_node(f"{r}{i}", r) for r in "abc" for i in range(2)]
    used = [full("a0"), full("a1"), full("b0")]
    fits = ranked(snapshot_of(nodes, used), 2)
    assert [(f.value, f.fits, f.holds) for f in fits] == [
        ("c", True, 2),
        ("b", False, 1),
        ("a", False, 0),
    ]


def test_only_usable_nodes_count_towards_a_domains_capacity() -> None:
    nodes = [gpu_node(f"a{i}", "a") for i in range(2)]
    (fit,) = ranked(snapshot_of(nodes), 2, usable=frozenset({"a0"}))
    assert not fit.fits and fit.holds == 1


def test_members_of_two_shapes_must_each_find_room() -> None:
    snap = snapshot_of([gpu_node("a0", "a"), make_node("a1").cpu("64").label(RACK_LABEL, "a")])
    launcher = make_pod("launcher", "ml").cpu("60").view()
    workers = members("w", 2, gpus=8)
    demand = gang_demand([launcher, *workers], 3)
    (fit,) = rank_domains(domains_of(snap.nodes, RACK_LABEL), RACK_LABEL, demand)
    # The GPU node takes one worker, the cpu node the launcher: the second worker has no room.
    assert not fit.fits and fit.holds == 2


# The gang core kept inside a domain


def test_a_gang_kept_within_a_domain_goes_nowhere_else() -> None:
    snap = snapshot_of([gpu_node(f"{r}{i}", r) for r in "ab" for i in range(2)])
    within = Within(frozenset({"b0", "b1"}), "node(s) outside the gang's rack domain b")
    decision = schedule_gang(
        GangRequest(group("g", 2), members("g", 2)), snap, ProfileRunner(PROFILE), within=within
    )
    assert decision.outcome is Outcome.BIND
    assert sorted(r.node for r in decision.placed) == ["b0", "b1"]


def test_a_member_that_fits_nowhere_in_its_domain_names_the_domain_among_its_reasons() -> None:
    snap = snapshot_of([gpu_node(f"{r}{i}", r) for r in "ab" for i in range(2)])
    within = Within(frozenset({"b0", "b1"}), "node(s) outside the gang's rack domain b")
    decision = schedule_gang(
        GangRequest(group("g", 3), members("g", 3)), snap, ProfileRunner(PROFILE), within=within
    )
    assert decision.outcome is Outcome.REJECT
    message = next(r.message() for r in decision.results.values() if not r.placed)
    assert message.startswith("0/4 nodes are available: ")
    assert "2 node(s) outside the gang's rack domain b" in message
    assert "2 Insufficient nvidia.com/gpu" in message
    # Explained against the domain's nodes only.
    assert "16 nvidia.com/gpu free on 2 node(s) that pass its filters" in decision.message


def test_within_none_places_exactly_as_without_it() -> None:
    snaps = [snapshot_of([gpu_node(f"{r}{i}", r) for r in "abc" for i in range(3)]) for _ in "12"]
    request = GangRequest(group("g", 5), members("g", 5, gpus=4))
    plain = schedule_gang(request, snaps[0], ProfileRunner(PROFILE, seed=7))
    none = schedule_gang(request, snaps[1], ProfileRunner(PROFILE, seed=7), within=None)
    assert [(r.pod.name, r.node) for r in plain.placed] == [
        (r.pod.name, r.node) for r in none.placed
    ]
    assert len({r.node for r in plain.placed}) > 1  # nothing kept it in one rack


def test_a_domain_no_prefilter_allowed_node_is_in_is_refused_as_unresolvable() -> None:
    snap = snapshot_of([gpu_node("a0", "a"), gpu_node("b0", "b")])
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["a0"]}]}
    required = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}
    pod = make_pod("p").gpus(1).affinity("nodeAffinity", required).view()
    within = Within(frozenset({"b0"}), "node(s) outside the gang's rack domain b")
    result = ProfileRunner(PROFILE).schedule_one(pod, snap, within)
    assert not result.placed and result.status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert result.message() == (
        "0/2 nodes are available: node(s) didn't satisfy plugin(s) [NodeAffinity]."
    )


def test_nodes_left_out_by_a_prefilter_or_the_domain_each_show_their_own_reason() -> None:
    snap = snapshot_of([gpu_node("a0", "a"), gpu_node("b0", "b", gpus=0), gpu_node("b1", "b")])
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["b0", "a0"]}]}
    required = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}
    pod = make_pod("p").gpus(1).affinity("nodeAffinity", required).view()
    within = Within(frozenset({"b0", "b1"}), "node(s) outside the gang's rack domain b")
    result = ProfileRunner(PROFILE).schedule_one(pod, snap, within)
    assert not result.placed
    assert result.failure is not None
    assert {name: s.message() for name, s in result.failure.node_statuses.items()} == {
        "a0": "node(s) outside the gang's rack domain b",
        "b0": "Insufficient nvidia.com/gpu",
        "b1": "node(s) didn't satisfy plugin(s) [NodeAffinity]",
    }
