"""The single-pod planner's per-node facts kept between plans (preemption/node_facts.py): the
bound they give is the bound read from the pods, and a memo shared between plans never
changes a plan."""

from __future__ import annotations

import dataclasses

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from batchsched.model.pod import PodView
from batchsched.preemption import NoPlan, PreemptionPlan, PreemptionRequest, plan_preemption
from batchsched.preemption.cost import demand, node_lower_bound, shortfall
from batchsched.preemption.node_facts import FactsMemo, build_lone_facts
from batchsched.preemption.units import collect
from batchsched.snapshot import Snapshot
from tests.builders import make_node, make_pod
from tests.preemption.scenario import NOW, request, runner

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def small_node(name: str) -> Snapshot:
    return Snapshot([make_node(name).cpu("8").memory("64Gi").gpus(8).view()])


def lone(
    name: str, cpu: int, gpus: int, priority: int, node: str, deleting: bool = False
) -> PodView:
    builder = make_pod(name, "ml").cpu(str(cpu)).priority(priority).node(node)
    if gpus:
        builder = builder.gpus(gpus)
    if deleting:
        builder = builder.set("metadata.deletionTimestamp", "2026-01-01T00:00:00Z")
    return builder.view()


@st.composite
def nodes_with_lone_pods(draw: st.DrawFn) -> tuple[Snapshot, PreemptionRequest]:
    snapshot = small_node("n1")
    running, started = [], {}
    cpu_left, gpus_left = 8, 8
    for i in range(draw(st.integers(0, 6))):
        cpu = draw(st.integers(0, min(3, cpu_left)))
        gpus = draw(st.integers(0, min(3, gpus_left)))
        cpu_left, gpus_left = cpu_left - cpu, gpus_left - gpus
        pod = lone(f"p{i}", cpu, gpus, draw(st.integers(0, 4)), "n1", draw(st.booleans()))
        snapshot.assume(pod, "n1")
        running.append(pod)
        start = draw(st.one_of(st.none(), st.floats(NOW - 5000, NOW + 5)))
        if start is not None:
            started[pod.uid] = start
    preemptor = make_pod("high", "ml").cpu(str(draw(st.integers(0, 8))))
    preemptor = preemptor.gpus(draw(st.integers(1, 8))).priority(draw(st.integers(1, 5)))
    return snapshot, request([preemptor.view()], running, started=started)


@SETTINGS
@given(nodes_with_lone_pods())
def test_the_kept_facts_give_the_bound_read_from_the_pods(
    case: tuple[Snapshot, PreemptionRequest],
) -> None:
    snapshot, req = case
    info = snapshot.get("n1")
    assert info is not None
    need = demand(req.preemptor)
    short = shortfall(info, need)
    expected = node_lower_bound(short, collect(req, snapshot).facts_on("n1", short))
    facts = build_lone_facts(info, req.priority, need, req.started)
    got = None if facts is None else facts.bound(req.now)
    if facts is not None and req.now - facts.latest_start < req.min_runtime_s:
        return  # a pod too young for the memo: the planner reads this node from its pods
    assert got == expected


def basic_cluster(nodes: int) -> tuple[Snapshot, dict[str, float]]:
    """PreemptionBasic in small: four 900m pods fill each 4-cpu node; starts differ."""
    views = [make_node(f"n{i}").cpu("4").memory("32Gi").view() for i in range(nodes)]
    running = [
        make_pod(f"low-{i}-{j}", "ml").cpu("900m").priority(j % 2).node(f"n{i}").view()
        for i in range(nodes)
        for j in range(4)
    ]
    started = {p.uid: NOW - 100 - (7 * k) % 31 for k, p in enumerate(running)}
    return Snapshot(views, running), started


def high(i: int) -> PodView:
    return make_pod(f"high-{i}", "ml").cpu("3").priority(10).view()


def apply(snapshot: Snapshot, plan: PreemptionPlan, pod: PodView) -> None:
    for victim in plan.victim_pods():
        snapshot.forget(victim)
    snapshot.assume(pod, plan.placements[pod.uid])


def test_a_memo_shared_by_a_run_of_plans_changes_none_of_them() -> None:
    snapshot, started = basic_cluster(6)
    memo = FactsMemo()
    for i in range(6):
        pod = high(i)
        running = [p for info in snapshot.nodes for p in info.pods.values()]
        req = dataclasses.replace(request([pod], running), started=started)
        fresh = plan_preemption(req, snapshot, runner())
        kept = plan_preemption(req, snapshot, runner(), memo)
        assert isinstance(fresh, PreemptionPlan)
        assert kept == fresh
        apply(snapshot, kept, pod)


def test_a_node_that_changed_since_the_last_plan_is_read_again() -> None:
    # One pod finishes on the last node: it needs one victim fewer there than anywhere
    # else, which only a bound read after the change can tell.
    snapshot, started = basic_cluster(4)
    memo = FactsMemo()
    running = [p for info in snapshot.nodes for p in info.pods.values()]
    req = dataclasses.replace(request([high(0)], running), started=started)
    first = plan_preemption(req, snapshot, runner(), memo)
    assert isinstance(first, PreemptionPlan)
    last = snapshot.nodes[-1]
    snapshot.forget(next(iter(last.pods.values())))
    again = plan_preemption(req, snapshot, runner(), memo)
    assert isinstance(again, PreemptionPlan)
    assert again == plan_preemption(req, snapshot, runner())
    assert again.placements == {high(0).uid: last.name}
    assert len(again.victim_pods()) == len(first.victim_pods()) - 1


def test_a_pod_inside_the_minimum_runtime_is_spared_even_when_its_node_was_kept() -> None:
    snapshot, started = basic_cluster(2)
    memo = FactsMemo()
    running = [p for info in snapshot.nodes for p in info.pods.values()]
    req = dataclasses.replace(request([high(0)], running), started=started)
    assert isinstance(plan_preemption(req, snapshot, runner(), memo), PreemptionPlan)
    # The same nodes, unchanged, asked again with a minimum runtime none of the pods has run.
    young = dataclasses.replace(req, min_runtime_s=3600.0)
    answer = plan_preemption(young, snapshot, runner(), memo)
    assert isinstance(answer, NoPlan)
    assert "inside the minimum runtime" in answer.reason
