"""Scheduler.schedule_one with tenant queues (tenant_queues): a pod refused by its
tenant's quota or held back by a backfill reservation waits unschedulable with an Event that
says why; a bad expected-runtime annotation is reported once and counts as unknown. On a fake
clock with recording fakes; the API side is in tests/integration/test_tenants_live.py."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from batchsched.cache import SchedulerCache
from batchsched.clock import FakeClock
from batchsched.config import default_config
from batchsched.gang.podgroup import parse_pod_group
from batchsched.metrics import SchedulerMetrics
from batchsched.model.pod import PodView
from batchsched.plugins.backfill_reservations import BackfillReservations
from batchsched.plugins.default_binder import DefaultBinder
from batchsched.runtime.handlers import NodeEvents, PodEvents
from batchsched.runtime.queue import SchedulingQueue
from batchsched.runtime.scheduler import Scheduler
from batchsched.runtime.tenant_wiring import tenant_queues
from queues.config import parse_quota_config
from queues.model import QuotaPolicy
from tests.builders import PodBuilder, make_node, make_pod
from tests.runtime.test_handlers import Binds

RUNTIME = "batchsched.io/expected-runtime"
HOSTNAME = "kubernetes.io/hostname"
GROUP_LABEL = "scheduling.x-k8s.io/pod-group"


def quota(max_gpus: int | None = None, reservations: int = 4) -> QuotaPolicy:
    limit = f", max: {{nvidia.com/gpu: {max_gpus}}}" if max_gpus is not None else ""
    return parse_quota_config(
        "apiVersion: batchsched.io/v1alpha1\nkind: QuotaConfig\n"
        f"backfill: {{reservations: {reservations}}}\n"
        f"tenants:\n- {{name: team-a, namespaces: [default]{limit}}}\n"
    )


@dataclass
class Recorder:
    """Every Event and PodScheduled=False message, with the Event's type."""

    events: list[tuple[str, str, str, str]] = field(default_factory=list)
    unschedulable: list[tuple[str, str]] = field(default_factory=list)

    async def mark_unschedulable(self, pod: PodView, message: str) -> None:
        self.unschedulable.append((pod.key, message))

    async def record(
        self, regarding: object, type_: str, reason: str, action: str, note: str
    ) -> None:
        key = regarding.key if isinstance(regarding, PodView) else str(regarding)
        self.events.append((key, type_, reason, note))

    def notes(self, key: str, reason: str) -> list[str]:
        return [n for k, _, r, n in self.events if k == key and r == reason]


@dataclass
class Live:
    scheduler: Scheduler
    pods: PodEvents
    nodes: NodeEvents
    recorder: Recorder
    binds: Binds
    clock: FakeClock
    on_quota_change: Callable[[QuotaPolicy], None]

    def schedule(self, *builders: PodBuilder) -> None:
        """Add these pending pods and run one cycle for each, in order."""
        for builder in builders:
            self.pods.on_add(builder.view())
            queued = self.scheduler.queue.pop_ready()
            assert queued is not None and queued.pod.name == builder.view().name
            self.scheduler.schedule_one(queued)

    def run(self, builder: PodBuilder) -> None:
        """A pod that is bound and running (seen on the watch)."""
        self.pods.on_add(builder.view())

    def metric(self, name: str, labels: dict[str, str] | None = None) -> float:
        value = self.scheduler.metrics.registry.get_sample_value(name, labels or {})
        return value or 0.0


def live(policy: QuotaPolicy) -> Live:
    clock = FakeClock()
    profiles = default_config().build_profiles()
    binds = Binds()
    for plugin in profiles["gpu-scheduler"].bind:
        assert isinstance(plugin, DefaultBinder)
        plugin.client = binds
    cache = SchedulerCache(clock)
    queue = SchedulingQueue(profiles["gpu-scheduler"].queue_sort.less, clock)
    recorder = Recorder()
    metrics = SchedulerMetrics()
    tenants = tenant_queues(profiles, cache, queue, clock, metrics, policy)
    scheduler = Scheduler(
        profiles, cache, queue, recorder, recorder, metrics, clock,
        tenants=tenants.layer, backfill=tenants.backfill,
    )  # fmt: skip
    changed = tenants.changed
    pods = PodEvents(cache, queue, scheduler.admits, scheduler.gangs)
    return Live(scheduler, pods, NodeEvents(cache, queue), recorder, binds, clock, changed)


def gpus(name: str, count: int, runtime: str | None = None) -> PodBuilder:
    builder = make_pod(name).gpus(count).cpu("1")
    return builder.annotation(RUNTIME, runtime) if runtime is not None else builder


# Quota


