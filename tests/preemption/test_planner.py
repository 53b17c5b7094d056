"""The preemption planner on small clusters: which victims, and why not when none."""

from __future__ import annotations

import pytest

from batchsched.model.pod import PodView
from batchsched.preemption import NoPlan, PreemptionPlan, plan_preemption
from tests.preemption.scenario import (
    NOW,
    budget,
    cluster,
    fits_after,
    gang_pods,
    group,
    pod,
    request,
    runner,
)

HIGH = 100


def victim_keys(plan: PreemptionPlan | NoPlan) -> list[str]:
    assert isinstance(plan, PreemptionPlan), plan
    return [v.key for v in plan.victims]


def test_a_16_gpu_gang_evicts_exactly_the_two_gangs_that_free_two_whole_nodes() -> None:
    nodes = [("n1", 8), ("n2", 8), ("n3", 8)]
    running = [
        *gang_pods("low-a", ["n1", "n2"], 4),
        *gang_pods("low-b", ["n1", "n2"], 4),
        *gang_pods("low-c", ["n3", "n3"], 4, priority=-5),
    ]
    high = gang_pods("high", ["", ""], 8, priority=HIGH)
    req = request(high, running, group("high", 2))
    plan = plan_preemption(req, cluster(nodes, running), runner())
    assert victim_keys(plan) == ["ml/low-a", "ml/low-b"]
    assert isinstance(plan, PreemptionPlan)
    assert sorted(p.name for p in plan.victim_pods()) == [
        "low-a-0",
        "low-a-1",
        "low-b-0",
        "low-b-1",
    ]
    assert sorted(plan.placements.values()) == ["n1", "n2"]
    assert plan.budget_violations == 0
    assert plan.describe() == (
        "preempting gang ml/low-a (2 pods, 8 GPUs) on n1, n2; "
        "gang ml/low-b (2 pods, 8 GPUs) on n1, n2 for 2 pods nominated to n1, n2"
    )
    assert fits_after(plan, req, nodes, running)


def test_a_pod_protected_by_a_budget_is_spared_when_another_victim_exists() -> None:
    nodes = [("n1", 8), ("n2", 8)]
    guarded = pod("guarded", 8, node="n1", labels={"app": "db"})
    plain = pod("plain", 8, node="n2")
    req = request([pod("high", 8, HIGH)], [guarded, plain], budgets=[budget("db", 0, app="db")])
    plan = plan_preemption(req, cluster(nodes, [guarded, plain]), runner())
    assert victim_keys(plan) == ["pod:ml/plain"]
    assert isinstance(plan, PreemptionPlan) and plan.budget_violations == 0
    assert plan.placements == {pod("high").uid: "n2"}


def test_a_budget_is_broken_and_counted_when_nothing_else_works() -> None:
    # The planner's answer, as kube's: a violation is a last resort. (The runtime does not
    # start such a plan: the Eviction API would refuse it; tests/runtime/test_preempting.py.)
    nodes = [("n1", 8)]
    guarded = pod("guarded", 8, node="n1", labels={"app": "db"})
    req = request([pod("high", 8, HIGH)], [guarded], budgets=[budget("db", 0, app="db")])
    plan = plan_preemption(req, cluster(nodes, [guarded]), runner())
    assert victim_keys(plan) == ["pod:ml/guarded"]
    assert isinstance(plan, PreemptionPlan) and plan.budget_violations == 1
    assert plan.cost[0] == 1
    assert plan.describe().endswith("1 victim beyond a PodDisruptionBudget")


def test_budget_violations_count_victims_beyond_the_budget_as_kube_does() -> None:
    # Two victims under a budget allowing one: one violation (kube counts violating victims).
    nodes = [("n1", 8)]
    guarded = [pod(f"db-{i}", 4, node="n1", labels={"app": "db"}) for i in range(2)]
    req = request([pod("high", 8, HIGH)], guarded, budgets=[budget("db", 1, app="db")])
    plan = plan_preemption(req, cluster(nodes, guarded), runner())
    assert isinstance(plan, PreemptionPlan) and plan.budget_violations == 1


def test_a_budget_with_disruptions_left_is_not_broken() -> None:
    guarded = pod("guarded", 8, node="n1", labels={"app": "db"})
    req = request([pod("high", 8, HIGH)], [guarded], budgets=[budget("db", 1, app="db")])
    plan = plan_preemption(req, cluster([("n1", 8)], [guarded]), runner())
    assert isinstance(plan, PreemptionPlan) and plan.budget_violations == 0


def test_preemption_policy_never_preempts_nothing() -> None:
    low = pod("low", 8, node="n1")
    req = request([pod("high", 8, HIGH, never=True)], [low])
    plan = plan_preemption(req, cluster([("n1", 8)], [low]), runner())
    assert plan == NoPlan("pod ml/high does not preempt: preemptionPolicy is Never")


