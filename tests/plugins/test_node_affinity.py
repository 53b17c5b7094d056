from __future__ import annotations

from typing import Any

import pydantic
import pytest

from batchsched.framework.cycle_state import CycleState
from batchsched.framework.interfaces import PreFilterResult
from batchsched.framework.profile import Profile, WeightedScorer
from batchsched.framework.runner import ProfileRunner
from batchsched.framework.status import OK, SKIP, Code
from batchsched.plugins.node_affinity import NodeAffinity, NodeAffinityArgs
from batchsched.plugins.priority_sort import PrioritySort
from batchsched.snapshot import NodeInfo
from tests.builders import NodeBuilder, PodBuilder, make_node, make_pod, snapshot_of

POD_REASON = "node(s) didn't match Pod's node affinity/selector"
ENFORCED_REASON = "node(s) didn't match scheduler-enforced node affinity"


def expr(key: str, operator: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": operator, "values": list(values)}


def term(*exprs: dict[str, Any], fields: tuple[dict[str, Any], ...] = ()) -> dict[str, Any]:
    found: dict[str, Any] = {}
    if exprs:
        found["matchExpressions"] = list(exprs)
    if fields:
        found["matchFields"] = list(fields)
    return found


def required(*terms: dict[str, Any]) -> dict[str, Any]:
    return {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}


def preferred(*weighted: tuple[int, dict[str, Any]]) -> dict[str, Any]:
    return {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": w, "preference": t} for w, t in weighted
        ]
    }


def requiring(*terms: dict[str, Any]) -> PodBuilder:
    return make_pod().affinity("nodeAffinity", required(*terms))


def _filter(plugin: NodeAffinity, pod: PodBuilder, node: NodeBuilder) -> str | None:
    state = CycleState()
    view = pod.view()
    snapshot = snapshot_of([node])
    _, status = plugin.pre_filter(state, view, snapshot)
    assert status is OK
    status = plugin.filter(state, view, NodeInfo(node.view()))
    if status is OK:
        return None
    assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    return status.message()


gpu_a100 = make_node("n1").label("gpu", "a100").label("cores", "64").label("rack", "r1")
NAME = expr("metadata.name", "In", "n1")

FILTER_CASES = [
    (requiring(term(expr("gpu", "In", "a100", "h100"))), True),
    (requiring(term(expr("gpu", "In", "h100"))), False),
    (requiring(term(expr("zone", "In", "z1"))), False),
    (requiring(term(expr("zone", "NotIn", "z1"))), True),
    (requiring(term(expr("gpu", "NotIn", "a100"))), False),
    (requiring(term(expr("gpu", "Exists"))), True),
    (requiring(term(expr("zone", "Exists"))), False),
    (requiring(term(expr("zone", "DoesNotExist"))), True),
    (requiring(term(expr("gpu", "DoesNotExist"))), False),
    (requiring(term(expr("cores", "Gt", "32"))), True),
    (requiring(term(expr("cores", "Gt", "64"))), False),
    (requiring(term(expr("cores", "Lt", "65"))), True),
    (requiring(term(expr("cores", "Lt", "64"))), False),
    (requiring(term(expr("gpu", "Gt", "1"))), False),
    (requiring(term(expr("gpu", "Lt", "1000"))), False),
    (requiring(term(expr("gpu", "In", "a100"), expr("rack", "In", "r2"))), False),
    (requiring(term(expr("gpu", "In", "h100")), term(expr("rack", "In", "r1"))), True),
    (requiring(term()), False),
    (requiring(), False),
    (requiring(term(fields=(NAME,))), True),
    (requiring(term(fields=(expr("metadata.name", "In", "n2"),))), False),
    (requiring(term(fields=(expr("metadata.name", "NotIn", "n1"),))), False),
    (requiring(term(expr("gpu", "In", "a100"), fields=(NAME,))), True),
    (requiring(term(expr("gpu", "In", "h100"), fields=(NAME,))), False),
    (make_pod().node_selector(gpu="a100", rack="r1"), True),
    (make_pod().node_selector(gpu="a100", rack="r2"), False),
    (make_pod().node_selector(gpu="a100").affinity("nodeAffinity", required(term(NAME))), False),
    (requiring(term(expr("gpu", "Exists"))).node_selector(rack="r2"), False),
    (requiring(term(expr("gpu", "Exists"))).node_selector(rack="r1"), True),
]