async def test_a_pod_over_its_tenants_max_waits_unschedulable_with_an_event_naming_it() -> None:
    s = live(quota(max_gpus=8))
    s.nodes.on_add(make_node("gpu-0").gpus(16).cpu("64").view())
    s.run(gpus("first", 6).node("gpu-0"))
    s.schedule(gpus("second", 4))
    await s.scheduler.drain()
    message = (
        "quota: tenant team-a would exceed its max 8 nvidia.com/gpu: "
        "6 nvidia.com/gpu in use + 4 nvidia.com/gpu requested"
    )
    assert s.recorder.notes("default/second", "FailedScheduling") == [message]
    assert s.recorder.unschedulable == [("default/second", message)]
    assert s.binds.bound == [] and not s.scheduler.cache.is_assumed("uid-default-second")
    assert s.scheduler.queue.counts()["unschedulable"] == 1
    assert s.metric("batchsched_quota_rejections_total", {"tenant": "team-a"}) == 1.0


async def test_a_pod_within_the_max_is_bound_and_counts_against_the_next() -> None:
    s = live(quota(max_gpus=8))
    s.nodes.on_add(make_node("gpu-0").gpus(16).cpu("64").view())
    s.schedule(gpus("a", 4), gpus("b", 4), gpus("c", 1))
    await s.scheduler.drain()
    assert [name for name, _ in s.binds.bound] == ["default/a", "default/b"]
    assert s.recorder.notes("default/c", "FailedScheduling")[0].startswith(
        "quota: tenant team-a would exceed its max 8 nvidia.com/gpu: 8 nvidia.com/gpu in use"
    )


async def test_a_raised_max_sends_the_refused_pod_back_to_be_scheduled() -> None:
    s = live(quota(max_gpus=8))
    s.nodes.on_add(make_node("gpu-0").gpus(16).cpu("64").view())
    s.run(gpus("first", 8).node("gpu-0"))
    s.schedule(gpus("second", 4))
    assert s.scheduler.queue.counts()["unschedulable"] == 1
    s.on_quota_change(quota(max_gpus=16))
    s.clock.advance(s.scheduler.queue.backoff_duration(1))
    queued = s.scheduler.queue.pop_ready()
    assert queued is not None and queued.pod.name == "second"
    s.scheduler.schedule_one(queued)
    await s.scheduler.drain()
    assert ("default/second", "gpu-0") in s.binds.bound


# Backfill


def busy_cluster(s: Live) -> None:
    """gpu-0 taken for an hour; half of gpu-1 for ten minutes; "head" needs all of gpu-1."""
    s.nodes.on_add(make_node("gpu-0").gpus(8).cpu("64").view())
    s.nodes.on_add(make_node("gpu-1").gpus(8).cpu("64").view())
    s.run(gpus("long", 8, "1h").node("gpu-0"))
    s.run(gpus("short", 4, "10m").node("gpu-1"))
    s.schedule(gpus("head", 8, "30m").node_selector(**{HOSTNAME: "gpu-1"}))


async def test_a_pod_that_would_delay_a_reservation_is_kept_off_its_node_with_a_reason() -> None:
    # The BackfillReservations filter refuses the reserved node; nowhere else has room.
    s = live(quota())
    busy_cluster(s)
    s.schedule(gpus("slow", 4, "2h"))
    await s.scheduler.drain()
    message = (
        "0/2 nodes are available: 1 Insufficient nvidia.com/gpu, "
        "1 node(s) reserved for pod:default/head (backfill)."
    )
    assert s.recorder.notes("default/slow", "FailedScheduling") == [message]
    assert s.binds.bound == [] and s.scheduler.queue.counts()["unschedulable"] == 2
    info = s.scheduler.cache.snapshot.get("gpu-1")
    assert info is not None and set(info.pods) == {"uid-default-short"}  # nothing left behind


def without_filter(s: Live) -> Live:
    """Turn the BackfillReservations filter off: the check after placement must hold alone."""
    for plugin in s.scheduler.profiles["gpu-scheduler"].filter:
        if isinstance(plugin, BackfillReservations):
            plugin.guard = None
    return s


async def test_without_the_filter_the_check_after_placement_holds_the_pod_back() -> None:
    s = without_filter(live(quota()))
    busy_cluster(s)
    s.schedule(gpus("slow", 4, "2h"))
    await s.scheduler.drain()
    message = (
        "backfill: starting now would delay pod:default/head, which holds a reservation "
        "to start in 10m on gpu-1"
    )
    assert s.recorder.notes("default/slow", "FailedScheduling") == [message]
    assert s.binds.bound == [] and s.scheduler.queue.counts()["unschedulable"] == 2
    assert s.metric("batchsched_backfill_held_total") == 1.0
    info = s.scheduler.cache.snapshot.get("gpu-1")
    assert info is not None and set(info.pods) == {"uid-default-short"}  # nothing left behind


