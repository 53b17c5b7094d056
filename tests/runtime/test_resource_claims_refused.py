"""Pods whose DRA claim does not exist, in the live loop: refused with a reason the user sees,
never bound, not offered to preemption, and a gang with such a member holds nothing
(DynamicResources' PreFilter: a missing claim is unresolvable)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from batchsched.model.pod import PodView
from batchsched.runtime.scheduler import Scheduler
from tests.builders import PodBuilder, make_node, make_pod
from tests.runtime import test_gang_cycle as gang_cycle
from tests.runtime.test_handlers import Binds, Recorded, pop, setup
from tests.runtime.test_preempting import full_node, low, world

CLAIM = {"name": "gpu", "resourceClaimName": "shared-gpu"}
LABEL = "scheduling.x-k8s.io/pod-group"


def claiming(builder: PodBuilder) -> PodBuilder:
    return builder.set("spec.resourceClaims", [CLAIM])


def unschedulable(pod: PodView, nodes: int) -> str:
    return f"0/{nodes} nodes are available: ResourceClaim {pod.namespace}/shared-gpu not found."


async def test_a_pod_with_claims_gets_the_condition_and_event_and_is_never_bound() -> None:
    binds = Binds()
    scheduler, pods, nodes, recorded = setup(binds)
    nodes.on_add(make_node("n1").cpu("8").view())
    pod = claiming(make_pod("dra").cpu("1")).view()
    pods.on_add(pod)
    scheduler.schedule_one(pop(scheduler))
    await scheduler.drain()
    message = unschedulable(pod, 1)
    assert message == "0/1 nodes are available: ResourceClaim default/shared-gpu not found."
    assert recorded.unschedulable == [("default/dra", message)]  # PodScheduled=False
    assert ("default/dra", "FailedScheduling", message) in recorded.events
    assert binds.bound == []
    assert scheduler.queue.counts()["unschedulable"] == 1
    info = scheduler.cache.snapshot.get("n1")
    assert info is not None and not info.pods


@dataclass
class GangRun:
    scheduler: Scheduler
    recorded: Recorded
    binds: Binds

    def counted(self) -> int:
        return self.scheduler.gangs.counted("default/g", self.scheduler.cache.snapshot)

    def failures(self, key: str) -> list[str]:
        return [
            n for k, reason, n in self.recorded.events if (k, reason) == (key, "FailedScheduling")
        ]


async def gang_with_a_claiming_member(min_member: int, members: int) -> GangRun:
    """Two 8-GPU nodes, members of 4 GPUs each (room for all): the last member has a claim."""
    binds = Binds()
    scheduler, pods, nodes, _, recorded = gang_cycle.setup(binds)
    nodes.on_add(make_node("n1").gpus(8).view())
    nodes.on_add(make_node("n2").gpus(8).view())
    gang_cycle.add_group(scheduler, "g", min_member, timeout=60)
    for i in range(members):
        member = make_pod(f"g-{i}").gpus(4).label(LABEL, "g")
        pods.on_add((claiming(member) if i == members - 1 else member).view())
    gang_cycle.run_queue(scheduler)
    await scheduler.drain()
    return GangRun(scheduler, recorded, binds)


@pytest.mark.parametrize(
    ("min_member", "members"),
    [(3, 3), (3, 2)],
    ids=[
        "a complete gang with a claiming member binds none of its members",
        "an incomplete gang with a claiming member reserves none of its members",
    ],
)
async def test_a_gang_with_a_claiming_member_waits_whole(min_member: int, members: int) -> None:
    run = await gang_with_a_claiming_member(min_member, members)
    assert run.binds.bound == []
    assert run.counted() == 0  # nothing reserved at Permit either
    assert run.scheduler.queue.counts()["unschedulable"] == members
    # The gang's Event and each member's PodScheduled=False condition say why.
    told = dict(run.recorded.unschedulable)
    for notes in [run.failures("default/g"), *([told[f"default/g-{i}"]] for i in range(members))]:
        assert notes and notes[-1].startswith(f"gang default/g needs {min_member} more pod(s)")
        assert notes[-1].endswith(unschedulable(claiming(make_pod("x")).view(), 2))


async def test_an_elastic_member_with_claims_is_told_why_it_stays_pending() -> None:
    run = await gang_with_a_claiming_member(min_member=2, members=3)
    assert sorted(name for name, _ in run.binds.bound) == ["default/g-0", "default/g-1"]
    assert run.failures("default/g-2")


async def test_a_pod_with_claims_is_not_offered_to_preemption() -> None:
    w = world()
    full_node(w, [low("v1", "n1"), low("v2", "n1")])
    pod = claiming(make_pod("p").gpus(8).cpu("1").priority(1000)).view()
    w.pods.on_add(pod)
    await w.settle()
    assert w.evictions.evicted == []
    assert w.recorded.unschedulable == [("default/p", unschedulable(pod, 1))]
    assert w.scheduler.metrics.preemption_attempts._value.get() == 0
