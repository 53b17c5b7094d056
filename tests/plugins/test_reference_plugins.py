"""The reference plugins CostAware, TeamAffinity and NetworkLatency: normalized scores per node
for a pod, table by table, and the args each refuses."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from pydantic import ValidationError

from batchsched.framework.cycle_state import CycleState
from batchsched.framework.status import SKIP
from batchsched.plugins.cost_aware import CostAware, CostAwareArgs
from batchsched.plugins.network_latency import NetworkLatency, NetworkLatencyArgs
from batchsched.plugins.registry import default_registry
from batchsched.plugins.team_affinity import TeamAffinity, TeamAffinityArgs
from tests.builders import NodeBuilder, PodBuilder, make_node, make_pod, snapshot_of

PRICE = "batchsched.io/price-per-gpu-hour"
SPOT = "karpenter.sh/capacity-type"
TEAM = "batchsched.io/team"
GANG = "scheduling.x-k8s.io/pod-group"


def normalized(
    plugin: Any, pod: PodBuilder, nodes: list[NodeBuilder], pods: Sequence[PodBuilder] = ()
) -> list[int] | None:
    snapshot = snapshot_of(nodes, list(pods))
    state, view = CycleState(), pod.view()
    pre_score = getattr(plugin, "pre_score", None)
    if pre_score is not None and pre_score(state, view, snapshot, snapshot.nodes) is SKIP:
        return None
    scores = [plugin.score(state, view, info) for info in snapshot.nodes]
    plugin.normalize_scores(state, view, snapshot.nodes, scores)
    return scores


def priced(name: str, price: str | None, spot: bool = False, label: bool = False) -> NodeBuilder:
    node = make_node(name)
    if price is not None:
        node = node.label(PRICE, price) if label else node.annotation(PRICE, price)
    return node.label(SPOT, "spot" if spot else "on-demand")


COST_CASES: list[tuple[str, dict[str, object], list[NodeBuilder], list[int]]] = [
    (
        "the cheapest node scores 100, the dearest 0, between in proportion",
        {},
        [priced("a", "4.00"), priced("b", "2.00"), priced("c", "3.00")],
        [0, 100, 50],
    ),
    (
        "a price in a label counts when there is no annotation",
        {},
        [priced("a", "1.5", label=True), priced("b", "3")],
        [100, 0],
    ),
    (
        "an unpriced node or an unreadable price scores 0",
        {},
        [priced("a", None), priced("b", "2"), priced("c", "lots"), priced("d", "-1")],
        [0, 100, 0, 0],
    ),
    (
        "spot at list price wins on price alone",
        {},
        [priced("spot", "2.0", spot=True), priced("od", "2.5")],
        [100, 0],
    ),
    (
        "a spot penalty of 50 % makes the on-demand node the cheaper one",
        {"spotPenalty": 0.5},
        [priced("spot", "2.0", spot=True), priced("od", "2.5")],
        [0, 100],
    ),
    (
        "equal prices score 100 everywhere",
        {},
        [priced("a", "2"), priced("b", "2.0")],
        [100, 100],
    ),
    ("no prices anywhere: 0 everywhere", {}, [priced("a", None), priced("b", None)], [0, 0]),
]


@pytest.mark.parametrize(
    ("args", "nodes", "expected"),
    [case[1:] for case in COST_CASES],
    ids=[case[0] for case in COST_CASES],
)
def test_cost_aware_scores(
    args: dict[str, object], nodes: list[NodeBuilder], expected: list[int]
) -> None:
    plugin = CostAware(CostAwareArgs.model_validate(args))
    assert normalized(plugin, make_pod().gpus(1), nodes) == expected


def teammate(name: str, node: str, team: str = "vision") -> PodBuilder:
    return make_pod(name).label(TEAM, team).node(node)


TEAM_NODES = [make_node("n0"), make_node("n1"), make_node("n2")]
TEAM_PODS = [
    teammate("v1", "n0"),
    teammate("v2", "n0"),
    teammate("v3", "n1"),
    teammate("nlp", "n2", team="nlp"),
]
TEAM_CASES: list[tuple[str, str, str | None, list[int]]] = [
    ("pack prefers the node with most of the team", "pack", "vision", [100, 50, 0]),
    ("spread prefers the node with fewest of the team", "spread", "vision", [0, 50, 100]),
    ("another team counts only its own pods", "pack", "nlp", [0, 0, 100]),
    ("a pod without a team scores every node alike", "pack", None, [0, 0, 0]),
]


@pytest.mark.parametrize(
    ("mode", "team", "expected"),
    [case[1:] for case in TEAM_CASES],
    ids=[case[0] for case in TEAM_CASES],
)
def test_team_affinity_scores(mode: str, team: str | None, expected: list[int]) -> None:
    plugin = TeamAffinity(TeamAffinityArgs.model_validate({"mode": mode}))
    pod = make_pod("new") if team is None else make_pod("new").label(TEAM, team)
    assert normalized(plugin, pod, TEAM_NODES, TEAM_PODS) == expected


def test_team_affinity_refuses_an_unknown_mode() -> None:
    with pytest.raises(ValidationError):
        default_registry().build("TeamAffinity", {"mode": "scatter"})


LATENCIES = {"zone-a": {"zone-b": 2, "zone-c": 10}, "zone-b": {"zone-c": 5}}
ZONED = [
    make_node("a").zone("zone-a"),
    make_node("b").zone("zone-b"),
    make_node("c").zone("zone-c"),
]


def member(name: str, node: str, gang: str = "train") -> PodBuilder:
    return make_pod(name).label(GANG, gang).node(node)


LATENCY_CASES: list[tuple[str, list[PodBuilder], list[int] | None]] = [
    # mean latency to the member in zone-a: a 0, b 2, c 10 -> reversed by the highest
    ("next to the only placed member is best", [member("m0", "a")], [100, 80, 0]),
    # members in a and c: a (0+10)/2=5, b (2+5)/2=3.5, c (10+0)/2=5
    (
        "between two members the domain nearest both wins",
        [member("m0", "a"), member("m1", "c")],
        [0, 30, 0],
    ),
    ("the first member has nothing to be near", [], None),
    ("another gang's members do not count", [member("x", "a", gang="other")], None),
]


@pytest.mark.parametrize(
    ("placed", "expected"),
    [case[1:] for case in LATENCY_CASES],
    ids=[case[0] for case in LATENCY_CASES],
)
def test_network_latency_scores(placed: list[PodBuilder], expected: list[int] | None) -> None:
    plugin = NetworkLatency(NetworkLatencyArgs.model_validate({"latencies": LATENCIES}))
    assert normalized(plugin, make_pod("new").label(GANG, "train"), ZONED, placed) == expected


def test_network_latency_charges_unknown_pairs_and_unlabelled_nodes() -> None:
    plugin = NetworkLatency(
        NetworkLatencyArgs.model_validate({"latencies": LATENCIES, "unknown": 50})
    )
    assert plugin.latency("zone-c", "zone-a") == 10  # the given direction, mirrored
    assert plugin.latency("zone-a", "zone-z") == 50
    assert plugin.latency(None, "zone-a") == 50
    assert plugin.latency("zone-b", "zone-b") == 0


def test_network_latency_refuses_a_negative_latency() -> None:
    with pytest.raises(ValidationError, match="latency zone-a -> zone-b is negative"):
        default_registry().build("NetworkLatency", {"latencies": {"zone-a": {"zone-b": -1}}})


@pytest.mark.parametrize("name", ["CostAware", "TeamAffinity", "NetworkLatency", "GpuLoadAware"])
def test_reference_plugins_are_registered_and_in_no_default_list(name: str) -> None:
    from batchsched.plugins.registry import DEFAULT_PLUGINS

    assert name in default_registry()
    assert all(p.name != name for plugins in DEFAULT_PLUGINS.values() for p in plugins)
