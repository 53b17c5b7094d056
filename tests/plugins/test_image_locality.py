from __future__ import annotations

import pytest

from batchsched.framework.cycle_state import CycleState
from batchsched.framework.profile import Profile, WeightedScorer
from batchsched.framework.runner import ProfileRunner
from batchsched.framework.status import OK, SKIP
from batchsched.plugins.image_locality import ImageLocality
from batchsched.plugins.priority_sort import PrioritySort
from tests.builders import NodeBuilder, PodBuilder, make_node, make_pod, snapshot_of

MB = 1024 * 1024


def _scores(pod: PodBuilder, nodes: list[NodeBuilder]) -> list[int] | None:
    plugin = ImageLocality()
    snapshot = snapshot_of(nodes)
    state = CycleState()
    view = pod.view()
    status = plugin.pre_score(state, view, snapshot, snapshot.nodes)
    if status is SKIP:
        return None
    assert status is OK
    return [plugin.score(state, view, info) for info in snapshot.nodes]


Held = tuple[tuple[str, int], ...]  # (image name, size in MB) per image on one node


def _nodes(held: list[Held]) -> list[NodeBuilder]:
    nodes = []
    for i, images in enumerate(held):
        node = make_node(f"n{i}")
        for name, size_mb in images:
            node.image([name], size_mb * MB)
        nodes.append(node)
    return nodes


APP_500: Held = (("app:v1", 500),)

CASES: list[tuple[PodBuilder, list[Held], list[int] | None]] = [
    # 500MB on 1 of 2 nodes counts 250MB: 100*(250-23)/(1000-23) = 23.2
    (make_pod().image("app:v1"), [APP_500, ()], [23, 0]),
    # on every node it counts in full: 100*(500-23)/977 = 48.8
    (make_pod().image("app:v1"), [APP_500] * 3, [48, 48, 48]),
    (make_pod().image("app:v1"), [(("app:v1", 10),)] * 2, [0, 0]),
    (make_pod().image("app:v1"), [(("app:v1", 3000),)] * 2, [100, 100]),
    # two containers raise the ceiling to 2000MB: 100*(1600-23)/(2000-23) = 79.8
    (
        make_pod().image("app:v1").container("side", "side:v1"),
        [(("app:v1", 800), ("side:v1", 800))] * 2,
        [79, 79],
    ),
    (make_pod(), [(("busybox", 500),)] * 2, [48, 48]),
    (make_pod().image("busybox"), [(("busybox:latest", 500),)] * 2, [48, 48]),
    (make_pod().image("app:v1"), [(("app:v2", 500),)], None),
]


@pytest.mark.parametrize(
    ("pod", "held", "expected"),
    CASES,
    ids=[
        "an image on half the nodes counts half its size",
        "an image on every node counts its full size",
        "images below the 23MB floor score 0",
        "images above the per-container ceiling score 100",
        "each container adds 1000MB to the ceiling",
        "a node listing the bare name holds the latest tag",
        "a pod naming the bare image matches the node's latest tag",
        "pre-score skips when no node holds any of the pod's images",
    ],
)
def test_score(pod: PodBuilder, held: list[Held], expected: list[int] | None) -> None:
    assert _scores(pod, _nodes(held)) == expected


def test_a_node_listing_both_names_is_counted_once() -> None:
    both: Held = (("busybox", 500), ("busybox:latest", 500))
    # one node of two holds it: 250MB, as if it were listed once
    assert _scores(make_pod(), _nodes([both, APP_500])) == [23, 0]


def test_runner_places_the_pod_where_its_big_image_already_is() -> None:
    plugin = ImageLocality()
    runner = ProfileRunner(
        Profile(
            scheduler_name="gpu-scheduler",
            queue_sort=PrioritySort(),
            pre_score=(plugin,),
            score=(WeightedScorer(plugin, 1, None),),
        )
    )
    nodes = [
        make_node("n1").image(["trainer:v3"], 50 * MB),
        make_node("n2").image(["trainer:v3"], 50 * MB).image(["cuda:12"], 4000 * MB),
        make_node("n3"),
    ]
    pod = make_pod("p").image("trainer:v3").container("cuda", "cuda:12")
    for seed in range(5):
        runner = ProfileRunner(runner.profile, seed)
        assert runner.find_node(pod.view(), snapshot_of(nodes)).node_name == "n2"
