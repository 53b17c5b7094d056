"""The evictions of started plans: how many at once, and in which order between plans."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from batchsched.framework.runner import ProfileRunner
from batchsched.kube.eviction import EvictionOutcome, EvictionResult
from batchsched.model.pod import PodView
from batchsched.preemption.model import NoPlan, PreemptionPlan, PreemptionRequest, VictimGang
from batchsched.snapshot import Snapshot
from tests.runtime.test_preempting import full_node, high, low, world


@dataclass
class PlansByName:
    """Each preemptor's plan: its victims, all on its node."""

    plans: dict[str, tuple[str, list[PodView]]]

    def __call__(
        self, request: PreemptionRequest, snapshot: Snapshot, runner: ProfileRunner
    ) -> PreemptionPlan | NoPlan:
        found = self.plans.get(request.preemptor[0].name)
        if found is None:
            return NoPlan("no victims for it")
        node, victims = found
        units = tuple(VictimGang(f"pod:{v.key}", (v,), v.priority) for v in victims)
        return PreemptionPlan(units, {p.uid: node for p in request.preemptor}, 0, ())


@dataclass
class HeldEvictions:
    """The Eviction API, answering each call only when the test lets it."""

    calls: list[str] = field(default_factory=list)
    answers: list[asyncio.Future[None]] = field(default_factory=list)

    async def evict(self, namespace: str, name: str, uid: str) -> EvictionResult:
        self.calls.append(name)
        answer = asyncio.get_running_loop().create_future()
        self.answers.append(answer)
        await answer
        return EvictionResult(EvictionOutcome.EVICTED)


async def wait_calls(api: HeldEvictions, count: int) -> None:
    async with asyncio.timeout(5):
        while len(api.calls) < count:
            await asyncio.sleep(0)


async def test_a_plan_evicts_its_victims_back_to_back_before_the_next_plan_gets_its_slot() -> None:
    # Slots taken per victim, two plans alternated (a1, b1, a2, b2): with 500 plans every
    # preemptor bound only at the end of the storm.
    plans = {
        "a": ("n1", [low("a1", "n1"), low("a2", "n1")]),
        "b": ("n2", [low("b1", "n2"), low("b2", "n2")]),
    }
    w = world(PlansByName(plans))
    api = HeldEvictions()
    w.preempting.evictor = api
    w.preempting.evictions._slots = asyncio.Semaphore(1)
    for node, victims in plans.values():
        full_node(w, victims, node)
    w.pods.on_add(high("a"))
    w.pods.on_add(high("b"))
    w.run_queue()

    for count in range(1, 5):
        await wait_calls(api, count)
        api.answers[-1].set_result(None)
    await w.scheduler.drain()
    assert api.calls == ["a1", "a2", "b1", "b2"]
