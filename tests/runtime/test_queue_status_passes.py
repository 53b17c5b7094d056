"""The queue status writer's passes: computed in steps that hand the event loop back, each
PATCH counted by outcome, and the caps taken from the scheduler config's `queueStatus`."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path

import pytest

from batchsched.cache import SchedulerCache
from batchsched.clock import FakeClock
from batchsched.config import ConfigError, default_config
from batchsched.config.configz import configz_document
from batchsched.config.documents import QueueStatusSettings
from batchsched.config.scheduler_config import load_config
from batchsched.gang.podgroup import parse_pod_group
from batchsched.gang.status import NotStarted
from batchsched.kube.api_errors import ApiError, ApiUnavailable
from batchsched.metrics import SchedulerMetrics
from batchsched.model.gang_ref import GangApi
from batchsched.runtime.config_reload import start_up_only_changes
from batchsched.runtime.queue import SchedulingQueue
from batchsched.runtime.queue_status import STEP_ITEMS, QueueStatus, Steps
from batchsched.runtime.queue_status_writer import (
    FAILED,
    GONE,
    MAX_WRITES_PER_PASS,
    MIN_INTERVAL_S,
    PASS_INTERVAL_S,
    WRITTEN,
    QueueStatusWriter,
    live_status_steps,
    live_statuses,
    queue_status_writer,
)
from batchsched.runtime.scheduler import Scheduler
from batchsched.tenants import TenantLayer
from queues.config import parse_quota_config
from tests.builders import make_node, make_pod
from tests.runtime.test_handlers import Recorded
from tests.runtime.test_queue_status_writer import Recorder, group, status

QUOTA = """
apiVersion: batchsched.io/v1alpha1
kind: QuotaConfig
tenants:
- {name: team-a, namespaces: [team-a]}
- {name: team-b, namespaces: [team-b], weight: 2}
"""


def scheduler_with_gangs(gangs: int) -> Scheduler:
    """`gangs` pending two-member gangs in two tenants, each rejected once."""
    clock = FakeClock()
    profiles = default_config().build_profiles()
    layer = TenantLayer(parse_quota_config(QUOTA), clock, lambda p: True)
    less = profiles["gpu-scheduler"].queue_sort.less
    queue = SchedulingQueue(less, clock, tenant_of=layer.tenant_of, rank=layer.rank)
    cache = SchedulerCache(clock)
    layer.attach(cache.snapshot)
    recorded = Recorded()
    scheduler = Scheduler(
        profiles, cache, queue, recorded, recorded, SchedulerMetrics(), clock, tenants=layer
    )
    cache.add_node(make_node("n0").gpus(8).cpu("64").view())
    for g in range(gangs):
        team = ("team-a", "team-b")[g % 2]
        meta = {"name": f"g{g}", "namespace": team, "uid": f"pg-{g}"}
        pod_group = parse_pod_group({"metadata": meta, "spec": {"minMember": 2}})
        scheduler.gangs.on_add(pod_group)
        scheduler.gangs.rejections[pod_group.key] = NotStarted("0/1 nodes are available")
        for m in range(2):
            pod = make_pod(f"g{g}-{m}", team).gpus(8).cpu("1").priority(g % 3)
            queue.add(pod.label("scheduling.x-k8s.io/pod-group", f"g{g}").view())
    return scheduler


# Steps


def test_the_stepped_statuses_pause_every_few_hundred_items_and_equal_the_whole_ones() -> None:
    scheduler = scheduler_with_gangs(600)
    steps = live_status_steps(scheduler)
    pauses = 0
    while True:
        try:
            next(steps)
        except StopIteration as done:
            stepped = done.value
            break
        pauses += 1
    # 1200 pods, 600 gangs in order, 600 statuses: a pause at least every STEP_ITEMS of each.
    assert pauses >= (1200 + 600 + 600) // STEP_ITEMS
    assert stepped == live_statuses(scheduler)
    assert len(stepped) == 600


async def test_a_long_pass_gives_the_loop_back_between_slices() -> None:
    scheduler = scheduler_with_gangs(600)
    now = [0.0]

    def timer() -> float:  # every reading is 4 ms of work later
        now[0] += 0.004
        return now[0]

    writer = QueueStatusWriter(Recorder(), FakeClock(), timer=timer, slice_s=0.01)
    turns = 0

    async def other_work() -> None:  # the scheduling loop, binding, watches
        nonlocal turns
        while True:
            turns += 1
            await asyncio.sleep(0)

    during: list[int] = []  # the loop's other turns while the statuses were computed

    def statuses() -> Steps[dict[str, QueueStatus]]:
        before = turns
        found = yield from live_status_steps(scheduler)
        during.append(turns - before)
        return found

    task = asyncio.create_task(other_work())
    await writer.publish(statuses, scheduler.gangs.groups)
    task.cancel()
    assert writer.slices >= 3 and during == [writer.slices]
    assert writer.longest_slice <= 0.0121  # the readings of one slice: at most 12 ms


async def test_statuses_given_whole_are_computed_in_one_go() -> None:
    writer = QueueStatusWriter(Recorder(), FakeClock())
    await writer.publish(lambda: {"ns/a": status(1)}, {"ns/a": group("a")})
    assert await writer.publish(lambda: {"ns/a": status(1)}, {"ns/a": group("a")}) == 1
    assert writer.slices == 0


# The counter of PATCH requests


class Answers:
    """A PATCH that answers from a list: None is a success, an exception is raised."""

    def __init__(self, *answers: Exception | None) -> None:
        self.answers = list(answers)

    async def __call__(self, path: str, body: Mapping[str, object], kind: str) -> object:
        answer = self.answers.pop(0)
        if answer is not None:
            raise answer
        return {}


def counted(metrics: SchedulerMetrics) -> dict[str, float]:
    found = {}
    for outcome in (WRITTEN, GONE, FAILED):
        value = metrics.registry.get_sample_value(
            "batchsched_queue_status_writes_total", {"outcome": outcome}
        )
        found[outcome] = value or 0.0
    return found


@pytest.mark.parametrize(
    ("answers", "api", "expected"),
    [
        ((None,), GangApi.SCHEDULER_PLUGINS, {WRITTEN: 1, GONE: 0, FAILED: 0}),
        ((None, None), GangApi.KUBERNETES, {WRITTEN: 2, GONE: 0, FAILED: 0}),
        ((ApiError(404, "NotFound", "gone"),), GangApi.SCHEDULER_PLUGINS, {GONE: 1}),
        ((ApiError(409, "Conflict", "uid"),), GangApi.SCHEDULER_PLUGINS, {GONE: 1}),
        ((ApiError(500, "InternalError", "x"),), GangApi.SCHEDULER_PLUGINS, {FAILED: 1}),
        ((ApiUnavailable("reset"),), GangApi.SCHEDULER_PLUGINS, {FAILED: 1}),
        ((None, ApiUnavailable("reset")), GangApi.KUBERNETES, {WRITTEN: 1, FAILED: 1}),
    ],
    ids=[
        "a written PodGroup counts one",
        "an upstream PodGroup's annotations and condition count two",
        "a PodGroup deleted meanwhile counts as gone",
        "one replaced by a same-named successor (uid precondition) counts as gone",
        "a server error counts as failed",
        "no answer counts as failed",
        "a condition that failed after its annotations counts one of each",
    ],
)
async def test_each_patch_is_counted_by_outcome(
    answers: tuple[Exception | None, ...], api: GangApi, expected: dict[str, int]
) -> None:
    metrics = SchedulerMetrics()
    writer = QueueStatusWriter(Answers(*answers), FakeClock(), metrics=metrics)
    key = "k8s:ns/a" if api is GangApi.KUBERNETES else "ns/a"
    for _ in range(2):  # written on the second pass that finds it pending
        await writer.publish(lambda: {key: status(1)}, {key: group("a", api)})
    assert counted(metrics) == {WRITTEN: 0, GONE: 0, FAILED: 0, **expected}


# The caps, from the scheduler config


def config_with(queue_status: str) -> str:
    return (
        "apiVersion: kubescheduler.config.k8s.io/v1\n"
        "kind: KubeSchedulerConfiguration\n"
        f"queueStatus: {queue_status}\n"
    )


def test_the_defaults_are_the_writers_caps() -> None:
    settings = default_config().queue_status
    assert (
        (
            settings.pass_interval,
            settings.min_interval_per_group,
            settings.max_groups_per_pass,
        )
        == (PASS_INTERVAL_S, MIN_INTERVAL_S, MAX_WRITES_PER_PASS)
        == (5.0, 15.0, 20)
    )


def test_the_config_sets_the_caps_of_the_writer(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(
        config_with("{passInterval: 2s, minIntervalPerGroup: 1m, maxGroupsPerPass: 50}")
    )
    config = load_config(path)
    writer = queue_status_writer(Recorder(), FakeClock(), config.queue_status)
    assert writer is not None
    assert (writer.pass_interval, writer.min_interval, writer.max_writes) == (2.0, 60.0, 50)
    assert configz_document(config)["queueStatus"] == {
        "passInterval": "2s",
        "minIntervalPerGroup": "60s",
        "maxGroupsPerPass": 50,
    }


def test_no_groups_per_pass_means_no_writer() -> None:
    settings = QueueStatusSettings.model_validate({"maxGroupsPerPass": 0})
    assert queue_status_writer(Recorder(), FakeClock(), settings) is None


@pytest.mark.parametrize(
    ("value", "field"),
    [
        ("{maxGroupsPerPass: -1}", "queueStatus.maxGroupsPerPass"),
        ("{minIntervalPerGroup: 15}", "queueStatus.minIntervalPerGroup"),
        ("{passInterval: 0s}", "queueStatus.passInterval"),
        ("{maxWrites: 5}", "queueStatus.maxWrites"),
    ],
    ids=[
        "a negative cap",
        "a bare number where a duration goes",
        "a zero pass interval",
        "an unknown key",
    ],
)
def test_a_bad_queue_status_setting_names_its_field(tmp_path: Path, value: str, field: str) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(config_with(value))
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert field in str(caught.value)


def test_a_reload_that_changes_the_caps_says_they_apply_on_the_next_restart(
    tmp_path: Path,
) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(config_with("{maxGroupsPerPass: 5}"))
    changed = start_up_only_changes(load_config(path), default_config())
    assert changed == ["queue_status"]
