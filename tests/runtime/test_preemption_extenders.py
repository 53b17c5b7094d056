"""preemptVerb in the live scheduler: a lone pod's plan is put to a real loopback extender before
anything is evicted; the victims it leaves out are not evicted, a node it leaves out (or a
non-ignorable failure) evicts nothing and backs off, and a gang's plan is not sent."""

from __future__ import annotations

from batchsched.extenders.client import ExtenderClient
from batchsched.extenders.fetch import ExtenderSet
from batchsched.extenders.preempt import ExtenderPreemption
from batchsched.extenders.settings import ExtenderSettings
from batchsched.plugins.extenders import with_extenders
from batchsched.runtime.app_config import swap_profiles
from batchsched.runtime.app_extenders import close_extenders
from tests.builders import make_pod
from tests.extenders.fake_extender import Verdicts, keeping, serving
from tests.runtime.test_gang_cycle import add_group as add_gang_group
from tests.runtime.test_preempting import FixedPlanner, World, full_node, high, low, world

LABEL = "scheduling.x-k8s.io/pod-group"


def with_preempting_extender(w: World, url: str, **fields: object) -> None:
    settings = ExtenderSettings.model_validate(
        {"urlPrefix": url, "preemptVerb": "preempt", "nodeCacheCapable": True, **fields}
    )
    extenders = ExtenderSet([], ExtenderPreemption([ExtenderClient(settings)]))
    profiles = with_extenders(w.scheduler.profiles, extenders, 0)
    swap_profiles(w.scheduler, profiles, 0, keep_extenders=False)


def preempted(verdicts: Verdicts) -> list[list[str]]:
    return [[p["UID"] for p in a["NodeNameToMetaVictims"]["n1"]["Pods"]] for _, a in verdicts.calls]  # type: ignore[index]


async def test_victims_the_extender_leaves_out_are_not_evicted() -> None:
    victims = [low("v1", "n1"), low("v2", "n1")]
    w = world(FixedPlanner(victims, "n1"))
    full_node(w, victims)
    verdicts = Verdicts(preempt=lambda args: keeping({"n1": [victims[1].uid]}))
    async with serving(verdicts) as url:
        with_preempting_extender(w, url)
        w.pods.on_add(high("p"))
        await w.settle()
        await close_extenders(w.scheduler.profiles)
    assert preempted(verdicts) == [[victims[0].uid, victims[1].uid]]
    assert w.evictions.evicted == ["default/v2"]
    assert w.nominations.written == [("default/p", "n1")]
    assert "asking the extenders" in w.told("p")


async def test_a_node_the_extender_leaves_out_is_left_out_of_the_next_plan() -> None:
    cheap = low("v1", "n1", gpus=8)  # the planner's first choice: the lowest priority
    dear = low("v2", "n2", gpus=8, priority=100)
    w = world()  # the real planner
    full_node(w, [cheap], "n1")
    full_node(w, [dear], "n2")
    verdicts = Verdicts(preempt=lambda args: keeping({"n2": [dear.uid]}))
    async with serving(verdicts) as url:
        with_preempting_extender(w, url)
        w.pods.on_add(high("p"))
        await w.settle()
        assert w.evictions.calls == []  # n1 left out: nothing evicted, planned again at once
        await w.settle()
        await close_extenders(w.scheduler.profiles)
    asked = [list(a["NodeNameToMetaVictims"]) for _, a in verdicts.calls]  # type: ignore[call-overload]
    assert asked == [["n1"], ["n2"]]
    assert w.evictions.evicted == ["default/v2"]
    assert w.nominations.written == [("default/p", "n2")]


async def test_a_node_kept_without_victims_evicts_nothing_and_the_pod_backs_off() -> None:
    victims = [low("v1", "n1", gpus=8)]
    planner = FixedPlanner(victims, "n1")
    w = world(planner)
    full_node(w, victims)
    verdicts = Verdicts(preempt=lambda args: keeping({"n1": []}))
    async with serving(verdicts) as url:
        with_preempting_extender(w, url)
        w.pods.on_add(high("p"))
        await w.settle()
        assert w.evictions.calls == []
        assert w.nominations.written == []
        note = w.notes("p", "FailedScheduling")[-1]
        assert note.startswith("preemption refused by the extenders: extender http://")
        assert note.endswith(
            "expected a victim pod on node n1; nothing evicted, planning again in 5s"
        )
        await w.tick(1)  # within the backoff: not planned again
        assert len(planner.requests) == 1
        await w.tick(5)  # after it: planned and asked again
        await w.settle()
        await close_extenders(w.scheduler.profiles)
    assert len(planner.requests) == 2
    assert len(verdicts.calls) == 2


async def test_a_failing_extender_evicts_nothing_unless_it_is_ignorable() -> None:
    for ignorable, evicted in ((False, []), (True, ["default/v1"])):
        victims = [low("v1", "n1", gpus=8)]
        w = world(FixedPlanner(victims, "n1"))
        full_node(w, victims)
        with_preempting_extender(w, "http://127.0.0.1:9", ignorable=ignorable, httpTimeout="1s")
        w.pods.on_add(high("p"))
        await w.settle()
        await close_extenders(w.scheduler.profiles)
        assert w.evictions.evicted == evicted, ignorable


async def test_a_preemptor_deleted_while_the_extender_answers_starts_nothing() -> None:
    victims = [low("v1", "n1", gpus=8)]
    w = world(FixedPlanner(victims, "n1"))
    full_node(w, victims)
    preemptor = high("p")

    def deleted_meanwhile(args: dict[str, object]) -> object:
        w.pods.on_delete(preemptor)
        return keeping({"n1": [victims[0].uid]})

    async with serving(Verdicts(preempt=deleted_meanwhile)) as url:
        with_preempting_extender(w, url)
        w.pods.on_add(preemptor)
        await w.settle()
        await close_extenders(w.scheduler.profiles)
    assert w.evictions.calls == []
    assert w.preempting.flights == {}


async def test_a_gangs_plan_is_not_sent_to_the_extender() -> None:
    victims = [low("v1", "n1", gpus=8)]
    w = world(FixedPlanner(victims, "n1", preemptor="g-0"))
    full_node(w, victims)
    verdicts = Verdicts(preempt=lambda args: keeping({}))
    async with serving(verdicts) as url:
        with_preempting_extender(w, url)
        add_gang_group(w.scheduler, "g", 1, timeout=30)
        w.pods.on_add(make_pod("g-0").gpus(8).cpu("1").priority(1000).label(LABEL, "g").view())
        await w.settle()
        await close_extenders(w.scheduler.profiles)
    assert verdicts.calls == []
    assert w.evictions.evicted == ["default/v1"]
