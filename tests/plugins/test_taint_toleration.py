from __future__ import annotations

import pytest

from batchsched.framework.cycle_state import CycleState
from batchsched.framework.profile import Profile, WeightedScorer
from batchsched.framework.runner import ProfileRunner
from batchsched.framework.status import OK, SKIP, Code
from batchsched.plugins.node_affinity import NodeAffinity
from batchsched.plugins.priority_sort import PrioritySort
from batchsched.plugins.taint_toleration import TaintToleration
from batchsched.snapshot import NodeInfo
from tests.builders import NodeBuilder, PodBuilder, make_node, make_pod, snapshot_of


def _filter(pod: PodBuilder, node: NodeBuilder) -> str | None:
    status = TaintToleration().filter(CycleState(), pod.view(), NodeInfo(node.view()))
    if status is OK:
        return None
    assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    return status.message()


FILTER_CASES = [
    (make_pod(), make_node(), None),
    (make_pod(), make_node().taint("gpu", "bad"), "node(s) had untolerated taint {gpu: bad}"),
    (make_pod().toleration("gpu", "bad"), make_node().taint("gpu", "bad"), None),
    (
        make_pod().toleration("gpu", "good"),
        make_node().taint("gpu", "bad"),
        "node(s) had untolerated taint {gpu: bad}",
    ),
    (make_pod().toleration("gpu", operator="Exists"), make_node().taint("gpu", "bad"), None),
    (
        make_pod().toleration("other", operator="Exists"),
        make_node().taint("gpu", "bad"),
        "node(s) had untolerated taint {gpu: bad}",
    ),
    (
        make_pod().toleration(operator="Exists"),
        make_node().taint("gpu", "bad").taint("x", "", "NoExecute"),
        None,
    ),
    (
        make_pod().toleration("gpu", "bad"),
        make_node().taint("gpu", "bad", "NoSchedule").taint("gpu", "bad", "NoExecute"),
        None,
    ),
    (
        make_pod().toleration("gpu", "bad", effect="NoSchedule"),
        make_node().taint("gpu", "bad", "NoExecute"),
        "node(s) had untolerated taint {gpu: bad}",
    ),
    (
        make_pod().toleration("gpu", "bad", effect="NoExecute"),
        make_node().taint("gpu", "bad", "NoExecute"),
        None,
    ),
    (make_pod(), make_node().taint("spot", "yes", "PreferNoSchedule"), None),
    (
        make_pod().toleration("a", "1"),
        make_node().taint("a", "1").taint("b", "2").taint("c", "3"),
        "node(s) had untolerated taint {b: 2}",
    ),
]


@pytest.mark.parametrize(
    ("pod", "node", "reason"),
    FILTER_CASES,
    ids=[
        "node without taints takes any pod",
        "pod without tolerations is kept off a NoSchedule taint",
        "pod tolerating the taint with Equal and the same value fits",
        "Equal toleration with a different value does not tolerate the taint",
        "pod tolerating the key with Exists fits whatever the value",
        "Exists toleration for another key does not tolerate the taint",
        "empty key with Exists tolerates every taint",
        "toleration with empty effect tolerates NoSchedule and NoExecute alike",
        "NoSchedule toleration does not tolerate a NoExecute taint",
        "NoExecute toleration tolerates a NoExecute taint",
        "PreferNoSchedule taint never rejects a node",
        "first untolerated taint in node order is the reason",
    ],
)
def test_filter(pod: PodBuilder, node: NodeBuilder, reason: str | None) -> None:
    assert _filter(pod, node) == reason


def _normalized(pod: PodBuilder, nodes: list[NodeBuilder]) -> list[int]:
    plugin = TaintToleration()
    snapshot = snapshot_of(nodes)
    state = CycleState()
    view = pod.view()
    assert plugin.pre_score(state, view, snapshot, snapshot.nodes) is OK
    scores = [plugin.score(state, view, info) for info in snapshot.nodes]
    plugin.normalize_scores(state, view, snapshot.nodes, scores)
    return scores


def _prefer(node: NodeBuilder, *keys: str) -> NodeBuilder:
    for key in keys:
        node.taint(key, "v", "PreferNoSchedule")
    return node


SCORE_CASES = [
    (make_pod(), [0, 1, 2], [100, 50, 0]),
    (make_pod().toleration("t0", "v", effect="PreferNoSchedule"), [0, 1, 2], [100, 100, 0]),
    (make_pod().toleration("t0", "v"), [0, 1, 2], [100, 100, 0]),
    (make_pod().toleration("t0", "v", effect="NoSchedule"), [0, 1, 2], [100, 50, 0]),
    (make_pod().toleration(operator="Exists"), [0, 1, 2], [100, 100, 100]),
    (make_pod(), [1, 3, 3], [67, 0, 0]),
]


@pytest.mark.parametrize(
    ("pod", "taint_counts", "expected"),
    SCORE_CASES,
    ids=[
        "fewer intolerable PreferNoSchedule taints score higher",
        "PreferNoSchedule toleration removes that taint from the count",
        "toleration with empty effect counts for PreferNoSchedule",
        "NoSchedule toleration does not count for PreferNoSchedule taints",
        "when no node has an intolerable taint every node gets 100",
        "scores are scaled by the worst node then reversed",
    ],
)
def test_score(pod: PodBuilder, taint_counts: list[int], expected: list[int]) -> None:
    nodes = [
        _prefer(make_node(f"n{i}"), *(f"t{j}" for j in range(count)))
        for i, count in enumerate(taint_counts)
    ]
    assert _normalized(pod, nodes) == expected


def test_pre_score_skips_when_no_node_has_prefer_no_schedule_taints() -> None:
    snapshot = snapshot_of([make_node("a").taint("gpu", "bad"), make_node("b")])
    status = TaintToleration().pre_score(CycleState(), make_pod().view(), snapshot, snapshot.nodes)
    assert status is SKIP


def _runner(*, with_affinity: bool = False) -> ProfileRunner:
    taints = TaintToleration()
    affinity = NodeAffinity()
    return ProfileRunner(
        Profile(
            scheduler_name="gpu-scheduler",
            queue_sort=PrioritySort(),
            pre_filter=(affinity,) if with_affinity else (),
            filter=(affinity, taints) if with_affinity else (taints,),
            pre_score=(taints,),
            score=(WeightedScorer(taints, 1, taints),),
        )
    )


def test_runner_reports_affinity_and_taint_reasons_together() -> None:
    snapshot = snapshot_of(
        [
            make_node("n1"),
            make_node("n2").label("pool", "gpu").taint("gpu", "bad"),
            make_node("n3").label("pool", "gpu").taint("gpu", "bad"),
        ]
    )
    pod = make_pod("p").node_selector(pool="gpu").view()
    result = _runner(with_affinity=True).schedule_one(pod, snapshot)
    assert result.node_name is None
    assert result.message() == (
        "0/3 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, "
        "2 node(s) had untolerated taint {gpu: bad}."
    )


def test_runner_prefers_the_node_without_prefer_no_schedule_taints() -> None:
    snapshot = snapshot_of(
        [
            make_node("n1").taint("spot", "yes", "PreferNoSchedule"),
            make_node("n2"),
            make_node("n3").taint("spot", "yes", "PreferNoSchedule").taint("gpu", "bad"),
        ]
    )
    for seed in range(5):
        result = ProfileRunner(_runner().profile, seed).schedule_one(
            make_pod(f"p{seed}").view(), snapshot
        )
        assert result.node_name == "n2"
        snapshot.forget(result.pod)
