"""NodeResourcesFit: fit reasons, args validation, and the three scoring strategies.

Score cases marked "kube:" are kube-scheduler's own table cases (least/most allocated tests)
and the worked example of the resource bin packing docs, rebuilt with our builders.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from batchsched.framework.cycle_state import CycleState
from batchsched.framework.profile import Profile, WeightedScorer
from batchsched.framework.runner import ProfileRunner
from batchsched.framework.status import OK, Code, Status
from batchsched.plugins.node_resources_fit import NodeResourcesFit, NodeResourcesFitArgs
from batchsched.plugins.priority_sort import PrioritySort
from batchsched.plugins.resource_scoring import broken_linear
from tests.builders import NodeBuilder, PodBuilder, make_node, make_pod, snapshot_of


def pod_of(name: str, *containers: dict[str, str | int], node: str = "") -> PodBuilder:
    """A pod whose containers request exactly these amounts (none: a pod without containers)."""
    specs = [
        {"name": f"c{i}", "image": "busybox", "resources": {"requests": dict(requests)}}
        for i, requests in enumerate(containers)
    ]
    pod = make_pod(name).set("spec.containers", specs)
    return pod.node(node) if node else pod


def node_of(
    name: str, cpu: str, memory: str, extended: dict[str, int] | None = None
) -> NodeBuilder:
    node = make_node(name).cpu(cpu).memory(memory)
    for resource, amount in (extended or {}).items():
        node = node.res(resource, amount)
    return node


def fit_args(**raw: Any) -> NodeResourcesFitArgs:
    return NodeResourcesFitArgs.model_validate(raw)


def run_filter(
    pod: PodBuilder,
    node: NodeBuilder,
    running: list[PodBuilder] | None = None,
    args: NodeResourcesFitArgs | None = None,
) -> Status:
    plugin = NodeResourcesFit(args)
    snapshot = snapshot_of([node], running or [])
    state = CycleState()
    view = pod.view()
    _, status = plugin.pre_filter(state, view, snapshot)
    assert status is OK  # never SKIP: every pod needs the pod-count check
    return plugin.filter(state, view, snapshot.nodes[0])


def run_score(
    pod: PodBuilder,
    nodes: list[NodeBuilder],
    running: list[PodBuilder] | None = None,
    args: NodeResourcesFitArgs | None = None,
) -> list[int]:
    plugin = NodeResourcesFit(args)
    snapshot = snapshot_of(nodes, running or [])
    state = CycleState()
    view = pod.view()
    assert plugin.pre_score(state, view, snapshot, snapshot.nodes) is OK
    return [plugin.score(state, view, info) for info in snapshot.nodes]


# --- Filter -----------------------------------------------------------------------------------

BUSY = pod_of("busy", {"cpu": "3", "memory": "16Gi"}, node="n1")
FILTER_CASES: list[tuple[PodBuilder, NodeBuilder, list[PodBuilder], tuple[str, ...]]] = [
    (pod_of("p"), make_node("n1"), [], ()),
    (pod_of("p", {"cpu": "1", "memory": "16Gi"}), make_node("n1"), [BUSY], ()),
    (pod_of("p", {"cpu": "1001m"}), make_node("n1"), [BUSY], ("Insufficient cpu",)),
    (
        pod_of("p", {"cpu": "2", "memory": "17Gi"}),
        make_node("n1"),
        [BUSY],
        ("Insufficient cpu", "Insufficient memory"),
    ),
    (pod_of("p"), make_node("n1").pods(1), [pod_of("r", node="n1")], ("Too many pods",)),
    (
        pod_of("p", {"cpu": "2", "memory": "17Gi", "ephemeral-storage": "1Gi"}),
        make_node("n1").pods(1),
        [BUSY],
        (
            "Too many pods",
            "Insufficient cpu",
            "Insufficient memory",
            "Insufficient ephemeral-storage",
        ),
    ),
    (pod_of("p", {"nvidia.com/gpu": 1}), make_node("n1"), [], ("Insufficient nvidia.com/gpu",)),
    (
        pod_of("p", {"nvidia.com/gpu": 2}),
        make_node("n1").gpus(8),
        [pod_of("r", {"nvidia.com/gpu": 6}, node="n1")],
        (),
    ),
    (
        pod_of("p", {"nvidia.com/gpu": 3}),
        make_node("n1").gpus(8),
        [pod_of("r", {"nvidia.com/gpu": 6}, node="n1")],
        ("Insufficient nvidia.com/gpu",),
    ),
    (
        pod_of("p", {"memory": "1Gi"}),
        make_node("n1").cpu("1"),
        [pod_of("r", {"cpu": "2"}, node="n1")],
        (),
    ),
    (
        pod_of("p", {"cpu": "1", "example.com/foo": 1, "nvidia.com/gpu": 1}),
        make_node("n1").cpu("500m"),
        [],
        ("Insufficient cpu", "Insufficient example.com/foo", "Insufficient nvidia.com/gpu"),
    ),
    (
        pod_of("p", {"hugepages-2Mi": "4Mi"}),
        make_node("n1").res("hugepages-2Mi", "2Mi"),
        [],
        ("Insufficient hugepages-2Mi",),
    ),
]


@pytest.mark.parametrize(
    ("pod", "node", "running", "reasons"),
    FILTER_CASES,
    ids=[
        "pod requesting nothing fits an empty node",
        "pod fits exactly at the limit of cpu and memory",
        "one millicore over the free cpu is Insufficient cpu",
        "pod short of cpu and memory gets both reasons",
        "node with every pod slot taken reports Too many pods",
        "full node short of everything reports pods, cpu, memory and storage",
        "GPU pod on a node without GPUs is Insufficient nvidia.com/gpu",
        "GPU pod fits the GPUs other pods left free",
        "GPU pod needing more GPUs than are left is Insufficient nvidia.com/gpu",
        "pod not asking for cpu fits a node over-committed on cpu",
        "extended resources are each reported, in name order, after cpu",
        "hugepages are checked like any other resource",
    ],
)
def test_filter(
    pod: PodBuilder, node: NodeBuilder, running: list[PodBuilder], reasons: tuple[str, ...]
) -> None:
    status = run_filter(pod, node, running)
    if not reasons:
        assert status is OK
        return
    assert status.code is Code.UNSCHEDULABLE  # preemption can make room
    assert status.reasons == reasons


IGNORE_CASES = [
    ({"ignoredResources": ["example.com/foo"]}, {"example.com/foo": 1}, ()),
    ({"ignoredResourceGroups": ["example.com"]}, {"example.com/foo": 1, "example.com/bar": 2}, ()),
    (
        {"ignoredResources": ["example.com/foo"]},
        {"example.com/foo": 1, "nvidia.com/gpu": 1},
        ("Insufficient nvidia.com/gpu",),
    ),
    (
        {"ignoredResourceGroups": ["example"]},
        {"example.com/foo": 1},
        ("Insufficient example.com/foo",),
    ),
    (
        {"ignoredResources": ["hugepages-2Mi"]},
        {"hugepages-2Mi": "2Mi"},
        ("Insufficient hugepages-2Mi",),
    ),
]


@pytest.mark.parametrize(
    ("raw_args", "requests", "reasons"),
    IGNORE_CASES,
    ids=[
        "ignored extended resource the node lacks is not checked",
        "every resource in an ignored group is skipped",
        "ignoring one extended resource still checks the others",
        "a group matches the whole prefix before the slash, not a part of it",
        "native resources are checked even when named in ignoredResources",
    ],
)
def test_ignored_resources(
    raw_args: dict[str, Any], requests: dict[str, str | int], reasons: tuple[str, ...]
) -> None:
    status = run_filter(pod_of("p", requests), make_node("n1"), args=fit_args(**raw_args))
    assert status.reasons == reasons
    assert (status is OK) == (not reasons)


def test_same_reasons_reuse_one_status_object() -> None:
    plugin = NodeResourcesFit()
    snapshot = snapshot_of([make_node("n1").cpu("1"), make_node("n2").cpu("1")])
    state = CycleState()
    pod = pod_of("p", {"cpu": "2"}).view()
    plugin.pre_filter(state, pod, snapshot)
    first, second = (plugin.filter(state, pod, info) for info in snapshot.nodes)
    assert first is second


# --- Args ---------------------------------------------------------------------------------------


def test_default_args_are_least_allocated_on_cpu_and_memory() -> None:
    strategy = NodeResourcesFitArgs().scoring_strategy
    assert strategy.type == "LeastAllocated"
    assert [(r.name, r.weight) for r in strategy.resources] == [("cpu", 1), ("memory", 1)]


def test_unset_or_zero_weight_means_one_and_empty_resources_mean_the_defaults() -> None:
    args = fit_args(
        scoringStrategy={"type": "MostAllocated", "resources": [{"name": "cpu", "weight": 0}]}
    )
    assert [(r.name, r.weight) for r in args.scoring_strategy.resources] == [("cpu", 1)]
    args = fit_args(scoringStrategy={"type": "MostAllocated", "resources": []})
    assert [r.name for r in args.scoring_strategy.resources] == ["cpu", "memory"]


BAD_ARGS = [
    ({"scoringStrategy": {"type": "Spread"}}, "scoringStrategy.type"),
    ({"scoringStrategy": {"resources": []}}, "scoringStrategy.type"),
    (
        {
            "scoringStrategy": {
                "type": "LeastAllocated",
                "resources": [{"name": "cpu", "weight": 101}],
            }
        },
        "resource weight of cpu not in valid range (0, 100]",
    ),
    (
        {
            "scoringStrategy": {
                "type": "LeastAllocated",
                "resources": [{"name": "cpu", "weight": -1}],
            }
        },
        "resource weight of cpu not in valid range (0, 100]",
    ),
    (
        {"scoringStrategy": {"type": "RequestedToCapacityRatio"}},
        "at least one point must be specified",
    ),
    (
        {
            "scoringStrategy": {
                "type": "RequestedToCapacityRatio",
                "requestedToCapacityRatio": {
                    "shape": [{"utilization": 50, "score": 1}, {"utilization": 50, "score": 2}]
                },
            }
        },
        "values must be sorted in increasing order",
    ),
    (
        {
            "scoringStrategy": {
                "type": "RequestedToCapacityRatio",
                "requestedToCapacityRatio": {"shape": [{"utilization": 0, "score": 11}]},
            }
        },
        "[0].score: 11 not in valid range [0, 10]",
    ),
    (
        {
            "scoringStrategy": {
                "type": "RequestedToCapacityRatio",
                "requestedToCapacityRatio": {"shape": [{"utilization": 101, "score": 1}]},
            }
        },
        "[0].utilization: 101 not in valid range [0, 100]",
    ),
    ({"ignoredResourceGroups": ["example.com/foo"]}, "resource group name can't contain '/'"),
    ({"ignoredResources": ["not a name"]}, "is not a qualified resource name"),
    ({"ignoredResource": ["example.com/foo"]}, "Extra inputs are not permitted"),
]


@pytest.mark.parametrize(
    ("raw", "message"),
    BAD_ARGS,
    ids=[
        "an unknown strategy type is rejected",
        "a strategy without a type is rejected",
        "a weight over 100 is rejected",
        "a negative weight is rejected",
        "RequestedToCapacityRatio without a shape is rejected",
        "shape utilizations must strictly increase",
        "shape scores stay within 0..10",
        "shape utilizations stay within 0..100",
        "a resource group cannot contain a slash",
        "an ignored resource must be a qualified name",
        "a misspelled key is rejected",
    ],
)
def test_bad_args(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message.replace("(", r"\(").replace("[", r"\[")):
        fit_args(**raw)


# --- Score --------------------------------------------------------------------------------------

CPU_MEM_POD = pod_of("p", {"cpu": "1000", "memory": "2000"}, {"cpu": "2000", "memory": "3000"})
LEAST_CASES: list[tuple[PodBuilder, list[NodeBuilder], list[PodBuilder], list[int]]] = [
    (pod_of("p"), [node_of("n1", "4000", "10000"), node_of("n2", "4000", "10000")], [], [100, 100]),
    (CPU_MEM_POD, [node_of("n1", "4000", "10000"), node_of("n2", "6000", "10000")], [], [37, 50]),
    (
        pod_of("p"),
        [node_of("n1", "10000", "20000"), node_of("n2", "10000", "20000")],
        [
            pod_of("a", {"cpu": "3000", "memory": "0"}, node="n1"),
            pod_of("b", {"cpu": "3000", "memory": "0"}, node="n1"),
            pod_of("c", {"cpu": "3000", "memory": "0"}, node="n2"),
            pod_of("d", {"cpu": "3000", "memory": "5000"}, node="n2"),
        ],
        [70, 57],
    ),
    (
        CPU_MEM_POD,
        [node_of("n1", "10000", "20000"), node_of("n2", "10000", "50000")],
        [
            pod_of("a", {"cpu": "3000", "memory": "0"}, node="n1"),
            pod_of("b", {"cpu": "3000", "memory": "5000"}, node="n2"),
        ],
        [57, 60],
    ),
    (
        pod_of("p", {"cpu": "3000", "memory": "0"}),
        [node_of("n1", "4000", "10000"), node_of("n2", "4000", "10000")],
        [
            pod_of("a", {"cpu": "3000", "memory": "0"}, node="n1"),
            pod_of("b", {"cpu": "3000", "memory": "5000"}, node="n2"),
        ],
        [50, 25],
    ),
    (pod_of("p", {}), [node_of("n1", "1", "1000Mi")], [], [85]),
    (pod_of("p"), [make_node("n1").res("cpu", "0").res("memory", "0")], [], [0]),
]


@pytest.mark.parametrize(
    ("pod", "nodes", "running", "expected"),
    LEAST_CASES,
    ids=[
        "kube: nothing scheduled, nothing requested",
        "kube: nothing scheduled, resources requested, differently sized nodes",
        "kube: no resources requested, pods scheduled with resources",
        "kube: resources requested, pods scheduled with resources, differently sized nodes",
        "kube: requested resources exceed node capacity",
        "a container without requests counts as 100m cpu and 200Mi memory",
        "a node with no cpu or memory at all scores 0",
    ],
)
def test_least_allocated(
    pod: PodBuilder, nodes: list[NodeBuilder], running: list[PodBuilder], expected: list[int]
) -> None:
    assert run_score(pod, nodes, running) == expected


def strategy(kind: str, resources: list[tuple[str, int]], **extra: Any) -> NodeResourcesFitArgs:
    specs = [{"name": name, "weight": weight} for name, weight in resources]
    return fit_args(scoringStrategy={"type": kind, "resources": specs, **extra})


WEIGHTED_CASES = [
    (
        "LeastAllocated",
        [("memory", 2), ("cpu", 1)],
        CPU_MEM_POD,
        [node_of("n1", "4000", "10000"), node_of("n2", "6000", "10000")],
        [41, 50],
    ),
    (
        "LeastAllocated",
        [("cpu", 1), ("memory", 1), ("example.com/foo", 1)],
        CPU_MEM_POD,
        [node_of("n1", "6000", "10000"), node_of("n2", "6000", "10000", {"example.com/foo": 4})],
        [50, 50],
    ),
    (
        "LeastAllocated",
        [("cpu", 1), ("memory", 1), ("example.com/foo", 1)],
        pod_of("p", {"cpu": "3000", "memory": "5000", "example.com/foo": 2}),
        [
            node_of("n1", "6000", "10000", {"example.com/foo": 4}),
            node_of("n2", "6000", "10000", {"example.com/foo": 10}),
        ],
        [50, 60],
    ),
    (
        "LeastAllocated",
        [("example.com/foo", 2), ("cpu", 1), ("memory", 1)],
        pod_of("p", {"cpu": "3000", "memory": "4000"}),
        [node_of("n1", "6000", "10000"), node_of("n2", "6000", "10000", {"example.com/foo": 4})],
        [55, 55],
    ),
    (
        "LeastAllocated",
        [("cpu", 1), ("memory", 2)],
        CPU_MEM_POD,
        [node_of("n1", "4000", "10000"), node_of("n2", "6000", "10000")],
        [41, 50],
    ),
    (
        "MostAllocated",
        [("cpu", 1), ("memory", 1)],
        CPU_MEM_POD,
        [node_of("n1", "4000", "10000"), node_of("n2", "6000", "10000")],
        [62, 50],
    ),
    (
        "MostAllocated",
        [("cpu", 1), ("memory", 1)],
        pod_of("p", {"cpu": "5000", "memory": "9000"}),
        [node_of("n1", "4000", "10000")],
        [95],
    ),
]


@pytest.mark.parametrize(
    ("kind", "resources", "pod", "nodes", "expected"),
    WEIGHTED_CASES,
    ids=[
        "kube: memory weighted twice cpu, differently sized nodes",
        "the same weights listed cpu first score the same",
        "kube: an extended resource the pod does not request is left out",
        "kube: an extended resource the pod requests is scored",
        "kube: a resource the node does not have is left out",
        "kube: MostAllocated favours the node the pod fills most",
        "MostAllocated caps a resource requested beyond capacity at 100",
    ],
)
def test_weighted_strategies(
    kind: str,
    resources: list[tuple[str, int]],
    pod: PodBuilder,
    nodes: list[NodeBuilder],
    expected: list[int],
) -> None:
    assert run_score(pod, nodes, args=strategy(kind, resources)) == expected


@settings(max_examples=200, deadline=None)
@given(
    st.integers(0, 64_000),
    st.integers(0, 2**36),
    st.lists(st.tuples(st.integers(0, 64_000), st.integers(0, 2**36)), max_size=3),
    st.integers(0, 8_000),
    st.integers(0, 2**34),
    st.integers(1, 100),
    st.integers(1, 100),
)
def test_default_fast_path_scores_like_the_general_one(
    alloc_cpu: int,
    alloc_memory: int,
    running: list[tuple[int, int]],
    cpu: int,
    memory: int,
    cpu_weight: int,
    memory_weight: int,
) -> None:
    node = make_node("n1").cpu(f"{alloc_cpu}m").memory(str(alloc_memory))
    others = [
        pod_of(f"r{i}", {"cpu": f"{c}m", "memory": str(m)}, node="n1")
        for i, (c, m) in enumerate(running)
    ]
    pod = pod_of("p", {"cpu": f"{cpu}m", "memory": str(memory)})
    # Listing memory first takes the general path; the order changes nothing else.
    fast = strategy("LeastAllocated", [("cpu", cpu_weight), ("memory", memory_weight)])
    general = strategy("LeastAllocated", [("memory", memory_weight), ("cpu", cpu_weight)])
    assert run_score(pod, [node], others, fast) == run_score(pod, [node], others, general)


def ratio_args(
    shape: list[tuple[int, int]], resources: list[tuple[str, int]]
) -> NodeResourcesFitArgs:
    points = [{"utilization": u, "score": s} for u, s in shape]
    return strategy(
        "RequestedToCapacityRatio", resources, requestedToCapacityRatio={"shape": points}
    )


@pytest.mark.parametrize(
    ("shape", "utilization", "expected"),
    [
        ([(0, 0), (100, 100)], 50, 50),
        ([(0, 100), (100, 0)], 33, 67),
        ([(0, 100), (30, 0)], 1, 97),
        ([(0, 0), (50, 100), (100, 0)], 75, 50),
        ([(20, 20), (80, 80)], 10, 20),
        ([(20, 20), (80, 80)], 90, 80),
    ],
    ids=[
        "a rising line halfway up scores half",
        "a falling line interpolates downward",
        "a falling segment truncates toward zero as Go does, not down",
        "a peaked shape interpolates on the segment the utilization falls in",
        "below the first point the curve is flat at its score",
        "above the last point the curve is flat at its score",
    ],
)
def test_shape_interpolation(shape: list[tuple[int, int]], utilization: int, expected: int) -> None:
    assert broken_linear(shape, utilization) == expected


RATIO_CASES = [
    (
        [(0, 0), (100, 10)],
        [("intel.com/foo", 5), ("memory", 1), ("cpu", 3)],
        pod_of("p", {"intel.com/foo": 2, "memory": "256Mi", "cpu": "2"}),
        [
            node_of("n1", "8", "1Gi", {"intel.com/foo": 4}),
            node_of("n2", "8", "1Gi", {"intel.com/foo": 8}),
        ],
        [
            pod_of("a", {"intel.com/foo": 1, "memory": "256Mi", "cpu": "1"}, node="n1"),
            pod_of("b", {"intel.com/foo": 2, "memory": "512Mi", "cpu": "2"}, node="n2"),
        ],
        [60, 53],
    ),
    (
        [(0, 10), (100, 0)],
        [("cpu", 1), ("memory", 1)],
        pod_of("p", {"cpu": "1", "memory": "1Gi"}),
        [node_of("n1", "4", "4Gi"), node_of("n2", "2", "2Gi")],
        [],
        [75, 50],
    ),
    (
        [(0, 0), (100, 10)],
        [("cpu", 1), ("memory", 1)],
        pod_of("p", {"cpu": "0", "memory": "2Gi"}),
        [node_of("n1", "4", "4Gi")],
        [],
        [50],
    ),
]


@pytest.mark.parametrize(
    ("shape", "resources", "pod", "nodes", "running", "expected"),
    RATIO_CASES,
    ids=[
        "kube docs: the bin packing worked example, on today's 0..100 scale",
        "a falling shape spreads: the emptier node scores higher",
        "a resource scoring 0 drops out of the weighted average, as in kube",
    ],
)
def test_requested_to_capacity_ratio(
    shape: list[tuple[int, int]],
    resources: list[tuple[str, int]],
    pod: PodBuilder,
    nodes: list[NodeBuilder],
    running: list[PodBuilder],
    expected: list[int],
) -> None:
    assert run_score(pod, nodes, running, ratio_args(shape, resources)) == expected


# --- End to end through the runner ---------------------------------------------------------------


def profile_with(plugin: NodeResourcesFit) -> Profile:
    return Profile(
        scheduler_name="gpu-scheduler",
        queue_sort=PrioritySort(),
        pre_filter=(plugin,),
        filter=(plugin,),
        pre_score=(plugin,),
        score=(WeightedScorer(plugin, 1, None),),
    )


def place(args: NodeResourcesFitArgs | None, pod: PodBuilder) -> str | None:
    nodes = [make_node("busy"), make_node("empty"), make_node("tiny").cpu("500m")]
    running = [pod_of("r", {"cpu": "2", "memory": "8Gi"}, node="busy")]
    result = ProfileRunner(profile_with(NodeResourcesFit(args))).schedule_one(
        pod.view(), snapshot_of(nodes, running)
    )
    return result.node_name


def test_least_allocated_spreads_to_the_emptier_node() -> None:
    assert place(None, pod_of("p", {"cpu": "1", "memory": "1Gi"})) == "empty"


def test_most_allocated_packs_onto_the_fuller_node() -> None:
    args = strategy("MostAllocated", [("cpu", 1), ("memory", 1)])
    assert place(args, pod_of("p", {"cpu": "1", "memory": "1Gi"})) == "busy"


def test_no_fit_message_counts_every_reason_of_every_node() -> None:
    nodes = [
        make_node("small-cpu").cpu("1"),
        make_node("small-memory").memory("1Gi"),
        make_node("small-both").cpu("1").memory("1Gi"),
        make_node("full").pods(1),
    ]
    running = [pod_of("r", node="full")]
    result = ProfileRunner(profile_with(NodeResourcesFit())).schedule_one(
        pod_of("p", {"cpu": "2", "memory": "2Gi"}).view(), snapshot_of(nodes, running)
    )
    assert result.node_name is None
    assert result.message() == (
        "0/4 nodes are available: 1 Too many pods, 2 Insufficient cpu, 2 Insufficient memory."
    )


def test_gpu_pod_fits_only_the_node_with_free_gpus() -> None:
    nodes = [make_node("cpu-only"), make_node("gpu-full").gpus(8), make_node("gpu").gpus(8)]
    running = [pod_of("r", {"nvidia.com/gpu": 8}, node="gpu-full")]
    runner = ProfileRunner(profile_with(NodeResourcesFit()))
    snapshot = snapshot_of(nodes, running)
    assert (
        runner.schedule_one(pod_of("p", {"nvidia.com/gpu": 4}).view(), snapshot).node_name == "gpu"
    )
    result = runner.schedule_one(pod_of("q", {"nvidia.com/gpu": 5}).view(), snapshot)
    assert result.message() == "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."
