"""The live loop asking a real (loopback) extender before each cycle: a lone pod and every
pending member of a gang get its verdicts, and the cycle places them accordingly."""

from __future__ import annotations

from batchsched.cache import SchedulerCache
from batchsched.clock import FakeClock
from batchsched.config import config_from_mapping, default_config
from batchsched.extenders.client import ExtenderClient
from batchsched.extenders.fetch import ExtenderSet
from batchsched.extenders.settings import ExtenderSettings
from batchsched.metrics import SchedulerMetrics
from batchsched.plugins.default_binder import DefaultBinder
from batchsched.plugins.extenders import with_extenders
from batchsched.runtime.app_extenders import extender_set, profiles_with_extenders
from batchsched.runtime.handlers import NodeEvents, PodEvents
from batchsched.runtime.queue import SchedulingQueue
from batchsched.runtime.scheduler import Scheduler
from tests.builders import make_node, make_pod
from tests.extenders.fake_extender import Verdicts, serving
from tests.runtime.test_gang_cycle import LABEL, add_group
from tests.runtime.test_handlers import Binds, Recorded


def setup(url: str, binds: Binds) -> tuple[Scheduler, PodEvents, ExtenderSet]:
    clock = FakeClock()
    settings = ExtenderSettings.model_validate(
        {"urlPrefix": url, "filterVerb": "filter", "prioritizeVerb": "prioritize", "weight": 1}
    )
    extenders = ExtenderSet([ExtenderClient(settings)])
    profiles = with_extenders(default_config().build_profiles(), extenders, extenders.weight)
    for plugin in profiles["gpu-scheduler"].bind:
        if isinstance(plugin, DefaultBinder):
            plugin.client = binds
    cache = SchedulerCache(clock)
    queue = SchedulingQueue(profiles["gpu-scheduler"].queue_sort.less, clock)
    recorded = Recorded()
    scheduler = Scheduler(profiles, cache, queue, recorded, recorded, SchedulerMetrics(), clock)
    nodes = NodeEvents(cache, queue)
    for name in ("n1", "n2", "n3"):
        nodes.on_add(make_node(name).gpus(8).view())
    return scheduler, PodEvents(cache, queue, scheduler.admits, scheduler.gangs), extenders


async def run_queue(scheduler: Scheduler, extenders: ExtenderSet) -> None:
    while (queued := scheduler.queue.pop_ready()) is not None:
        await scheduler.schedule_one_asking(queued, extenders)
    await scheduler.drain()


async def test_the_scheduler_reads_the_extenders_of_its_profiles() -> None:
    async with serving(Verdicts()) as url:
        scheduler, _, extenders = setup(url, Binds())
        assert scheduler.extenders is extenders
        await extenders.close()


async def test_every_pending_member_of_a_gang_gets_a_verdict_before_its_cycle() -> None:
    verdicts = Verdicts(refuse={"n1": "no", "n3": "no"})
    binds = Binds()
    async with serving(verdicts) as url:
        scheduler, pods, extenders = setup(url, binds)
        add_group(scheduler, "g", 2, timeout=30)
        for i in range(2):
            pods.on_add(make_pod(f"g-{i}").gpus(4).label(LABEL, "g").view())
        await run_queue(scheduler, extenders)
        await extenders.close()
    assert sorted(binds.bound) == [("default/g-0", "n2"), ("default/g-1", "n2")]
    # The two members share a signature: the extender is asked once, with the first one.
    asked = [c[1]["Pod"]["metadata"]["name"] for c in verdicts.calls if c[0] == "filter"]  # type: ignore[index]
    assert asked == ["g-0"]


async def test_verdicts_are_dropped_after_the_cycle() -> None:
    async with serving(Verdicts(refuse={"n1": "no", "n2": "no"})) as url:
        scheduler, pods, extenders = setup(url, Binds())
        pod = make_pod("p").gpus(1).view()
        pods.on_add(pod)
        await run_queue(scheduler, extenders)
        await extenders.close()
    assert extenders.verdict(pod) is not None
    assert extenders.verdict(pod).error  # type: ignore[union-attr]


def _sample(metrics: SchedulerMetrics, name: str, **labels: str) -> float:
    value = metrics.registry.get_sample_value(name, labels)
    return value if value is not None else 0.0


