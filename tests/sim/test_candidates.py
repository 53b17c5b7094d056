"""SimCandidates: the nodes a decisions-only run hands the filters, by the profile's filters."""

from __future__ import annotations

import pytest

from batchsched.framework.cycle_state import CycleState
from batchsched.framework.status import OK
from batchsched.sim.candidates import SimCandidates
from batchsched.snapshot import Snapshot
from tests.builders import NodeBuilder, PodBuilder, make_node, make_pod, snapshot_of

SHARE = "batchsched.io/gpu-milli"


def gpu_node(name: str) -> NodeBuilder:
    return make_node(name).cpu("16").memory("64Gi").gpus(2).label("nvidia.com/gpu.product", "G2")


def cluster() -> Snapshot:
    return snapshot_of(
        [gpu_node("full-gpus"), gpu_node("free-gpus"), gpu_node("no-cpu"), make_node("cpu-only")],
        [
            make_pod("a").cpu("1").gpus(2).node("full-gpus"),
            make_pod("b").cpu("16").node("no-cpu"),
        ],
    )


@pytest.mark.parametrize(
    ("fit", "gpus", "pod", "expected"),
    [
        (True, True, make_pod("p").cpu("2").gpus(1), {"free-gpus"}),
        (True, True, make_pod("p").cpu("2").annotation(SHARE, "300"), {"free-gpus"}),
        (True, True, make_pod("p").cpu("2"), {"full-gpus", "free-gpus", "cpu-only"}),
        (True, True, make_pod("p"), {"full-gpus", "free-gpus", "no-cpu", "cpu-only"}),
        (False, True, make_pod("p").cpu("2").gpus(1), {"free-gpus", "no-cpu"}),
        (False, True, make_pod("p").cpu("2"), None),
        (True, False, make_pod("p").cpu("2").gpus(1), {"full-gpus", "free-gpus", "cpu-only"}),
    ],
    ids=[
        "a GPU pod keeps the nodes with free GPUs and cpu",
        "a share keeps the nodes with a GPU with room and cpu",
        "a pod without GPUs keeps every node with cpu left",
        "a pod requesting no cpu fits even a node whose cpu is taken",
        "without NodeResourcesFit only the GPUs count",
        "without NodeResourcesFit a pod without GPUs is not narrowed",
        "without GpuTopology only cpu, memory and pod slots count",
    ],
)
def test_the_candidates_are_the_nodes_the_profiles_filters_could_pass(
    fit: bool, gpus: bool, pod: PodBuilder, expected: set[str] | None
) -> None:
    result, status = SimCandidates(fit, gpus).pre_filter(CycleState(), pod.view(), cluster())
    assert status is OK
    assert (None if result is None else set(result.node_names)) == expected


def test_a_profile_without_either_filter_gets_no_candidates_plugin() -> None:
    assert SimCandidates.for_filters({"TaintToleration"}) is None
    found = SimCandidates.for_filters({"NodeResourcesFit", "GpuTopology"})
    assert found is not None and (found.fit, found.gpus) == (True, True)