async def test_a_pod_that_ends_before_the_reservation_backfills() -> None:
    s = live(quota())
    busy_cluster(s)
    s.schedule(gpus("quick", 4, "5m"))
    await s.scheduler.drain()
    assert s.binds.bound == [("default/quick", "gpu-1")]
    assert s.recorder.notes("default/quick", "FailedScheduling") == []
    assert s.metric("batchsched_backfilled_pods_total") == 1.0


async def test_a_pod_started_with_no_reservation_held_is_not_counted_as_backfilled() -> None:
    s = live(quota())
    s.nodes.on_add(make_node("gpu-0").gpus(8).cpu("64").view())
    s.schedule(gpus("alone", 4, "5m"))
    await s.scheduler.drain()
    assert s.binds.bound == [("default/alone", "gpu-0")]
    assert s.metric("batchsched_backfilled_pods_total") == 0.0


async def test_a_held_back_pod_is_judged_against_a_plan_without_itself() -> None:
    # The plan is rebuilt in the held-back pod's own cycle (the blocked set changed); the pod
    # the runner just reserved must not count as running there, or the reservation would move
    # behind it and it would pass.
    s = without_filter(live(quota()))
    busy_cluster(s)
    s.clock.advance(10)  # past refresh_s: whatever plan exists is stale
    s.schedule(gpus("slow", 4, "2h"))
    await s.scheduler.drain()
    assert s.binds.bound == []
    assert s.recorder.notes("default/slow", "FailedScheduling")[0].startswith("backfill: ")


async def test_a_gang_that_would_delay_a_reservation_is_held_back_whole() -> None:
    s = without_filter(live(quota()))
    busy_cluster(s)
    s.scheduler.gangs.on_add(
        parse_pod_group(
            {
                "metadata": {"name": "pair", "namespace": "default", "uid": "pg-pair"},
                "spec": {"minMember": 2},
            }
        )
    )
    members = [gpus(f"pair-{i}", 2, "2h").label(GROUP_LABEL, "pair") for i in range(2)]
    for member in members:
        s.pods.on_add(member.view())
    queued = s.scheduler.queue.pop_ready()
    assert queued is not None
    s.scheduler.schedule_one(queued)
    await s.scheduler.drain()
    held = "backfill: starting now would delay pod:default/head"
    # Each member's condition says why; one Event on the PodGroup says it for the gang.
    told = dict(s.recorder.unschedulable)
    assert all(told[f"default/pair-{i}"].startswith(held) for i in range(2)), told
    failed = [e for e in s.recorder.events if e[2] == "FailedScheduling"]
    assert [e[0] for e in failed if "pair-" in e[0]] == [], failed
    assert any("pair" in e[0] and e[3].startswith(held) for e in failed), failed
    assert s.binds.bound == [] and s.scheduler.cache.assumed_count() == 0
    info = s.scheduler.cache.snapshot.get("gpu-1")
    assert info is not None and set(info.pods) == {"uid-default-short"}


async def test_a_quota_refusal_drops_the_gangs_reservation() -> None:
    s = live(quota())
    busy_cluster(s)
    assert s.scheduler.backfill is not None and s.scheduler.backfill.blocked_keys()
    s.on_quota_change(quota(max_gpus=4))
    s.clock.advance(60)
    queued = s.scheduler.queue.pop_ready()
    assert queued is not None and queued.pod.name == "head"
    s.scheduler.schedule_one(queued)
    assert s.scheduler.backfill.blocked_keys() == []


# Expected-runtime annotation


async def test_an_invalid_runtime_is_reported_once_and_counts_as_unknown() -> None:
    s = live(quota())
    s.nodes.on_add(make_node("gpu-0").gpus(8).cpu("64").view())
    bad = gpus("bad", 9, "soon")  # never fits: blocked, and tried again below
    s.schedule(bad)
    s.clock.advance(60)
    s.scheduler.queue.move_all("test")
    queued = s.scheduler.queue.pop_ready()
    assert queued is not None
    s.scheduler.schedule_one(queued)
    await s.scheduler.drain()
    warnings = [(t, n) for k, t, r, n in s.recorder.events if r == "InvalidAnnotation"]
    assert warnings == [
        (
            "Warning",
            "annotation batchsched.io/expected-runtime: expected a positive duration such as "
            '"90m" or "2h30m", got \'soon\'; runtime unknown',
        )
    ]
    labels = {"annotation": "expected-runtime"}
    assert s.metric("batchsched_invalid_annotations_total", labels) == 1.0
    assert s.scheduler.waits.runtime_of(bad.view()) is None


async def test_a_running_pod_with_an_invalid_runtime_never_ends_in_the_plan() -> None:
    s = live(quota())
    s.nodes.on_add(make_node("gpu-0").gpus(8).cpu("64").view())
    s.run(gpus("odd", 8, "-5m").node("gpu-0"))
    s.schedule(gpus("next", 8, "10m"))
    assert s.scheduler.backfill is not None
    estimates = s.scheduler.backfill.estimates(
        s.scheduler.cache.snapshot, s.scheduler.waits.ends_at, s.scheduler.waits.eligible
    )
    assert estimates == {}  # no known end: no time at which "next" could start


