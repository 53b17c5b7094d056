"""The profile runner: sampling, rotation, weighted scores, seeded ties, aggregated reasons."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

import pytest

from batchsched.framework.cycle_state import CycleState
from batchsched.framework.interfaces import PreFilterResult
from batchsched.framework.profile import Profile, WeightedScorer
from batchsched.framework.runner import ProfileRunner, num_feasible_nodes_to_find
from batchsched.framework.status import OK, SKIP, Code, Status, error, unresolvable, unschedulable
from batchsched.model.pod import PodView
from batchsched.plugins.priority_sort import PrioritySort
from batchsched.snapshot import NodeInfo, Snapshot
from tests.builders import make_node, make_pod, snapshot_of


class RejectNodes:
    """Rejects the named nodes with a fixed reason."""

    name: ClassVar[str] = "RejectNodes"

    def __init__(self, names: set[str], status: Status) -> None:
        self.names = names
        self.status = status
        self.calls = 0

    def filter(self, state: CycleState, pod: PodView, node: NodeInfo) -> Status:
        self.calls += 1
        return self.status if node.name in self.names else OK


class ScoreByName:
    """Scores each node from a table; normalizes by doubling, to show normalize runs."""

    name: ClassVar[str] = "ScoreByName"

    def __init__(self, table: dict[str, int], double: bool = False) -> None:
        self.table = table
        self.double = double

    def score(self, state: CycleState, pod: PodView, node: NodeInfo) -> int:
        return self.table.get(node.name, 0)

    def normalize_scores(
        self, state: CycleState, pod: PodView, nodes: Sequence[NodeInfo], scores: list[int]
    ) -> None:
        if self.double:
            scores[:] = [2 * s for s in scores]


class OnlyNodes:
    name: ClassVar[str] = "OnlyNodes"

    def __init__(self, names: frozenset[str] | None, skip: bool = False) -> None:
        self.names = names
        self.skip = skip

    def pre_filter(
        self, state: CycleState, pod: PodView, snapshot: Snapshot
    ) -> tuple[PreFilterResult | None, Status]:
        if self.skip:
            return None, SKIP
        return (PreFilterResult(self.names) if self.names is not None else None), OK


def nodes(count: int) -> Snapshot:
    return snapshot_of([make_node(f"n{i}") for i in range(count)])


def profile(**points: object) -> Profile:
    return Profile("gpu-scheduler", PrioritySort(), **points)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("percentage", "all_nodes", "expected"),
    [
        (None, 50, 50),
        (None, 100, 100),
        (None, 1000, 420),
        (None, 5000, 500),
        (None, 6000, 300),
        (None, 10000, 500),
        (10, 500, 100),
        (50, 1000, 500),
        (100, 5000, 5000),
        (1, 20000, 200),
    ],
    ids=[
        "fewer than 100 nodes are all searched",
        "exactly 100 nodes are all searched",
        "1000 nodes search 42 percent adaptively",
        "5000 nodes search 10 percent adaptively",
        "6000 nodes search 5 percent, the adaptive floor",
        "10000 nodes search the 5 percent floor",
        "a small percentage never drops below 100 nodes",
        "an explicit percentage is used as given",
        "100 percent searches every node",
        "1 percent of 20000 is 200 nodes",
    ],
)
def test_number_of_feasible_nodes_to_find(
    percentage: int | None, all_nodes: int, expected: int
) -> None:
    assert num_feasible_nodes_to_find(percentage, all_nodes) == expected


def test_filtering_stops_once_enough_feasible_nodes_are_found_and_rotates_the_start() -> None:
    snap = nodes(200)
    filt = RejectNodes(set(), unschedulable("never"))
    runner = ProfileRunner(profile(filter=(filt,), percentage_of_nodes_to_score=50))
    first = runner.find_node(make_pod("a").view(), snap)
    assert filt.calls == 100 and first.evaluated_nodes == 100 and first.feasible_nodes == 100
    filt.calls = 0
    runner.find_node(make_pod("b").view(), snap)
    assert filt.calls == 100
    # the second cycle started where the first stopped, so it never saw n0..n99
    assert runner.next_start == 0


def test_failure_message_aggregates_reasons_like_kube_scheduler() -> None:
    snap = nodes(40)
    gpu = RejectNodes({f"n{i}" for i in range(32)}, unschedulable("Insufficient nvidia.com/gpu"))
    taint = RejectNodes(
        {f"n{i}" for i in range(32, 40)}, unresolvable("node(s) had untolerated taint {gpu: bad}")
    )
    result = ProfileRunner(profile(filter=(gpu, taint))).find_node(make_pod().view(), snap)
    assert result.node_name is None and result.failure is not None
    assert result.message() == (
        "0/40 nodes are available: 32 Insufficient nvidia.com/gpu, "
        "8 node(s) had untolerated taint {gpu: bad}."
    )
    assert result.status.code is Code.UNSCHEDULABLE


def test_a_node_with_several_reasons_counts_once_per_reason() -> None:
    snap = nodes(2)
    both = RejectNodes({"n0", "n1"}, unschedulable("Insufficient cpu", "Insufficient memory"))
    result = ProfileRunner(profile(filter=(both,))).find_node(make_pod().view(), snap)
    assert result.message() == "0/2 nodes are available: 2 Insufficient cpu, 2 Insufficient memory."


def test_weighted_normalized_scores_pick_the_best_node() -> None:
    snap = nodes(3)
    low_weight = WeightedScorer(ScoreByName({"n0": 50}, double=True), 1, None)
    high_weight = WeightedScorer(ScoreByName({"n1": 40}), 3, None)
    runner = ProfileRunner(profile(score=(low_weight, high_weight)))
    # n0: 50 (normalizer not attached, so not doubled); n1: 3 * 40 = 120
    assert runner.find_node(make_pod().view(), snap).node_name == "n1"
    plugin = ScoreByName({"n0": 50}, double=True)
    doubled = WeightedScorer(plugin, 2, plugin)
    runner = ProfileRunner(profile(score=(doubled, high_weight)))
    # n0: 2 * 100 = 200 beats n1: 120
    assert runner.find_node(make_pod().view(), snap).node_name == "n0"


def test_a_score_outside_0_to_100_is_an_error_not_a_placement() -> None:
    scorer = WeightedScorer(ScoreByName({"n0": 101}), 1, None)
    result = ProfileRunner(profile(score=(scorer,))).find_node(make_pod().view(), nodes(2))
    assert result.node_name is None and result.status.code is Code.ERROR


def test_ties_are_broken_by_the_seed_and_the_same_seed_repeats_the_choice() -> None:
    picks = {
        seed: [
            ProfileRunner(profile(score=(WeightedScorer(ScoreByName({}), 1, None),)), seed)
            .find_node(make_pod().view(), nodes(10))
            .node_name
            for _ in range(3)
        ]
        for seed in range(20)
    }
    assert len({tuple(p) for p in picks.values()}) > 1, "different seeds should differ somewhere"
    again = ProfileRunner(profile(score=(WeightedScorer(ScoreByName({}), 1, None),)), 7)
    assert again.find_node(make_pod().view(), nodes(10)).node_name == picks[7][0]


def test_pre_filter_result_narrows_the_nodes_and_explains_the_rest() -> None:
    snap = nodes(3)
    runner = ProfileRunner(profile(pre_filter=(OnlyNodes(frozenset({"n2"})),)))
    assert runner.find_node(make_pod().view(), snap).node_name == "n2"
    reject = RejectNodes({"n2"}, unschedulable("Insufficient cpu"))
    runner = ProfileRunner(profile(pre_filter=(OnlyNodes(frozenset({"n2"})),), filter=(reject,)))
    assert runner.find_node(make_pod().view(), snap).message() == (
        "0/3 nodes are available: 1 Insufficient cpu, "
        "2 node(s) didn't satisfy plugin(s) [OnlyNodes]."
    )


def test_pre_filter_skip_turns_the_plugins_filter_off_for_the_cycle() -> None:
    class SkipAndReject(OnlyNodes):
        def filter(self, state: CycleState, pod: PodView, node: NodeInfo) -> Status:
            return unschedulable("should not run")

    plugin = SkipAndReject(None, skip=True)
    result = ProfileRunner(profile(pre_filter=(plugin,), filter=(plugin,))).find_node(
        make_pod().view(), nodes(2)
    )
    assert result.node_name is not None


def test_a_filter_error_aborts_the_cycle() -> None:
    broken = RejectNodes({"n0", "n1"}, error("boom"))
    result = ProfileRunner(profile(filter=(broken,))).find_node(make_pod().view(), nodes(2))
    assert result.node_name is None and result.status.code is Code.ERROR


def test_schedule_one_assumes_the_pod_so_the_next_cycle_sees_it() -> None:
    snap = snapshot_of([make_node("only").cpu("1")])
    runner = ProfileRunner(profile())
    result = runner.schedule_one(make_pod("a").cpu("600m").view(), snap)
    assert result.node_name == "only"
    info = snap.get("only")
    assert info is not None and info.req_milli_cpu == 600 and len(info.pods) == 1


def test_no_nodes_is_unresolvable() -> None:
    result = ProfileRunner(profile()).find_node(make_pod().view(), Snapshot([]))
    assert result.status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE


def test_a_score_plugin_whose_pre_score_is_disabled_is_an_error_not_a_crash() -> None:
    from batchsched.plugins.node_resources_fit import NodeResourcesFit

    fit = NodeResourcesFit()
    # PreFilter on, PreScore off: Score finds no state.
    runner = ProfileRunner(
        profile(pre_filter=(fit,), filter=(fit,), score=(WeightedScorer(fit, 1, None),))
    )
    result = runner.find_node(make_pod().cpu("1").view(), nodes(2))
    assert result.node_name is None and result.status.code is Code.ERROR
    assert "PreFilter or PreScore is disabled" in result.message()