@pytest.mark.parametrize(
    ("pod", "fits"),
    FILTER_CASES,
    ids=[
        "In matches when the label value is listed",
        "In fails when the label value is not listed",
        "In fails when the label is missing",
        "NotIn matches when the label is missing",
        "NotIn fails when the label value is listed",
        "Exists matches a present label",
        "Exists fails on a missing label",
        "DoesNotExist matches a missing label",
        "DoesNotExist fails on a present label",
        "Gt matches a larger integer label",
        "Gt fails on an equal integer label",
        "Lt matches a smaller integer label",
        "Lt fails on an equal integer label",
        "Gt with a non-integer label never matches",
        "Lt with a non-integer label never matches",
        "expressions within a term are ANDed",
        "terms are ORed",
        "an empty term matches no node",
        "required affinity with no terms matches no node",
        "matchFields metadata.name In matches the named node",
        "matchFields metadata.name In fails on another node",
        "matchFields metadata.name NotIn fails on the named node",
        "matchFields and matchExpressions in one term both hold",
        "matchFields alone does not excuse a failing expression",
        "nodeSelector matches when every label is equal",
        "nodeSelector fails when one label differs",
        "a label expression on metadata.name is not a field and fails",
        "nodeSelector must hold even when the affinity matches",
        "nodeSelector plus affinity both holding fits",
    ],
)
def test_filter(pod: PodBuilder, fits: bool) -> None:
    assert _filter(NodeAffinity(), pod, gpu_a100) == (None if fits else POD_REASON)


def test_added_affinity_is_enforced_for_every_pod() -> None:
    args = NodeAffinityArgs.model_validate(
        {"addedAffinity": required(term(expr("pool", "In", "batch")))}
    )
    plugin = NodeAffinity(args)
    assert _filter(plugin, make_pod(), gpu_a100) == ENFORCED_REASON
    assert _filter(plugin, make_pod(), make_node("b").label("pool", "batch")) is None


def test_added_affinity_is_checked_before_the_pods_own() -> None:
    plugin = NodeAffinity(NodeAffinityArgs(added_affinity=required(term(expr("pool", "Exists")))))
    pod = make_pod().node_selector(gpu="h100")
    assert _filter(plugin, pod, gpu_a100) == ENFORCED_REASON
    assert _filter(plugin, pod, make_node("b").label("pool", "x")) == POD_REASON


def test_args_reject_an_unreadable_added_affinity() -> None:
    with pytest.raises(pydantic.ValidationError, match="unknown operator 'Near'"):
        NodeAffinityArgs.model_validate({"addedAffinity": required(term(expr("a", "Near")))})


def _pre_filter(pod: PodBuilder) -> tuple[PreFilterResult | None, str]:
    result, status = NodeAffinity().pre_filter(CycleState(), pod.view(), snapshot_of([]))
    return result, ("OK" if status is OK else "SKIP" if status is SKIP else status.message())


def _pinned(*names: str) -> dict[str, Any]:
    return expr("metadata.name", "In", *names)


PRE_FILTER_CASES = [
    (make_pod(), None, "SKIP"),
    (make_pod().affinity("nodeAffinity", preferred((1, term(expr("a", "Exists"))))), None, "SKIP"),
    (make_pod().node_selector(gpu="a100"), None, "OK"),
    (requiring(term(expr("gpu", "Exists"))), None, "OK"),
    (requiring(term(fields=(_pinned("n1", "n2"),))), {"n1", "n2"}, "OK"),
    (
        requiring(term(fields=(_pinned("n1"),)), term(fields=(_pinned("n3"),))),
        {"n1", "n3"},
        "OK",
    ),
    (
        requiring(term(fields=(_pinned("n1", "n2"), _pinned("n2", "n3")))),
        {"n2"},
        "OK",
    ),
    (requiring(term(fields=(_pinned("n1"),)), term(expr("gpu", "Exists"))), None, "OK"),
    (requiring(term(fields=(_pinned("n1"), _pinned("n2")))), None, "pod affinity terms conflict"),
]


@pytest.mark.parametrize(
    ("pod", "names", "outcome"),
    PRE_FILTER_CASES,
    ids=[
        "pod without selector or affinity skips the plugin",
        "preferred terms alone skip filtering",
        "nodeSelector alone is filtered without narrowing",
        "label terms are filtered without narrowing",
        "a term pinning node names narrows to them",
        "pinned names of ORed terms are united",
        "pinned names within one term are intersected",
        "one term without a pinned name keeps every node",
        "a term whose pinned names exclude each other conflicts",
    ],
)
def test_pre_filter(pod: PodBuilder, names: set[str] | None, outcome: str) -> None:
    result, status = _pre_filter(pod)
    assert status == outcome
    assert (result.node_names if result else None) == (frozenset(names) if names else None)