def test_victims_inside_the_minimum_runtime_are_spared() -> None:
    young = pod("young", 8, node="n1")
    old = pod("old", 8, node="n2")
    started = {young.uid: NOW - 60, old.uid: NOW - 7200}
    req = request([pod("high", 8, HIGH)], [young, old], started=started, min_runtime_s=600)
    plan = plan_preemption(req, cluster([("n1", 8), ("n2", 8)], [young, old]), runner())
    assert victim_keys(plan) == ["pod:ml/old"]


def test_only_young_victims_means_no_plan_and_says_so() -> None:
    young = pod("young", 8, node="n1")
    req = request([pod("high", 8, HIGH)], [young], started={young.uid: NOW - 60}, min_runtime_s=600)
    plan = plan_preemption(req, cluster([("n1", 8)], [young]), runner())
    assert plan == NoPlan(
        "preemption cannot help: no lower-priority pods to evict "
        "(1 inside the minimum runtime of 600s spared)"
    )


def test_reclaimable_pods_of_equal_or_higher_priority_are_candidates() -> None:
    borrower = pod("borrower", 8, HIGH + 10, node="n1")
    req = request([pod("high", 8, HIGH)], [borrower], reclaimable=frozenset({borrower.uid}))
    plan = plan_preemption(req, cluster([("n1", 8)], [borrower]), runner())
    assert victim_keys(plan) == ["pod:ml/borrower"]


def test_equal_priority_pods_that_are_not_reclaimable_are_never_victims() -> None:
    peer = pod("peer", 8, HIGH, node="n1")
    plan = plan_preemption(
        request([pod("high", 8, HIGH)], [peer]), cluster([("n1", 8)], [peer]), runner()
    )
    assert plan == NoPlan("preemption cannot help: no lower-priority pods to evict")


def test_a_gang_preemptor_takes_victims_from_one_node_when_costs_tie() -> None:
    nodes = [("n1", 8), ("n2", 8)]
    running = [pod(f"low-{n}-{i}", 4, node=n) for n in ("n1", "n2") for i in range(2)]
    high = gang_pods("high", ["", ""], 4, priority=HIGH)
    plan = plan_preemption(
        request(high, running, group("high", 2)), cluster(nodes, running), runner()
    )
    assert isinstance(plan, PreemptionPlan)
    assert len(plan.victims) == 2
    assert len({p.node_name for p in plan.victim_pods()}) == 1
    assert len(set(plan.placements.values())) == 1
    assert plan.cost[-2] == 1  # nodes touched


def test_a_gang_victim_goes_whole_even_when_one_member_would_do() -> None:
    nodes = [("n1", 8), ("n2", 8)]
    running = [*gang_pods("low", ["n1", "n2"], 8)]
    plan = plan_preemption(
        request([pod("high", 8, HIGH)], running), cluster(nodes, running), runner()
    )
    assert isinstance(plan, PreemptionPlan)
    assert victim_keys(plan) == ["ml/low"]
    assert sorted(p.name for p in plan.victim_pods()) == ["low-0", "low-1"]


@pytest.mark.parametrize(
    ("lone_priority", "expected"),
    [(0, ["pod:ml/lone"]), (5, ["ml/low"])],
    ids=[
        "of equal priority, a lone pod is preferred to a gang of two",
        "a gang of lower priority goes before a lone pod of higher priority, as in kube",
    ],
)
def test_a_lone_pod_or_a_gang_of_two(lone_priority: int, expected: list[str]) -> None:
    nodes = [("n1", 8), ("n2", 8), ("n3", 8)]
    running = [*gang_pods("low", ["n1", "n2"], 8), pod("lone", 8, lone_priority, node="n3")]
    plan = plan_preemption(
        request([pod("high", 8, HIGH)], running), cluster(nodes, running), runner()
    )
    assert victim_keys(plan) == expected


def test_a_gang_with_a_member_of_equal_priority_is_not_a_candidate() -> None:
    running = [
        pod("mixed-0", 8, 0, node="n1", gang="mixed"),
        pod("mixed-1", 8, HIGH, node="n2", gang="mixed"),
    ]
    req = request([pod("high", 8, HIGH)], running)
    plan = plan_preemption(req, cluster([("n1", 8), ("n2", 8)], running), runner())
    assert plan == NoPlan(
        "preemption cannot help: no lower-priority pods to evict "
        "(1 in gangs with a member that may not go spared)"
    )


def started_ago(**seconds: int) -> dict[str, float]:
    return {f"uid-ml-{name.replace('_', '-')}": NOW - s for name, s in seconds.items()}


