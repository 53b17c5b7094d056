"""batchsched's answers as an extender: its plugins on the snapshot, kube's wire format."""

from __future__ import annotations

import pytest

from batchsched.extenders.answer import (
    NOT_KNOWN,
    asked_names,
    extender_scale,
    filter_answer,
    prioritize_answer,
)
from batchsched.runtime.extender_server import extender_config
from batchsched.snapshot import Snapshot
from gpu.machines import DGX_A100
from tests.builders import NodeBuilder, make_node, make_pod, snapshot_of

PROFILE = next(iter(extender_config().build_profiles().values()))


def _dgx(name: str) -> NodeBuilder:
    return (
        make_node(name)
        .cpu("128")
        .memory("1Ti")
        .gpus(8)
        .label("nvidia.com/gpu.product", DGX_A100.product)
    )


def _cluster() -> Snapshot:
    running = make_pod("running").gpus(6).cpu("1").node("busy")
    return snapshot_of([_dgx("busy"), _dgx("empty"), make_node("cpu-only")], [running])


def test_filter_passes_nodes_with_room_and_says_why_the_others_fail() -> None:
    pod = make_pod("p").gpus(4).view()
    passed, failed, unresolvable = filter_answer(
        PROFILE, _cluster(), pod, ["busy", "empty", "cpu-only", "ghost"]
    )
    assert passed == ["empty"]
    assert failed["busy"] == "node(s) didn't have enough free whole GPUs"
    assert failed["ghost"] == NOT_KNOWN
    assert "cpu-only" in failed
    assert unresolvable == {}


def test_a_wrong_gpu_model_is_unresolvable_so_kube_does_not_preempt_for_it() -> None:
    pod = make_pod("p").gpus(1).annotation("batchsched.io/gpu-models", "NVIDIA-L4").view()
    passed, _, unresolvable = filter_answer(PROFILE, _cluster(), pod, ["busy", "empty"])
    assert passed == []
    assert set(unresolvable) == {"busy", "empty"}


def test_prioritize_ranks_the_packed_node_best_on_the_extender_scale() -> None:
    pod = make_pod("p").gpus(2).cpu("1").view()
    answer = prioritize_answer(PROFILE, _cluster(), pod, ["busy", "empty"])
    assert answer == [{"Host": "busy", "Score": 10}, {"Host": "empty", "Score": 0}]


@pytest.mark.parametrize(
    ("totals", "want"),
    [([], []), ([7], [0]), ([5, 5], [0, 0]), ([0, 100], [0, 10]), ([100, 99, 98], [10, 5, 0])],
)
def test_totals_map_min_max_onto_zero_to_ten(totals: list[int], want: list[int]) -> None:
    assert extender_scale(totals) == want


def test_asked_names_come_from_node_names_or_whole_nodes() -> None:
    assert asked_names({"NodeNames": ["a", "b"], "Nodes": None}) == (["a", "b"], None)
    node = {"metadata": {"name": "a"}}
    assert asked_names({"Nodes": {"items": [node]}, "NodeNames": None}) == (["a"], {"a": node})