async def test_a_running_pods_end_is_its_start_plus_its_runtime() -> None:
    s = live(quota())
    s.nodes.on_add(make_node("gpu-0").gpus(8).cpu("64").view())
    s.run(gpus("known", 2, "90m").node("gpu-0"))
    s.clock.advance(600)
    s.run(gpus("deadline", 2).set("spec.activeDeadlineSeconds", 120).node("gpu-0"))
    ends_at = s.scheduler.waits.ends_at
    assert ends_at(gpus("known", 2, "90m").node("gpu-0").view()) == 1000.0 + 5400
    assert ends_at(gpus("deadline", 2).set("spec.activeDeadlineSeconds", 120).view()) == 1720.0
    assert ends_at(gpus("forever", 2).node("gpu-0").view()) is None


async def test_a_pod_of_another_scheduler_ends_its_runtime_after_its_start_time() -> None:
    s = live(quota())
    s.nodes.on_add(make_node("gpu-0").gpus(8).cpu("64").view())
    # Started ten minutes before the fake clock's wall time (2023-11-14T22:30:00Z).
    theirs = gpus("theirs", 2).scheduler("default-scheduler").node("gpu-0")
    theirs = theirs.set("spec.activeDeadlineSeconds", 3600)
    theirs = theirs.set("status.startTime", "2023-11-14T22:20:00Z")
    s.run(theirs)
    assert s.scheduler.waits.ends_at(theirs.view()) == 1000.0 - 600 + 3600


def prefers_gpu_1(builder: PodBuilder) -> PodBuilder:
    term = {"matchExpressions": [{"key": HOSTNAME, "operator": "In", "values": ["gpu-1"]}]}
    preferred = [{"weight": 100, "preference": term}]
    return builder.affinity(
        "nodeAffinity", {"preferredDuringSchedulingIgnoredDuringExecution": preferred}
    )


async def test_a_pod_that_would_delay_a_reservation_on_one_node_starts_on_another() -> None:
    s = live(quota())
    busy_cluster(s)
    s.nodes.on_add(make_node("gpu-2").gpus(8).cpu("64").view())
    s.schedule(prefers_gpu_1(gpus("slow", 4, "2h")))
    await s.scheduler.drain()
    assert s.binds.bound == [("default/slow", "gpu-2")]  # not gpu-1, reserved for "head"
    assert s.recorder.notes("default/slow", "FailedScheduling") == []


async def test_without_the_filter_packing_would_have_picked_the_reserved_node() -> None:
    # The control for the test above: the same cluster, the filter off.
    s = without_filter(live(quota()))
    busy_cluster(s)
    s.nodes.on_add(make_node("gpu-2").gpus(8).cpu("64").view())
    s.schedule(prefers_gpu_1(gpus("slow", 4, "2h")))
    await s.scheduler.drain()
    assert s.binds.bound == []
    assert s.recorder.notes("default/slow", "FailedScheduling")[0].startswith("backfill: ")


PRODUCT = "nvidia.com/gpu.product"


def mixed_models_quota(h100_max: int) -> QuotaPolicy:
    return parse_quota_config(
        "apiVersion: batchsched.io/v1alpha1\nkind: QuotaConfig\n"
        "tenants:\n- {name: team-a, namespaces: [default], "
        f"max: {{nvidia.com/gpu@H100: {h100_max}}}}}\n"
    )


async def test_a_per_model_max_is_checked_on_the_node_the_pod_was_placed_on() -> None:
    # Two GPU models: before placement the model is unknown, so the check comes after.
    s = live(mixed_models_quota(4))
    s.nodes.on_add(make_node("h-0").gpus(8).cpu("64").label(PRODUCT, "H100").view())
    s.nodes.on_add(make_node("a-0").gpus(8).cpu("64").label(PRODUCT, "A100").view())
    s.schedule(gpus("on-h100", 8).node_selector(**{PRODUCT: "H100"}))
    s.schedule(gpus("on-a100", 8).node_selector(**{PRODUCT: "A100"}))
    await s.scheduler.drain()
    assert s.binds.bound == [("default/on-a100", "a-0")]
    assert s.recorder.notes("default/on-h100", "FailedScheduling") == [
        "quota: tenant team-a would exceed its max 4 nvidia.com/gpu@H100: "
        "0 nvidia.com/gpu@H100 in use + 8 nvidia.com/gpu@H100 requested"
    ]
    info = s.scheduler.cache.snapshot.get("h-0")
    assert info is not None and not info.pods  # the refused placement left nothing behind