def test_pre_filter_does_not_skip_when_an_added_affinity_exists() -> None:
    plugin = NodeAffinity(NodeAffinityArgs(added_affinity=required(term(expr("a", "Exists")))))
    _, status = plugin.pre_filter(CycleState(), make_pod().view(), snapshot_of([]))
    assert status is OK


def _scores(plugin: NodeAffinity, pod: PodBuilder, nodes: list[NodeBuilder]) -> list[int] | None:
    snapshot = snapshot_of(nodes)
    state = CycleState()
    view = pod.view()
    if plugin.pre_score(state, view, snapshot, snapshot.nodes) is SKIP:
        return None
    scores = [plugin.score(state, view, info) for info in snapshot.nodes]
    plugin.normalize_scores(state, view, snapshot.nodes, scores)
    return scores


ZONES = [make_node("a").zone("z1"), make_node("b").zone("z2"), make_node("c").zone("z3")]
Z1 = term(expr("topology.kubernetes.io/zone", "In", "z1"))
Z12 = term(expr("topology.kubernetes.io/zone", "In", "z1", "z2"))

SCORE_CASES = [
    (make_pod(), None),
    (make_pod().affinity("nodeAffinity", preferred((10, Z1))), [100, 0, 0]),
    (make_pod().affinity("nodeAffinity", preferred((30, Z1), (10, Z12))), [100, 25, 0]),
    (make_pod().affinity("nodeAffinity", preferred((5, term(expr("x", "Exists"))))), [0, 0, 0]),
    (make_pod().affinity("nodeAffinity", preferred((50, term()))), [0, 0, 0]),
]


@pytest.mark.parametrize(
    ("pod", "expected"),
    SCORE_CASES,
    ids=[
        "pod without preferred terms skips scoring",
        "the node matching the preferred term scores 100",
        "weights of matching terms are summed and scaled by the best node",
        "when no node matches every node scores 0",
        "an empty preferred term matches no node",
    ],
)
def test_score(pod: PodBuilder, expected: list[int] | None) -> None:
    assert _scores(NodeAffinity(), pod, ZONES) == expected


def test_added_preferred_terms_score_even_without_the_pods_own() -> None:
    added = NodeAffinityArgs(added_affinity=preferred((1, Z12)))
    assert _scores(NodeAffinity(added), make_pod(), ZONES) == [100, 100, 0]


def _runner() -> ProfileRunner:
    plugin = NodeAffinity()
    return ProfileRunner(
        Profile(
            scheduler_name="gpu-scheduler",
            queue_sort=PrioritySort(),
            pre_filter=(plugin,),
            filter=(plugin,),
            pre_score=(plugin,),
            score=(WeightedScorer(plugin, 2, plugin),),
        )
    )


def test_runner_places_the_pod_on_its_preferred_zone() -> None:
    zone_not_z1 = term(expr("topology.kubernetes.io/zone", "NotIn", "z1"))
    pod = make_pod("p").affinity("nodeAffinity", {**required(zone_not_z1), **preferred((10, Z12))})
    for seed in range(5):
        runner = ProfileRunner(_runner().profile, seed)
        assert runner.find_node(pod.view(), snapshot_of(ZONES)).node_name == "b"


def test_runner_reports_nodes_outside_the_pinned_names_and_the_mismatch() -> None:
    snapshot = snapshot_of(ZONES)
    pod = make_pod("p").node_selector(**{"topology.kubernetes.io/zone": "z3"})
    pod.affinity("nodeAffinity", required(term(fields=(_pinned("a", "b"),))))
    result = _runner().schedule_one(pod.view(), snapshot)
    assert result.node_name is None
    assert result.message() == (
        "0/3 nodes are available: 1 node(s) didn't satisfy plugin(s) [NodeAffinity], "
        "2 node(s) didn't match Pod's node affinity/selector."
    )


def test_runner_reports_conflicting_pinned_names_for_every_node() -> None:
    pod = requiring(term(fields=(_pinned("a"), _pinned("b"))))
    result = _runner().schedule_one(pod.view(), snapshot_of(ZONES))
    assert result.node_name is None
    assert result.message() == "0/3 nodes are available: pod affinity terms conflict."