async def test_extender_calls_are_counted_by_result_in_the_schedulers_registry() -> None:
    metrics = SchedulerMetrics()
    async with serving(Verdicts()) as url:
        config = config_from_mapping(
            {
                "apiVersion": "kubescheduler.config.k8s.io/v1",
                "kind": "KubeSchedulerConfiguration",
                "profiles": [{"schedulerName": "gpu-scheduler"}],
                "extenders": [
                    {"urlPrefix": url, "filterVerb": "filter"},
                    {"urlPrefix": "http://127.0.0.1:9", "filterVerb": "f", "ignorable": True},
                ],
            }
        )
        profiles = profiles_with_extenders(config, metrics)
        extenders = extender_set(profiles)
        assert extenders is not None
        await extenders.ask(make_pod("p").view(), [make_node("n").view()])
        await extenders.close()
    total = "batchsched_extender_requests_total"
    assert _sample(metrics, total, extender=url, verb="filter", result="ok") == 1
    assert _sample(metrics, total, extender="http://127.0.0.1:9", verb="f", result="error") == 1
    seconds = "batchsched_extender_request_duration_seconds_count"
    assert _sample(metrics, seconds, verb="filter") == 1


def _calls(verdicts: Verdicts, verb: str) -> list[dict[str, object]]:
    return [args for called, args in verdicts.calls if called == verb]


async def test_identical_gang_members_are_asked_once_and_each_lands_where_it_allows() -> None:
    verdicts = Verdicts(refuse={"n1": "no"}, scores={"n3": 10})
    binds = Binds()
    async with serving(verdicts) as url:
        scheduler, pods, extenders = setup(url, binds)
        add_group(scheduler, "g", 4, timeout=30)
        for i in range(4):
            pods.on_add(make_pod(f"g-{i}").gpus(4).label(LABEL, "g").view())
        await run_queue(scheduler, extenders)
        await extenders.close()
    # One signature: one filter and one prioritize call, not four of each.
    assert len(_calls(verdicts, "filter")) == 1
    assert len(_calls(verdicts, "prioritize")) == 1
    # n3 (scored 10) takes two 4-GPU members, n2 the other two; n1 (refused) none.
    assert sorted(node for _, node in binds.bound) == ["n2", "n2", "n3", "n3"]


async def test_gang_members_of_different_shapes_are_each_asked_with_their_own_pod() -> None:
    verdicts = Verdicts(refuse={"n1": "no"})
    binds = Binds()
    async with serving(verdicts) as url:
        scheduler, pods, extenders = setup(url, binds)
        add_group(scheduler, "g", 3, timeout=30)
        pods.on_add(make_pod("g-0").gpus(4).label(LABEL, "g").view())
        pods.on_add(make_pod("g-1").gpus(4).label(LABEL, "g").view())
        pods.on_add(make_pod("g-2").gpus(2).label(LABEL, "g").view())
        await run_queue(scheduler, extenders)
        await extenders.close()
    asked = sorted(
        c["Pod"]["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"]  # type: ignore[index]
        for c in _calls(verdicts, "filter")
    )
    assert asked == ["2", "4"]
    assert len(binds.bound) == 3
    assert all(node != "n1" for _, node in binds.bound)


async def test_a_member_arriving_while_the_extender_answers_is_asked_before_the_cycle() -> None:
    verdicts = Verdicts(refuse={"n1": "no", "n3": "no"})
    binds = Binds()
    async with serving(verdicts) as url:
        scheduler, pods, extenders = setup(url, binds)
        add_group(scheduler, "g", 3, timeout=30)
        pods.on_add(make_pod("g-0").gpus(2).label(LABEL, "g").view())
        pods.on_add(make_pod("g-1").gpus(2).label(LABEL, "g").view())

        def third_member_arrives(args: dict[str, object]) -> None:
            if len(_calls(verdicts, "filter")) == 1:
                pods.on_add(make_pod("g-2").gpus(2).label(LABEL, "g").view())

        verdicts.on_filter = third_member_arrives
        await run_queue(scheduler, extenders)
        await extenders.close()
    # Without the second round, g-2 had no verdict and failed the gang's cycle with an error.
    assert sorted(binds.bound) == [
        ("default/g-0", "n2"),
        ("default/g-1", "n2"),
        ("default/g-2", "n2"),
    ]
    assert len(_calls(verdicts, "filter")) == 2
