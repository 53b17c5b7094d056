"""PodTopologySpread: kube-scheduler's spread Filter and Score, and our default constraints."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from batchsched.framework.cycle_state import CycleState
from batchsched.framework.interfaces import NormalizeScorePlugin, extension_points_of
from batchsched.framework.profile import Profile, WeightedScorer
from batchsched.framework.registry import PluginSpec
from batchsched.framework.runner import ProfileRunner
from batchsched.framework.status import OK, SKIP, Code, Status
from batchsched.plugins.pod_topology_spread import (
    REASON_MISSING_LABEL,
    REASON_SKEW,
    PodTopologySpread,
    PodTopologySpreadArgs,
)
from batchsched.plugins.priority_sort import PrioritySort
from tests.builders import NodeBuilder, PodBuilder, make_node, make_pod, snapshot_of

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
GANG = "scheduling.x-k8s.io/pod-group"
TRAIN = {"app": "train"}


def incoming(labels: dict[str, str] | None = None) -> PodBuilder:
    pod = make_pod("incoming")
    for key, value in (TRAIN if labels is None else labels).items():
        pod.label(key, value)
    return pod


def running(name: str, node: str, namespace: str = "default", **labels: str) -> PodBuilder:
    pod = make_pod(name, namespace).node(node)
    for key, value in (labels or TRAIN).items():
        pod.label(key, value)
    return pod


def zoned(name: str, zone: str) -> NodeBuilder:
    return make_node(name).zone(zone)


def filter_statuses(
    pod: PodBuilder,
    nodes: list[NodeBuilder],
    pods: list[PodBuilder],
    args: PodTopologySpreadArgs | None = None,
) -> dict[str, Status]:
    plugin = PodTopologySpread(args)
    snapshot = snapshot_of(nodes, pods)
    view = pod.view()
    state = CycleState()
    _, status = plugin.pre_filter(state, view, snapshot)
    assert status is OK
    return {info.name: plugin.filter(state, view, info) for info in snapshot.nodes}


def fitting(statuses: dict[str, Status]) -> set[str]:
    return {name for name, status in statuses.items() if status is OK}


FILTER_CASES: list[tuple[str, PodBuilder, list[NodeBuilder], list[PodBuilder], set[str]]] = [
    (
        "zone spread with maxSkew 1 rejects the fuller zone",
        incoming().spread(1, ZONE, match_labels=TRAIN),
        [zoned("n1", "z1"), zoned("n2", "z2")],
        [running("p1", "n1")],
        {"n2"},
    ),
    (
        "zone spread with maxSkew 2 allows the fuller zone",
        incoming().spread(2, ZONE, match_labels=TRAIN),
        [zoned("n1", "z1"), zoned("n2", "z2")],
        [running("p1", "n1")],
        {"n1", "n2"},
    ),
    (
        "zones holding equal counts both fit",
        incoming().spread(1, ZONE, match_labels=TRAIN),
        [zoned("n1", "z1"), zoned("n2", "z2")],
        [running("p1", "n1"), running("p2", "n2")],
        {"n1", "n2"},
    ),
    (
        "hostname spread rejects the node already holding a matching pod",
        incoming().spread(1, HOST, match_labels=TRAIN),
        [make_node("n1"), make_node("n2"), make_node("n3")],
        [running("p1", "n1")],
        {"n2", "n3"},
    ),
    (
        "node missing the topology key is rejected",
        incoming().spread(1, ZONE, match_labels=TRAIN),
        [zoned("n1", "z1"), make_node("n2")],
        [],
        {"n1"},
    ),
    (
        "nodeAffinityPolicy Honor leaves nodes outside the pod's nodeSelector out of the minimum",
        incoming().node_selector(disk="ssd").spread(1, ZONE, match_labels=TRAIN),
        [zoned("n1", "z1").label("disk", "ssd"), zoned("n2", "z2").label("disk", "hdd")],
        [running("p1", "n1")],
        {"n1", "n2"},
    ),
    (
        "nodeAffinityPolicy Honor applies required node affinity too",
        incoming()
        .affinity(
            "nodeAffinity",
            {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]}
                    ]
                }
            },
        )
        .spread(1, ZONE, match_labels=TRAIN),
        [zoned("n1", "z1").label("disk", "ssd"), zoned("n2", "z2").label("disk", "hdd")],
        [running("p1", "n1")],
        {"n1", "n2"},
    ),
    (
        "nodeAffinityPolicy Ignore counts nodes outside the pod's nodeSelector",
        incoming()
        .node_selector(disk="ssd")
        .spread(1, ZONE, match_labels=TRAIN, nodeAffinityPolicy="Ignore"),
        [zoned("n1", "z1").label("disk", "ssd"), zoned("n2", "z2").label("disk", "hdd")],
        [running("p1", "n1")],
        {"n2"},
    ),
    (
        "nodeTaintsPolicy Honor leaves nodes with untolerated taints out of the minimum",
        incoming().spread(1, ZONE, match_labels=TRAIN, nodeTaintsPolicy="Honor"),
        [zoned("n1", "z1"), zoned("n2", "z2").taint("gpu", "bad")],
        [running("p1", "n1")],
        {"n1", "n2"},
    ),
    (
        "nodeTaintsPolicy Ignore by default counts tainted nodes",
        incoming().spread(1, ZONE, match_labels=TRAIN),
        [zoned("n1", "z1"), zoned("n2", "z2").taint("gpu", "bad")],
        [running("p1", "n1")],
        {"n2"},
    ),
    (
        "nodeTaintsPolicy Honor counts a tainted node the pod tolerates",
        incoming()
        .toleration("gpu", "bad", "NoSchedule")
        .spread(1, ZONE, match_labels=TRAIN, nodeTaintsPolicy="Honor"),
        [zoned("n1", "z1"), zoned("n2", "z2").taint("gpu", "bad")],
        [running("p1", "n1")],
        {"n2"},
    ),
    (
        "nodeTaintsPolicy Honor counts a node whose only taint is PreferNoSchedule",
        incoming().spread(1, ZONE, match_labels=TRAIN, nodeTaintsPolicy="Honor"),
        [zoned("n1", "z1"), zoned("n2", "z2").taint("gpu", "meh", "PreferNoSchedule")],
        [running("p1", "n1")],
        {"n2"},
    ),
    (
        "minDomains greater than the domain count treats the global minimum as 0",
        incoming().spread(1, ZONE, match_labels=TRAIN, minDomains=3),
        [zoned("n1", "z1"), zoned("n2", "z2")],
        [running("p1", "n1"), running("p2", "n2")],
        set(),
    ),
    (
        "minDomains met by the domain count keeps the real minimum",
        incoming().spread(1, ZONE, match_labels=TRAIN, minDomains=2),
        [zoned("n1", "z1"), zoned("n2", "z2")],
        [running("p1", "n1"), running("p2", "n2")],
        {"n1", "n2"},
    ),
    (
        "pods in other namespaces do not count",
        incoming().spread(1, ZONE, match_labels=TRAIN),
        [zoned("n1", "z1"), zoned("n2", "z2")],
        [running("p1", "n1", namespace="other")],
        {"n1", "n2"},
    ),
    (
        "terminating pods do not count",
        incoming().spread(1, ZONE, match_labels=TRAIN),
        [zoned("n1", "z1"), zoned("n2", "z2")],
        [running("p1", "n1").set("metadata.deletionTimestamp", "2024-05-01T00:00:00Z")],
        {"n1", "n2"},
    ),
    (
        "pods the selector does not pick do not count",
        incoming().spread(1, ZONE, match_labels=TRAIN),
        [zoned("n1", "z1"), zoned("n2", "z2")],
        [running("p1", "n1", app="serve")],
        {"n1", "n2"},
    ),
    (
        "incoming pod not matching its own selector adds no skew of its own",
        incoming({"app": "serve"}).spread(1, ZONE, match_labels=TRAIN),
        [zoned("n1", "z1"), zoned("n2", "z2")],
        [running("p1", "n1")],
        {"n1", "n2"},
    ),
    (
        "matchLabelKeys counts only pods sharing the incoming pod's value",
        incoming({"app": "train", "job": "b"}).spread(
            1, ZONE, match_labels=TRAIN, matchLabelKeys=["job"]
        ),
        [zoned("n1", "z1"), zoned("n2", "z2")],
        [running("p1", "n1", app="train", job="a")],
        {"n1", "n2"},
    ),
    (
        "every hard constraint must hold",
        incoming().spread(2, ZONE, match_labels=TRAIN).spread(1, HOST, match_labels=TRAIN),
        [zoned("n1", "z1"), zoned("n2", "z1"), zoned("n3", "z2")],
        [running("p1", "n1")],
        {"n2", "n3"},
    ),
]


@pytest.mark.parametrize(
    ("pod", "nodes", "pods", "fits"),
    [case[1:] for case in FILTER_CASES],
    ids=[case[0] for case in FILTER_CASES],
)
def test_filter(
    pod: PodBuilder, nodes: list[NodeBuilder], pods: list[PodBuilder], fits: set[str]
) -> None:
    assert fitting(filter_statuses(pod, nodes, pods)) == fits


def test_missing_label_is_unresolvable_and_skew_is_unschedulable() -> None:
    statuses = filter_statuses(
        incoming().spread(1, ZONE, match_labels=TRAIN),
        [zoned("n1", "z1"), zoned("n2", "z2"), make_node("n3")],
        [running("p1", "n1")],
    )
    assert statuses["n1"].code is Code.UNSCHEDULABLE
    assert statuses["n1"].reasons == (REASON_SKEW,)
    assert statuses["n3"].code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert statuses["n3"].reasons == (REASON_MISSING_LABEL,)


@pytest.mark.parametrize(
    ("pod", "pre_filter", "pre_score"),
    [
        (incoming(), SKIP, SKIP),
        (incoming().spread(1, ZONE, "ScheduleAnyway", TRAIN), SKIP, OK),
        (incoming().spread(1, ZONE, match_labels=TRAIN), OK, SKIP),
    ],
    ids=[
        "pod without constraints skips both filter and score",
        "pod with only ScheduleAnyway constraints skips the filter",
        "pod with only DoNotSchedule constraints skips the score",
    ],
)
def test_skips_what_the_pod_does_not_ask_for(
    pod: PodBuilder, pre_filter: Status, pre_score: Status
) -> None:
    plugin = PodTopologySpread()
    snapshot = snapshot_of([zoned("n1", "z1"), zoned("n2", "z2")])
    state = CycleState()
    assert plugin.pre_filter(state, pod.view(), snapshot)[1] is pre_filter
    assert plugin.pre_score(state, pod.view(), snapshot, snapshot.nodes) is pre_score


def normalized_scores(
    pod: PodBuilder, nodes: list[NodeBuilder], pods: list[PodBuilder], feasible: list[str]
) -> dict[str, int]:
    plugin = PodTopologySpread()
    snapshot = snapshot_of(nodes, pods)
    scored = [info for info in snapshot.nodes if info.name in feasible]
    view = pod.view()
    state = CycleState()
    assert plugin.pre_score(state, view, snapshot, scored) is OK
    scores = [plugin.score(state, view, info) for info in scored]
    plugin.normalize_scores(state, view, scored, scores)
    return {info.name: score for info, score in zip(scored, scores, strict=True)}


THREE_ZONED = [zoned("n1", "z1"), zoned("n2", "z1"), zoned("n3", "z2")]
SCORE_CASES: list[tuple[str, PodBuilder, list[NodeBuilder], list[PodBuilder], list[str], Any]] = [
    (
        "ScheduleAnyway gives the emptier zone 100 and the fuller zone 0",
        incoming().spread(1, ZONE, "ScheduleAnyway", TRAIN),
        THREE_ZONED,
        [running("p1", "n1"), running("p2", "n1")],
        ["n1", "n2", "n3"],
        {"n1": 0, "n2": 0, "n3": 100},
    ),
    (
        # raw: z1 = round(2 * ln 4 + 1) = 4, z2 = 1; normalized 100 * (4 + 1 - s) / 4
        "a larger maxSkew waters the difference down",
        incoming().spread(2, ZONE, "ScheduleAnyway", TRAIN),
        THREE_ZONED,
        [running("p1", "n1"), running("p2", "n1")],
        ["n1", "n2", "n3"],
        {"n1": 25, "n2": 25, "n3": 100},
    ),
    (
        # raw with weight ln 5: n1 = round(3.22) = 3, n2 = round(1.61) = 2, n3 = 0
        "hostname ScheduleAnyway counts each node's own pods",
        incoming().spread(1, HOST, "ScheduleAnyway", TRAIN),
        [make_node("n1"), make_node("n2"), make_node("n3")],
        [running("p1", "n1"), running("p2", "n1"), running("p3", "n2")],
        ["n1", "n2", "n3"],
        {"n1": 0, "n2": 33, "n3": 100},
    ),
    (
        "feasible node lacking the topology key scores 0",
        incoming().spread(1, ZONE, "ScheduleAnyway", TRAIN),
        [*THREE_ZONED, make_node("n4")],
        [running("p1", "n1"), running("p2", "n1")],
        ["n1", "n3", "n4"],
        {"n1": 0, "n3": 100, "n4": 0},
    ),
    (
        "no matching pods anywhere gives every node 100",
        incoming().spread(1, ZONE, "ScheduleAnyway", TRAIN),
        THREE_ZONED,
        [],
        ["n1", "n2", "n3"],
        {"n1": 100, "n2": 100, "n3": 100},
    ),
    (
        "pods on nodes that are not being scored still count for their zone",
        incoming().spread(1, ZONE, "ScheduleAnyway", TRAIN),
        THREE_ZONED,
        [running("p1", "n2"), running("p2", "n2")],
        ["n1", "n3"],
        {"n1": 0, "n3": 100},
    ),
    (
        "nodeAffinityPolicy Honor leaves pods on unselectable nodes out of the score",
        incoming().node_selector(disk="ssd").spread(1, ZONE, "ScheduleAnyway", TRAIN),
        [
            zoned("n1", "z1").label("disk", "ssd"),
            zoned("n2", "z1").label("disk", "hdd"),
            zoned("n3", "z2").label("disk", "ssd"),
        ],
        [running("p1", "n2"), running("p2", "n2")],
        ["n1", "n3"],
        {"n1": 100, "n3": 100},
    ),
]


@pytest.mark.parametrize(
    ("pod", "nodes", "pods", "feasible", "expected"),
    [case[1:] for case in SCORE_CASES],
    ids=[case[0] for case in SCORE_CASES],
)
def test_score(
    pod: PodBuilder,
    nodes: list[NodeBuilder],
    pods: list[PodBuilder],
    feasible: list[str],
    expected: dict[str, int],
) -> None:
    assert normalized_scores(pod, nodes, pods, feasible) == expected


ZONE_DEFAULT = {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"}
DEFAULTS_CASES: list[tuple[str, dict[str, Any], PodBuilder, set[str] | None]] = [
    (
        "List defaults spread a gang member that declares no constraints",
        {"defaultConstraints": [ZONE_DEFAULT]},
        incoming({GANG: "g1"}),
        {"n2"},
    ),
    (
        "List defaults leave a pod without workload labels alone",
        {"defaultConstraints": [ZONE_DEFAULT]},
        incoming({"app": "train"}),
        None,
    ),
    (
        "a pod's own constraints replace the defaults",
        {"defaultConstraints": [ZONE_DEFAULT]},
        incoming({GANG: "g1"}).spread(1, ZONE, "ScheduleAnyway", {GANG: "g1"}),
        None,
    ),
    (
        "System defaulting applies no defaults to batch pods",
        {"defaultingType": "System"},
        incoming({GANG: "g1"}),
        None,
    ),
]


@pytest.mark.parametrize(
    ("raw_args", "pod", "fits"),
    [case[1:] for case in DEFAULTS_CASES],
    ids=[case[0] for case in DEFAULTS_CASES],
)
def test_default_constraints(
    raw_args: dict[str, Any], pod: PodBuilder, fits: set[str] | None
) -> None:
    plugin = PluginSpec("PodTopologySpread", PodTopologySpread, PodTopologySpreadArgs).build(
        raw_args
    )
    assert isinstance(plugin, PodTopologySpread)
    snapshot = snapshot_of(
        [zoned("n1", "z1"), zoned("n2", "z2")], [running("p1", "n1", **{GANG: "g1"})]
    )
    state = CycleState()
    _, status = plugin.pre_filter(state, pod.view(), snapshot)
    if fits is None:
        assert status is SKIP
        return
    assert status is OK
    assert {i.name for i in snapshot.nodes if plugin.filter(state, pod.view(), i) is OK} == fits


@pytest.mark.parametrize(
    "raw_args",
    [
        {"defaultingType": "System", "defaultConstraints": [ZONE_DEFAULT]},
        {"defaultConstraints": [ZONE_DEFAULT, ZONE_DEFAULT]},
        {"defaultConstraints": [{**ZONE_DEFAULT, "maxSkew": 0}]},
        {"defaultConstraints": [{**ZONE_DEFAULT, "labelSelector": {}}]},
        {"defaultingType": "Cluster"},
    ],
    ids=[
        "System defaulting with a constraint list is rejected",
        "the same key and whenUnsatisfiable twice is rejected",
        "maxSkew 0 is rejected",
        "a default constraint naming its own labelSelector is rejected",
        "an unknown defaultingType is rejected",
    ],
)
def test_bad_args_are_rejected(raw_args: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        PodTopologySpreadArgs.model_validate(raw_args)


def test_defaults_are_list_with_no_constraints() -> None:
    args = PodTopologySpreadArgs()
    assert args.defaulting_type == "List"
    assert args.default_constraints == ()


def test_plugin_implements_filter_and_score_points() -> None:
    plugin = PodTopologySpread()
    assert extension_points_of(plugin) == ("preFilter", "filter", "preScore", "score")
    assert isinstance(plugin, NormalizeScorePlugin)


def runner() -> ProfileRunner:
    plugin = PodTopologySpread()
    profile = Profile(
        scheduler_name="gpu-scheduler",
        queue_sort=PrioritySort(),
        pre_filter=(plugin,),
        filter=(plugin,),
        pre_score=(plugin,),
        score=(WeightedScorer(plugin, 2, plugin),),
    )
    return ProfileRunner(profile, seed=1)


@pytest.mark.parametrize(
    ("pod", "chosen"),
    [
        (incoming().spread(1, ZONE, match_labels=TRAIN), "n3"),
        (incoming().spread(1, ZONE, "ScheduleAnyway", TRAIN), "n3"),
    ],
    ids=[
        "DoNotSchedule places the pod in the emptier zone",
        "ScheduleAnyway prefers the emptier zone",
    ],
)
def test_end_to_end_placement(pod: PodBuilder, chosen: str) -> None:
    snapshot = snapshot_of(THREE_ZONED, [running("p1", "n1")])
    result = runner().schedule_one(pod.view(), snapshot)
    assert result.node_name == chosen


def test_end_to_end_failure_message() -> None:
    snapshot = snapshot_of(
        [make_node("n1"), zoned("n2", "z1"), zoned("n3", "z2")],
        [running("p1", "n2"), running("p2", "n3")],
    )
    pod = incoming().spread(1, ZONE, match_labels=TRAIN, minDomains=3)
    result = runner().schedule_one(pod.view(), snapshot)
    assert result.node_name is None
    assert result.message() == (
        "0/3 nodes are available: "
        "1 node(s) didn't match pod topology spread constraints (missing required label), "
        "2 node(s) didn't match pod topology spread constraints."
    )
