"""InterPodAffinity: required terms filter in both directions, preferred terms score per domain."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from batchsched.framework.cycle_state import CycleState
from batchsched.framework.normalize import min_max_normalize as normalized
from batchsched.framework.profile import Profile, WeightedScorer
from batchsched.framework.runner import ProfileRunner
from batchsched.framework.status import OK, SKIP, Code
from batchsched.plugins.inter_pod_affinity import (
    AFFINITY_REASON,
    ANTI_AFFINITY_REASON,
    EXISTING_ANTI_AFFINITY_REASON,
    InterPodAffinity,
    InterPodAffinityArgs,
)
from batchsched.plugins.priority_sort import PrioritySort
from tests.builders import NodeBuilder, PodBuilder, make_node, make_pod, snapshot_of

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
FITS = "fits"
AFF, ANTI, EXISTING = AFFINITY_REASON, ANTI_AFFINITY_REASON, EXISTING_ANTI_AFFINITY_REASON


def term(topology: str = ZONE, **labels: str) -> dict[str, Any]:
    return {"labelSelector": {"matchLabels": labels}, "topologyKey": topology}


def required(*terms: dict[str, Any]) -> dict[str, Any]:
    return {"requiredDuringSchedulingIgnoredDuringExecution": list(terms)}


def preferred(*weighted: tuple[int, dict[str, Any]]) -> dict[str, Any]:
    return {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": weight, "podAffinityTerm": t} for weight, t in weighted
        ]
    }


def cluster() -> list[NodeBuilder]:
    """n1 and n2 share zone z1, n3 is alone in z2, n4 has no zone label."""
    return [
        make_node("n1").zone("z1"),
        make_node("n2").zone("z1"),
        make_node("n3").zone("z2"),
        make_node("n4"),
    ]


def filter_outcomes(
    pod: PodBuilder,
    existing: list[PodBuilder],
    namespaces: dict[str, dict[str, str]] | None = None,
) -> tuple[str, ...]:
    """What Filter says of n1..n4: FITS or the rejection reason."""
    snapshot = snapshot_of(cluster(), existing, namespaces)
    plugin, state, view = InterPodAffinity(), CycleState(), pod.view()
    _, status = plugin.pre_filter(state, view, snapshot)
    if status is SKIP:
        return (FITS,) * len(snapshot.nodes)
    assert status is OK
    outcomes = []
    for info in snapshot.nodes:
        result = plugin.filter(state, view, info)
        outcomes.append(FITS if result is OK else result.message())
    return tuple(outcomes)


def db(name: str = "db", node: str = "n1", namespace: str = "default") -> PodBuilder:
    return make_pod(name, namespace).label("app", "db").node(node)


def web_pod(kind: str, value: dict[str, Any], name: str = "incoming") -> PodBuilder:
    return make_pod(name).label("app", "web").affinity(kind, value)


FILTER_CASES = [
    (
        "required zone affinity fits only the zone that runs a matching pod",
        web_pod("podAffinity", required(term(app="db"))),
        [db()],
        None,
        (FITS, FITS, AFF, AFF),
    ),
    (
        "required affinity fails everywhere when the only matching pod runs in no zone",
        web_pod("podAffinity", required(term(app="db"))),
        [db(node="n4")],
        None,
        (AFF, AFF, AFF, AFF),
    ),
    (
        "pod that does not match its own affinity stays out when no pod matches",
        web_pod("podAffinity", required(term(app="db"))),
        [],
        None,
        (AFF, AFF, AFF, AFF),
    ),
    (
        "first pod of a self-affine set fits every node that has the topology label",
        web_pod("podAffinity", required(term(app="web"))),
        [],
        None,
        (FITS, FITS, FITS, AFF),
    ),
    (
        "self-affinity exception ends once a matching pod is running",
        web_pod("podAffinity", required(term(app="web"))),
        [make_pod("web-0").label("app", "web").node("n3")],
        None,
        (AFF, AFF, FITS, AFF),
    ),
    (
        "affinity with two terms needs one pod matching both",
        web_pod("podAffinity", required(term(app="db"), term(HOST, tier="cache"))),
        [db(), make_pod("cache").label("tier", "cache").node("n2")],
        None,
        (AFF, AFF, AFF, AFF),
    ),
    (
        "affinity with two terms fits where a pod matching both runs in both domains",
        web_pod("podAffinity", required(term(app="db"), term(HOST, tier="cache"))),
        [db().label("tier", "cache")],
        None,
        (FITS, AFF, AFF, AFF),
    ),
    (
        "anti-affinity on hostname keeps the pod off the node of a matching pod",
        web_pod("podAntiAffinity", required(term(HOST, app="db"))),
        [db()],
        None,
        (ANTI, FITS, FITS, FITS),
    ),
    (
        "anti-affinity on zone keeps the pod out of the whole zone",
        web_pod("podAntiAffinity", required(term(app="db"))),
        [db()],
        None,
        (ANTI, ANTI, FITS, FITS),
    ),
    (
        "existing pod's required anti-affinity repels the incoming pod from its zone",
        make_pod("incoming").label("app", "web"),
        [db().affinity("podAntiAffinity", required(term(app="web")))],
        None,
        (EXISTING, EXISTING, FITS, FITS),
    ),
    (
        "existing pod's anti-affinity does not repel pods it does not select",
        make_pod("incoming").label("app", "api"),
        [db().affinity("podAntiAffinity", required(term(app="web")))],
        None,
        (FITS, FITS, FITS, FITS),
    ),
    (
        "existing pod's anti-affinity covers only its own namespace by default",
        make_pod("incoming", "other").label("app", "web"),
        [db().affinity("podAntiAffinity", required(term(app="web")))],
        None,
        (FITS, FITS, FITS, FITS),
    ),
    (
        "existing pod's anti-affinity namespace selector is matched against the incoming pod's",
        make_pod("incoming", "team-a").label("app", "web"),
        [
            db().affinity(
                "podAntiAffinity",
                required(
                    {**term(HOST, app="web"), "namespaceSelector": {"matchLabels": {"t": "a"}}}
                ),
            )
        ],
        {"team-a": {"t": "a"}},
        (EXISTING, FITS, FITS, FITS),
    ),
    (
        "affinity looks only in the pod's own namespace by default",
        web_pod("podAffinity", required(term(app="db"))),
        [db(namespace="other")],
        None,
        (AFF, AFF, AFF, AFF),
    ),
    (
        "affinity with a namespaces list finds pods in those namespaces",
        web_pod("podAffinity", required({**term(app="db"), "namespaces": ["other"]})),
        [db(namespace="other")],
        None,
        (FITS, FITS, AFF, AFF),
    ),
    (
        "affinity with an empty namespace selector finds pods in every namespace",
        web_pod("podAffinity", required({**term(app="db"), "namespaceSelector": {}})),
        [db(namespace="other")],
        None,
        (FITS, FITS, AFF, AFF),
    ),
    (
        "affinity with a namespace selector finds pods in namespaces with matching labels",
        web_pod(
            "podAffinity",
            required({**term(app="db"), "namespaceSelector": {"matchLabels": {"t": "a"}}}),
        ),
        [db(namespace="team-a", node="n3"), db("db-b", namespace="team-b")],
        {"team-a": {"t": "a"}, "team-b": {"t": "b"}},
        (AFF, AFF, FITS, AFF),
    ),
    (
        "node failing both affinity and anti-affinity reports affinity first, as kube does",
        make_pod("incoming")
        .label("app", "web")
        .affinity("podAffinity", required(term(app="cache")))
        .affinity("podAntiAffinity", required(term(app="db"))),
        [db(), make_pod("cache").label("app", "cache").node("n3")],
        None,
        (AFF, AFF, FITS, AFF),
    ),
    (
        "node failing both the pod's and an existing pod's anti-affinity reports the pod's",
        web_pod("podAntiAffinity", required(term(app="db"))),
        [db().affinity("podAntiAffinity", required(term(app="web")))],
        None,
        (ANTI, ANTI, FITS, FITS),
    ),
]


@pytest.mark.parametrize(
    ("pod", "existing", "namespaces", "expected"),
    [case[1:] for case in FILTER_CASES],
    ids=[case[0] for case in FILTER_CASES],
)
def test_filter(
    pod: PodBuilder,
    existing: list[PodBuilder],
    namespaces: dict[str, dict[str, str]] | None,
    expected: tuple[str, ...],
) -> None:
    assert filter_outcomes(pod, existing, namespaces) == expected


def test_affinity_rejection_is_unresolvable_and_anti_affinity_is_not() -> None:
    snapshot = snapshot_of(cluster(), [db()])
    plugin = InterPodAffinity()
    n1, n3 = snapshot.nodes[0], snapshot.nodes[2]
    affine, state = web_pod("podAffinity", required(term(app="db"))).view(), CycleState()
    plugin.pre_filter(state, affine, snapshot)
    assert plugin.filter(state, affine, n3).code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    averse, state = web_pod("podAntiAffinity", required(term(app="db"))).view(), CycleState()
    plugin.pre_filter(state, averse, snapshot)
    assert plugin.filter(state, averse, n1).code is Code.UNSCHEDULABLE


@pytest.mark.parametrize(
    ("pod", "existing"),
    [
        (make_pod("incoming").label("app", "web"), [db()]),
        (
            make_pod("incoming").label("app", "web"),
            [db().affinity("podAntiAffinity", required(term(app="cache")))],
        ),
    ],
    ids=[
        "pod without required terms skips when no pod has required anti-affinity",
        "pod without required terms skips when no existing anti-affinity selects it",
    ],
)
def test_pre_filter_skips(pod: PodBuilder, existing: list[PodBuilder]) -> None:
    snapshot = snapshot_of(cluster(), existing)
    _, status = InterPodAffinity().pre_filter(CycleState(), pod.view(), snapshot)
    assert status is SKIP


def score_outcomes(
    pod: PodBuilder, existing: list[PodBuilder], args: InterPodAffinityArgs | None = None
) -> tuple[int, ...] | None:
    """Normalized scores of n1..n4, or None when PreScore skips."""
    snapshot = snapshot_of(cluster(), existing)
    plugin, state, view = InterPodAffinity(args), CycleState(), pod.view()
    status = plugin.pre_score(state, view, snapshot, snapshot.nodes)
    if status is SKIP:
        return None
    assert status is OK
    scores = [plugin.score(state, view, info) for info in snapshot.nodes]
    plugin.normalize_scores(state, view, snapshot.nodes, scores)
    return tuple(scores)


def existing_web_fan(kind: str, value: dict[str, Any]) -> PodBuilder:
    """A running pod on n3 whose own affinity names app=web pods."""
    return make_pod("fan").label("app", "fan").node("n3").affinity(kind, value)


SCORE_CASES = [
    (
        "preferred affinity pulls toward the zone with matching pods",
        web_pod("podAffinity", preferred((10, term(app="db")))),
        [db()],
        None,
        (100, 100, 0, 0),
    ),
    (
        "preferred anti-affinity pushes away from the zone with matching pods",
        web_pod("podAntiAffinity", preferred((10, term(app="db")))),
        [db()],
        None,
        (0, 0, 100, 100),
    ),
    (
        "affinity and anti-affinity weights add up per domain and normalize truncated",
        make_pod("incoming")
        .affinity("podAffinity", preferred((30, term(app="db"))))
        .affinity("podAntiAffinity", preferred((10, term(HOST, app="db")))),
        [db()],
        None,
        (66, 100, 0, 0),
    ),
    (
        "existing pod's preferred affinity pulls the pod it names toward itself",
        make_pod("incoming").label("app", "web"),
        [existing_web_fan("podAffinity", preferred((5, term(app="web"))))],
        None,
        (0, 0, 100, 0),
    ),
    (
        "existing pod's preferred anti-affinity pushes the pod it names away",
        make_pod("incoming").label("app", "web"),
        [existing_web_fan("podAntiAffinity", preferred((5, term(app="web"))))],
        None,
        (100, 100, 0, 100),
    ),
    (
        "existing pod's required affinity adds hardPodAffinityWeight to its domain",
        make_pod("incoming").label("app", "web"),
        [existing_web_fan("podAffinity", required(term(HOST, app="web")))],
        None,
        (0, 0, 100, 0),
    ),
    (
        "hardPodAffinityWeight 0 turns the required-affinity symmetry off",
        make_pod("incoming").label("app", "web"),
        [existing_web_fan("podAffinity", required(term(HOST, app="web")))],
        InterPodAffinityArgs(hard_pod_affinity_weight=0),
        None,
    ),
    (
        "pod without preferred terms skips scoring when no pod has affinity",
        make_pod("incoming").label("app", "web"),
        [db()],
        None,
        None,
    ),
    (
        "ignorePreferredTermsOfExistingPods skips a pod without preferred terms",
        make_pod("incoming").label("app", "web"),
        [existing_web_fan("podAffinity", preferred((5, term(app="web"))))],
        InterPodAffinityArgs(ignore_preferred_terms_of_existing_pods=True),
        None,
    ),
    (
        "ignorePreferredTermsOfExistingPods still counts others' terms for a pod with its own",
        web_pod("podAffinity", preferred((1, term(app="db")))),
        [db(), existing_web_fan("podAffinity", preferred((50, term(app="web"))))],
        InterPodAffinityArgs(ignore_preferred_terms_of_existing_pods=True),
        (2, 2, 100, 0),
    ),
]


@pytest.mark.parametrize(
    ("pod", "existing", "args", "expected"),
    [case[1:] for case in SCORE_CASES],
    ids=[case[0] for case in SCORE_CASES],
)
def test_score(
    pod: PodBuilder,
    existing: list[PodBuilder],
    args: InterPodAffinityArgs | None,
    expected: tuple[int, ...] | None,
) -> None:
    assert score_outcomes(pod, existing, args) == expected


def test_hard_pod_affinity_weight_scales_the_symmetric_score() -> None:
    snapshot = snapshot_of(
        cluster(), [existing_web_fan("podAffinity", required(term(HOST, app="web")))]
    )
    plugin = InterPodAffinity(InterPodAffinityArgs(hard_pod_affinity_weight=7))
    state, pod = CycleState(), make_pod("incoming").label("app", "web").view()
    plugin.pre_score(state, pod, snapshot, snapshot.nodes)
    assert [plugin.score(state, pod, info) for info in snapshot.nodes] == [0, 0, 7, 0]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [([5, 5, 5], [0, 0, 0]), ([-10, 0, 20], [0, 33, 100]), ([], [])],
    ids=[
        "equal scores all normalize to zero",
        "negative scores shift so the lowest becomes zero",
        "no nodes is a no-op",
    ],
)
def test_normalize(raw: list[int], expected: list[int]) -> None:
    normalized(raw, 100)
    assert raw == expected


def test_args_default_to_kube_scheduler_values() -> None:
    args = InterPodAffinityArgs.model_validate({})
    assert args.hard_pod_affinity_weight == 1
    assert args.ignore_preferred_terms_of_existing_pods is False


def test_args_accept_camel_case_keys() -> None:
    raw = {"hardPodAffinityWeight": 100, "ignorePreferredTermsOfExistingPods": True}
    args = InterPodAffinityArgs.model_validate(raw)
    assert args == InterPodAffinityArgs(
        hard_pod_affinity_weight=100, ignore_preferred_terms_of_existing_pods=True
    )


@pytest.mark.parametrize(
    "raw",
    [{"hardPodAffinityWeight": 101}, {"hardPodAffinityWeight": -1}, {"unknown": 1}],
    ids=["weight above 100 is rejected", "negative weight is rejected", "unknown key is rejected"],
)
def test_args_rejected(raw: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        InterPodAffinityArgs.model_validate(raw)


def runner() -> ProfileRunner:
    plugin = InterPodAffinity()
    profile = Profile(
        "gpu-scheduler",
        PrioritySort(),
        pre_filter=(plugin,),
        filter=(plugin,),
        pre_score=(plugin,),
        score=(WeightedScorer(plugin, 2, plugin),),
    )
    return ProfileRunner(profile, seed=1)


@pytest.mark.parametrize(
    ("nodes", "pod", "existing", "message"),
    [
        (
            [make_node("n1").zone("z1"), make_node("n2").zone("z2")],
            web_pod("podAffinity", required(term(app="db"))),
            [],
            "0/2 nodes are available: 2 node(s) didn't match pod affinity rules.",
        ),
        (
            cluster()[:3],
            web_pod("podAntiAffinity", required(term(HOST, app="db"))),
            [
                db(),
                db("db-3", node="n3"),
                make_pod("guard")
                .node("n2")
                .affinity("podAntiAffinity", required(term(HOST, app="web"))),
            ],
            "0/3 nodes are available: 1 node(s) didn't satisfy existing pods anti-affinity rules,"
            " 2 node(s) didn't match pod anti-affinity rules.",
        ),
    ],
    ids=[
        "affinity to pods that do not exist fails on every node",
        "anti-affinity in both directions is counted per reason",
    ],
)
def test_end_to_end_failure(
    nodes: list[NodeBuilder], pod: PodBuilder, existing: list[PodBuilder], message: str
) -> None:
    result = runner().schedule_one(pod.view(), snapshot_of(nodes, existing))
    assert result.node_name is None
    assert result.message() == message


@pytest.mark.parametrize(
    ("pod", "existing", "chosen"),
    [
        (
            web_pod("podAntiAffinity", required(term(HOST, app="db"))),
            [db("db-1"), db("db-3", node="n3"), db("db-4", node="n4")],
            "n2",
        ),
        (web_pod("podAffinity", preferred((10, term(HOST, app="db")))), [db(node="n3")], "n3"),
        (web_pod("podAffinity", required(term(app="db"))), [db(node="n3")], "n3"),
    ],
    ids=[
        "required anti-affinity leaves the one node without a matching pod",
        "preferred affinity picks the node running the matching pod",
        "required zone affinity picks the only node in the matching pod's zone",
    ],
)
def test_end_to_end_placement(pod: PodBuilder, existing: list[PodBuilder], chosen: str) -> None:
    snapshot = snapshot_of(cluster(), existing)
    result = runner().schedule_one(pod.view(), snapshot)
    assert result.node_name == chosen
