"""A gang that requires one topology domain preempts only inside one domain of that level."""

from __future__ import annotations

import dataclasses

from batchsched.gang.podgroup import PodGroupView
from batchsched.gang.topology import RACK_LABEL, TopologyRequest
from batchsched.model.pod import PodView
from batchsched.preemption import NoPlan, PreemptionPlan, plan_preemption
from batchsched.snapshot import Snapshot
from tests.builders import make_node
from tests.preemption.scenario import gang_pods, group, request, runner

HIGH = 100
# rack -> nodes of 8 GPUs
RACKS = {"r1": ["a1", "a2"], "r2": ["b1", "b2"]}


def racked(pods: list[PodView], racks: dict[str, list[str]] = RACKS) -> Snapshot:
    views = [
        make_node(node).cpu("64").memory("256Gi").gpus(8).label(RACK_LABEL, rack).view()
        for rack, nodes in racks.items()
        for node in nodes
    ]
    return Snapshot(views, pods)


def rack_gang(name: str, members: int, required: bool = True) -> PodGroupView:
    view = group(name, members)
    return dataclasses.replace(view, topology=TopologyRequest(RACK_LABEL, required=required))


def victims(plan: PreemptionPlan | NoPlan) -> list[str]:
    assert isinstance(plan, PreemptionPlan), plan
    return [v.key for v in plan.victims]


def test_every_victim_frees_room_in_the_one_rack_the_gang_goes_to() -> None:
    """The gang (2 x 8 GPUs, one rack) can go to r1 (evicting the two cheap gangs that each
    hold half of a1/a2, and the gang inside r1) or r2 (the two cheap gangs alone): r2 costs
    less, and the more expensive gang inside r1 is spared."""
    running = [
        *gang_pods("spread-1", ["a1", "b1"], 4, priority=-10),
        *gang_pods("spread-2", ["a2", "b2"], 4, priority=-10),
        *gang_pods("inside", ["a1", "a2"], 4),
    ]
    preemptor = gang_pods("high", ["", ""], 8, priority=HIGH)
    req = request(preemptor, running, rack_gang("high", 2))
    plan = plan_preemption(req, racked(running), runner())
    assert sorted(victims(plan)) == ["ml/spread-1", "ml/spread-2"]
    assert isinstance(plan, PreemptionPlan)
    assert sorted(plan.placements.values()) == ["b1", "b2"]


def test_a_cheaper_victim_in_another_rack_wins_when_its_rack_then_holds_the_gang() -> None:
    racks = {**RACKS, "r3": ["c1", "c2"]}
    running = [
        *gang_pods("spread-1", ["a1", "b1"], 4, priority=-10),
        *gang_pods("spread-2", ["a2", "b2"], 4, priority=-10),
        *gang_pods("elsewhere", ["c1", "c2"], 8, priority=-20),
    ]
    preemptor = gang_pods("high", ["", ""], 8, priority=HIGH)
    req = request(preemptor, running, rack_gang("high", 2))
    plan = plan_preemption(req, racked(running, racks), runner())
    assert victims(plan) == ["ml/elsewhere"]
    assert isinstance(plan, PreemptionPlan)
    assert sorted(plan.placements.values()) == ["c1", "c2"]


def test_without_the_requirement_the_same_gang_may_take_victims_anywhere() -> None:
    running = [
        *gang_pods("spread-1", ["a1", "b1"], 8, priority=-10),
        *gang_pods("other", ["a2", "b2"], 8),
    ]
    preemptor = gang_pods("high", ["", ""], 8, priority=HIGH)
    anywhere = request(preemptor, running, group("high", 2))
    assert victims(plan_preemption(anywhere, racked(running), runner())) == ["ml/spread-1"]
    required = request(preemptor, running, rack_gang("high", 2))
    plan = plan_preemption(required, racked(running), runner())
    # One rack must be emptied: both gangs span both racks, so both go.
    assert sorted(victims(plan)) == ["ml/other", "ml/spread-1"]


def test_no_rack_large_enough_is_said_plainly() -> None:
    running = [*gang_pods("low", ["a1", "a2"], 8, priority=-10)]
    preemptor = gang_pods("huge", ["", "", ""], 8, priority=HIGH)
    plan = plan_preemption(
        request(preemptor, running, rack_gang("huge", 3)), racked(running), runner()
    )
    assert isinstance(plan, NoPlan)
    assert "no topology.batchsched.io/rack domain holds" in plan.reason


def test_a_preferred_level_does_not_restrict_victims() -> None:
    running = [
        *gang_pods("spread-1", ["a1", "b1"], 8, priority=-10),
        *gang_pods("other", ["a2", "b2"], 8),
    ]
    preemptor = gang_pods("high", ["", ""], 8, priority=HIGH)
    req = request(preemptor, running, rack_gang("high", 2, required=False))
    assert victims(plan_preemption(req, racked(running), runner())) == ["ml/spread-1"]
