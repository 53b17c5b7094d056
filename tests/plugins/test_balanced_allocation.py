"""NodeResourcesBalancedAllocation: scores, the best-effort skip, args, and a runner check.

Cases marked "kube:" are kube-scheduler's own balanced allocation table cases, rebuilt with our
builders (their nodes give cpu in millicores and memory in bytes).
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
from batchsched.framework.status import OK, SKIP
from batchsched.plugins.balanced_allocation import (
    NodeResourcesBalancedAllocation,
    NodeResourcesBalancedAllocationArgs,
)
from batchsched.plugins.node_resources_fit import NodeResourcesFit
from batchsched.plugins.priority_sort import PrioritySort
from batchsched.plugins.resource_scoring import balanced_score
from tests.builders import NodeBuilder, PodBuilder, make_node, make_pod, snapshot_of


def pod_of(name: str, *containers: dict[str, str | int], node: str = "") -> PodBuilder:
    """A pod whose containers request exactly these amounts (none: a pod without containers)."""
    specs = [
        {"name": f"c{i}", "image": "busybox", "resources": {"requests": dict(requests)}}
        for i, requests in enumerate(containers)
    ]
    pod = make_pod(name).set("spec.containers", specs)
    return pod.node(node) if node else pod


def node_of(name: str, milli_cpu: int, memory: int, gpus: int = 0) -> NodeBuilder:
    node = make_node(name).cpu(f"{milli_cpu}m").memory(str(memory))
    return node.gpus(gpus) if gpus else node


CPU_AND_MEMORY = ({"cpu": "1000m", "memory": "2000"}, {"cpu": "2000m", "memory": "3000"})
CPU_ONLY = ({"cpu": "1000m", "memory": "0"}, {"cpu": "2000m", "memory": "0"})
CPU_MEMORY_GPU = (
    {"cpu": "1000m", "memory": "2000"},
    {"cpu": "2000m", "memory": "3000", "nvidia.com/gpu": 3},
)
WITH_GPU = {"resources": [{"name": "cpu"}, {"name": "memory"}, {"name": "nvidia.com/gpu"}]}


def run_score(
    pod: PodBuilder,
    nodes: list[NodeBuilder],
    running: list[PodBuilder],
    raw_args: dict[str, Any] | None = None,
) -> list[int]:
    args = NodeResourcesBalancedAllocationArgs.model_validate(raw_args or {})
    plugin = NodeResourcesBalancedAllocation(args)
    snapshot = snapshot_of(nodes, running)
    state = CycleState()
    view = pod.view()
    assert plugin.pre_score(state, view, snapshot, snapshot.nodes) is OK
    return [plugin.score(state, view, info) for info in snapshot.nodes]


CASES: list[tuple[PodBuilder, list[NodeBuilder], list[PodBuilder], dict[str, Any], list[int]]] = [
    (
        pod_of("p", *CPU_AND_MEMORY),
        [node_of("n1", 4000, 10000), node_of("n2", 6000, 10000)],
        [],
        {},
        [87, 100],
    ),
    (
        pod_of("p", *CPU_AND_MEMORY),
        [node_of("n1", 10000, 20000), node_of("n2", 10000, 20000)],
        [pod_of("a", *CPU_ONLY, node="n1"), pod_of("b", *CPU_AND_MEMORY, node="n2")],
        {},
        [82, 95],
    ),
    (
        pod_of("p", *CPU_AND_MEMORY),
        [node_of("n1", 10000, 20000), node_of("n2", 10000, 50000)],
        [pod_of("a", *CPU_ONLY, node="n1"), pod_of("b", *CPU_AND_MEMORY, node="n2")],
        {},
        [82, 80],
    ),
    (
        pod_of("p", *CPU_ONLY),
        [node_of("n1", 6000, 10000), node_of("n2", 6000, 10000)],
        [pod_of("a", *CPU_ONLY, node="n1"), pod_of("b", *CPU_AND_MEMORY, node="n2")],
        {},
        [50, 75],
    ),
    (
        pod_of("p", {"memory": "0", "nvidia.com/gpu": 1}),
        [node_of("n1", 3500, 40000, gpus=8), node_of("n2", 3500, 40000, gpus=8)],
        [pod_of("a", *CPU_AND_MEMORY, node="n2"), pod_of("b", *CPU_MEMORY_GPU, node="n1")],
        WITH_GPU,
        [70, 65],
    ),
    (
        pod_of("p", *CPU_AND_MEMORY),
        [node_of("n1", 3500, 40000, gpus=8), node_of("n2", 3500, 40000)],
        [],
        WITH_GPU,
        [63, 63],
    ),
    (
        pod_of("p", {"cpu": "1"}),
        [node_of("n1", 4000, 10000)],
        [pod_of("a", {"cpu": "1"}, node="n1")],
        {},
        [75],
    ),
    (
        pod_of("p", {"cpu": "8", "memory": "1000"}),
        [node_of("n1", 4000, 1000)],
        [],
        {},
        [100],
    ),
]


@pytest.mark.parametrize(
    ("pod", "nodes", "running", "raw_args", "expected"),
    CASES,
    ids=[
        "kube: nothing scheduled, resources requested, differently sized nodes",
        "kube: resources requested, pods scheduled with resources",
        "kube: resources requested, pods scheduled with resources, differently sized nodes",
        "kube: requested resources at node capacity",
        "kube: a scalar resource joins the standard deviation of three fractions",
        "kube: a node without the scalar resource leaves it out",
        "plain requests count: a container without memory request adds no memory",
        "fractions over capacity cap at 1",
    ],
)
def test_balanced_allocation(
    pod: PodBuilder,
    nodes: list[NodeBuilder],
    running: list[PodBuilder],
    raw_args: dict[str, Any],
    expected: list[int],
) -> None:
    assert run_score(pod, nodes, running, raw_args) == expected


@pytest.mark.parametrize(
    ("requested", "allocatable", "expected"),
    [
        ([3000, 5000], [4000, 10000], 87),
        ([1, 1], [2, 2], 100),
        ([1], [2], 100),
        ([], [], 100),
        ([4, 0], [4, 0], 100),
        ([4, 0], [4, 10], 50),
    ],
    ids=[
        "two fractions: half their difference is the deviation",
        "equal fractions score the maximum",
        "a single fraction has no deviation",
        "no resources score the maximum",
        "a resource the node lacks is left out",
        "a full resource beside an empty one scores half",
    ],
)
def test_balanced_score(requested: list[int], allocatable: list[int], expected: int) -> None:
    assert balanced_score(requested, allocatable) == expected


@settings(max_examples=200, deadline=None)
@given(
    st.integers(0, 64_000),
    st.integers(0, 2**36),
    st.lists(st.tuples(st.integers(0, 64_000), st.integers(0, 2**36)), max_size=3),
    st.integers(1, 8_000),
    st.integers(0, 2**34),
)
def test_cpu_memory_fast_path_scores_like_the_general_one(
    alloc_cpu: int, alloc_memory: int, running: list[tuple[int, int]], cpu: int, memory: int
) -> None:
    node = make_node("n1").cpu(f"{alloc_cpu}m").memory(str(alloc_memory))
    others = [
        pod_of(f"r{i}", {"cpu": f"{c}m", "memory": str(m)}, node="n1")
        for i, (c, m) in enumerate(running)
    ]
    pod = pod_of("p", {"cpu": f"{cpu}m", "memory": str(memory)})
    # Listing memory first takes the general path; the deviation doesn't depend on order.
    general = {"resources": [{"name": "memory"}, {"name": "cpu"}]}
    assert run_score(pod, [node], others) == run_score(pod, [node], others, general)


def test_best_effort_pod_skips_the_plugin() -> None:
    # kube skips so that pods requesting nothing aren't all drawn to one "balanced" node.
    plugin = NodeResourcesBalancedAllocation()
    snapshot = snapshot_of([make_node("n1")])
    state = CycleState()
    assert plugin.pre_score(state, make_pod("p").view(), snapshot, snapshot.nodes) is SKIP


def test_defaults_are_cpu_and_memory() -> None:
    args = NodeResourcesBalancedAllocationArgs()
    assert [(r.name, r.weight) for r in args.resources] == [("cpu", 1), ("memory", 1)]


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"resources": [{"name": "cpu", "weight": 2}]}, "must be 1"),
        ({"resources": [{"name": "cpu"}, {"name": "cpu"}]}, "duplicate value 'cpu'"),
        ({"resources": [{"name": ""}]}, "at least 1 character"),
        ({"resource": []}, "Extra inputs are not permitted"),
    ],
    ids=[
        "a weight other than 1 is rejected, as kube does",
        "a resource listed twice is rejected",
        "a resource needs a name",
        "a misspelled key is rejected",
    ],
)
def test_bad_args(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        NodeResourcesBalancedAllocationArgs.model_validate(raw)


def test_runner_prefers_the_node_where_cpu_and_memory_fill_evenly() -> None:
    fit = NodeResourcesFit()
    balanced = NodeResourcesBalancedAllocation()
    profile = Profile(
        scheduler_name="gpu-scheduler",
        queue_sort=PrioritySort(),
        pre_filter=(fit,),
        filter=(fit,),
        pre_score=(balanced,),
        score=(WeightedScorer(balanced, 1, None),),
    )
    # After placing the pod: "cpu-heavy" is 75% cpu, 25% memory; "even" is 50% and 50%.
    nodes = [make_node("cpu-heavy"), make_node("even"), make_node("too-small").cpu("500m")]
    running = [
        pod_of("a", {"cpu": "2", "memory": "4Gi"}, node="cpu-heavy"),
        pod_of("b", {"cpu": "1", "memory": "12Gi"}, node="even"),
    ]
    pod = pod_of("p", {"cpu": "1", "memory": "4Gi"}).view()
    result = ProfileRunner(profile).schedule_one(pod, snapshot_of(nodes, running))
    assert result.node_name == "even"