# kube-scheduler's DefaultPreemption picks among candidates, in order: fewest PDB violations,
# lowest highest-victim priority, smallest sum of priorities, fewest victims, latest start of
# the highest-priority victims; then ours: fewer GPUs lost. Each row ties every earlier rule.
ORDER = [
    pytest.param(
        8,
        [pod("a", 8, 0, node="n1", labels={"app": "db"})],
        [pod("b0", 4, 5, node="n2"), pod("b1", 4, 5, node="n2")],
        {},
        ["pod:ml/b0", "pod:ml/b1"],
        id="fewer budget violations beat a lower priority and fewer victims",
    ),
    pytest.param(
        8,
        [pod("a", 8, 5, node="n1")],
        [pod("b0", 4, 1, node="n2"), pod("b1", 4, 1, node="n2")],
        {},
        ["pod:ml/b0", "pod:ml/b1"],
        id="a lower highest priority beats fewer victims",
    ),
    pytest.param(
        8,
        [pod("a", 8, 5, node="n1")],
        [pod("b", 8, 1, node="n2")],
        {},
        ["pod:ml/b"],
        id="with as many pods, the lower highest priority wins",
    ),
    pytest.param(
        8,
        [pod("a0", 4, 3, node="n1"), pod("a1", 4, 3, node="n1")],
        [pod("b0", 4, 3, node="n2"), pod("b1", 4, 1, node="n2")],
        {},
        ["pod:ml/b0", "pod:ml/b1"],
        id="with the same highest priority, the smaller sum of priorities wins",
    ),
    pytest.param(
        8,
        [pod("a0", 2, 3, node="n1"), pod("a1", 2, -5, node="n1"), pod("a2", 4, -5, node="n1")],
        [pod("b0", 4, 3, node="n2"), pod("b1", 4, 3, node="n2")],
        {},
        ["pod:ml/b0", "pod:ml/b1"],
        id="a victim more adds to the sum whatever its priority, as kube's offset makes it",
    ),
    pytest.param(
        8,
        [pod("a-top", 4, 2, node="n1"), pod("a-low", 4, 0, node="n1")],
        [pod("b-top", 4, 2, node="n2"), pod("b-low", 4, 0, node="n2")],
        started_ago(a_top=9000, a_low=100, b_top=100, b_low=9000),
        ["pod:ml/b-low", "pod:ml/b-top"],
        id="then the latest start of the highest-priority victims, not of all victims",
    ),
    pytest.param(
        4,
        [pod("a", 8, 1, node="n1")],
        [pod("b", 4, 1, node="n2"), pod("c", 4, 2, node="n2")],
        {},
        ["pod:ml/b"],
        id="with all of kube's rules tied, fewer GPUs lost wins",
    ),
]


@pytest.mark.parametrize(("gpus", "first", "second", "started", "expected"), ORDER)
def test_the_cost_order_picks_the_node_as_kube_scheduler_does(
    gpus: int,
    first: list[PodView],
    second: list[PodView],
    started: dict[str, float],
    expected: list[str],
) -> None:
    running = [*first, *second]
    times = {p.uid: NOW - 3600 for p in running} | started
    req = request(
        [pod("high", gpus, HIGH)], running, started=times, budgets=[budget("db", 0, app="db")]
    )
    plan = plan_preemption(req, cluster([("n1", 8), ("n2", 8)], running), runner())
    assert victim_keys(plan) == expected


def test_the_shortest_running_victim_goes_when_all_else_ties() -> None:
    running = [pod("long", 8, node="n1"), pod("short", 8, node="n2")]
    started = {running[0].uid: NOW - 9000, running[1].uid: NOW - 100}
    req = request([pod("high", 8, HIGH)], running, started=started)
    plan = plan_preemption(req, cluster([("n1", 8), ("n2", 8)], running), runner())
    assert victim_keys(plan) == ["pod:ml/short"]


def test_no_plan_says_what_even_evicting_everything_leaves() -> None:
    nodes = [("n1", 8), ("n2", 8), ("n3", 8)]
    running = [pod(f"low-{n}-{i}", 4, node=n) for n in ("n1", "n2", "n3") for i in range(2)]
    plan = plan_preemption(
        request([pod("huge", 16, HIGH)], running), cluster(nodes, running), runner()
    )
    assert plan == NoPlan(
        "preemption cannot help: even evicting all 6 lower-priority pods leaves ml/huge "
        "unschedulable: 0/3 nodes are available: 3 Insufficient nvidia.com/gpu."
    )


def test_no_plan_for_a_gang_quotes_the_gang_cycle() -> None:
    running = [pod("low", 8, node="n1")]
    high = gang_pods("big", ["", ""], 8, priority=HIGH)
    plan = plan_preemption(
        request(high, running, group("big", 2)), cluster([("n1", 8)], running), runner()
    )
    assert isinstance(plan, NoPlan)
    assert plan.reason.startswith(
        "preemption cannot help: even evicting all 1 lower-priority pod leaves gang ml/big "
        "unplaced: gang ml/big needs 2 more pod(s) placed together"
    )


def test_a_preemptor_that_already_fits_needs_no_plan() -> None:
    running = [pod("low", 4, node="n1")]
    plan = plan_preemption(
        request([pod("high", 4, HIGH)], running), cluster([("n1", 8)], running), runner()
    )
    assert plan == NoPlan("preemption is not needed: pod ml/high fits on n1 as it is")
