"""Preemption in the live scheduler on a fake clock: PostFilter call sites, the evictions, the
capacity held while victims terminate, one plan in flight, replanning, deadlines.

The API side (Eviction API, nominatedNodeName, Events) is faked here and exercised for real in
tests/integration/test_preemption_live.py.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import pytest

from batchsched.cache import SchedulerCache
from batchsched.cli import build_parser
from batchsched.clock import FakeClock
from batchsched.config import default_config
from batchsched.framework.runner import ProfileRunner
from batchsched.gang.podgroup import parse_pod_group
from batchsched.kube.binder import ObjectRef
from batchsched.kube.client import ApiError
from batchsched.kube.disruption import DisruptionBudgets, parse_disruption_budget
from batchsched.kube.eviction import EvictionOutcome, EvictionResult, _classify
from batchsched.metrics import SchedulerMetrics
from batchsched.model.errors import InvalidObject
from batchsched.model.pod import PodView
from batchsched.model.selectors import LabelSelector
from batchsched.plugins.default_binder import DefaultBinder
from batchsched.preemption.model import (
    DisruptionBudget,
    NoPlan,
    PreemptionPlan,
    PreemptionRequest,
    VictimGang,
)
from batchsched.runtime.handlers import NodeEvents, PodEvents
from batchsched.runtime.preempting import Preempting
from batchsched.runtime.preemption_flight import NOMINATED_PREFIX
from batchsched.runtime.preemption_inputs import started_at
from batchsched.runtime.preemption_notes import PREEMPTION_ANNOTATION, NotePublisher
from batchsched.runtime.queue import SchedulingQueue
from batchsched.runtime.reservations import LiveBackfill
from batchsched.runtime.scheduler import Scheduler
from batchsched.snapshot import Snapshot
from batchsched.tenants import TenantLayer
from queues.model import GPU, QuotaPolicy, Tenant
from tests.builders import make_node, make_pod
from tests.runtime.test_handlers import Binds, Recorded

LABEL = "scheduling.x-k8s.io/pod-group"


class Recorder(Recorded):
    """Recorded, also for Events about PodGroups; `failing` reasons are refused (False)."""

    def __init__(self) -> None:
        super().__init__()
        self.failing: set[str] = set()

    async def record(
        self, regarding: PodView | ObjectRef, type_: str, reason: str, action: str, note: str
    ) -> bool:
        if reason in self.failing:
            return False
        self.events.append((f"{regarding.namespace}/{regarding.name}", reason, note))
        return True


class Evictions:
    """The Eviction API: pods in `refuse` are refused (429) every time; `script` gives a pod's
    next answers (then it is evicted); `before(n)` runs as the n-th call comes in."""

    def __init__(self, refuse: set[str] | None = None) -> None:
        self.refuse = refuse or set()
        self.script: dict[str, list[EvictionOutcome]] = {}
        self.before: Callable[[int], None] | None = None
        self.calls: list[str] = []
        self.evicted: list[str] = []

    async def evict(self, namespace: str, name: str, uid: str) -> EvictionResult:
        self.calls.append(f"{namespace}/{name}")
        if self.before is not None:
            self.before(len(self.calls))
        scripted = self.script.get(name)
        if scripted:
            outcome = scripted.pop(0)
        else:
            outcome = EvictionOutcome.REFUSED if name in self.refuse else EvictionOutcome.EVICTED
        if outcome is EvictionOutcome.REFUSED:
            return EvictionResult(outcome, "Cannot evict pod as it would violate the budget")
        if outcome is EvictionOutcome.FAILED:
            return EvictionResult(outcome, "500 InternalError: etcd")
        self.evicted.append(f"{namespace}/{name}")
        return EvictionResult(outcome)


class Nominations:
    def __init__(self) -> None:
        self.written: list[tuple[str, str | None]] = []

    async def set_nominated_node(self, pod: PodView, node_name: str | None) -> None:
        self.written.append((pod.key, node_name))


@dataclass
class FixedPlanner:
    """Answers every request with the same plan (victims named), recording the requests."""

    victims: Sequence[PodView]
    node: str
    preemptor: str = "p"  # whom it has a plan for; anyone else gets NoPlan
    requests: list[PreemptionRequest] = field(default_factory=list)

    def __call__(
        self, request: PreemptionRequest, snapshot: Snapshot, runner: ProfileRunner
    ) -> PreemptionPlan | NoPlan:
        self.requests.append(request)
        if request.preemptor[0].name != self.preemptor:
            return NoPlan("no victims for it")
        units = tuple(VictimGang(f"pod:{v.key}", (v,), v.priority) for v in self.victims)
        return PreemptionPlan(units, {p.uid: self.node for p in request.preemptor}, 0, ())


@dataclass
class World:
    scheduler: Scheduler
    pods: PodEvents
    nodes: NodeEvents
    clock: FakeClock
    recorded: Recorded
    binds: Binds
    evictions: Evictions
    nominations: Nominations
    preempting: Preempting

    def run_queue(self) -> None:
        self.scheduler.queue.flush()
        while (queued := self.scheduler.queue.pop_ready()) is not None:
            self.scheduler.schedule_one(queued)

    async def settle(self) -> None:
        self.run_queue()
        await self.scheduler.drain()

    def retry(self) -> None:
        """Whatever waits is tried again now (backoff over)."""
        self.clock.advance(20)
        self.scheduler.queue.move_all("test")
        self.run_queue()

    def held_on(self, node: str) -> list[str]:
        info = self.scheduler.cache.snapshot.get(node)
        assert info is not None
        return sorted(p.name for p in info.pods.values() if p.uid.startswith(NOMINATED_PREFIX))

    def bound(self, name: str) -> str | None:
        return next((node for key, node in self.binds.bound if key == f"default/{name}"), None)

    def notes(self, name: str, reason: str) -> list[str]:
        return [note for key, r, note in self.recorded.events if key.endswith(name) and r == reason]

    def told(self, name: str) -> str:
        """The last FailedScheduling message of a pod."""
        return [m for key, m in self.recorded.unschedulable if key == f"default/{name}"][-1]

    async def tick(self, seconds: float) -> None:
        """Time passes; the housekeeping timer runs."""
        self.clock.advance(seconds)
        self.preempting.expire(self.clock.now())
        await self.scheduler.drain()

    async def try_again(self, *pods: PodView) -> None:
        """The pods get a cycle now, as after a cluster event, with no time passing."""
        self.scheduler.queue.activate(p.uid for p in pods)
        await self.settle()


def world(
    planner: object = None,
    refuse: set[str] | None = None,
    budgets: Sequence[DisruptionBudget] = (),
    **options: float,
) -> World:
    clock = FakeClock()
    profiles = default_config().build_profiles()
    binds = Binds()
    for plugin in profiles["gpu-scheduler"].bind:
        assert isinstance(plugin, DefaultBinder)
        plugin.client = binds
    cache = SchedulerCache(clock)
    queue = SchedulingQueue(profiles["gpu-scheduler"].queue_sort.less, clock)
    recorded = Recorder()
    scheduler = Scheduler(profiles, cache, queue, recorded, recorded, SchedulerMetrics(), clock)
    evictions, nominations = Evictions(refuse), Nominations()
    kwargs: dict[str, object] = {"planner": planner} if planner is not None else {}
    kwargs["budgets"] = lambda: tuple(budgets)
    preempting = Preempting(scheduler.live, evictions, nominations, **kwargs, **options)  # type: ignore[arg-type]
    scheduler.live.preempting = preempting
    pods = PodEvents(cache, queue, scheduler.admits, scheduler.gangs)
    pods.pending_deleted.append(preempting.pod_deleted)
    pods.assigned_gone.append(preempting.victim_gone)
    return World(
        scheduler,
        pods,
        NodeEvents(cache, queue),
        clock,
        recorded,
        binds,
        evictions,
        nominations,
        preempting,
    )


def low(name: str, node: str, gpus: int = 4, priority: int = 0) -> PodView:
    return make_pod(name).gpus(gpus).cpu("1").priority(priority).node(node).view()


def high(name: str, gpus: int = 8, priority: int = 1000) -> PodView:
    return make_pod(name).gpus(gpus).cpu("1").priority(priority).view()


def full_node(w: World, victims: Sequence[PodView], node: str = "n1") -> None:
    w.nodes.on_add(make_node(node).gpus(8).cpu("64").view())
    for victim in victims:
        w.pods.on_add(victim)


async def test_a_pod_that_does_not_fit_evicts_its_victims_is_nominated_and_binds_once_they_go() -> (
    None
):
    victims = [low("v1", "n1"), low("v2", "n1")]
    planner = FixedPlanner(victims, "n1")
    w = world(planner)
    full_node(w, victims)
    w.pods.on_add(high("p"))
    await w.settle()

    assert w.evictions.evicted == ["default/v1", "default/v2"]
    assert w.nominations.written == [("default/p", "n1")]
    assert w.notes("v1", "Preempted") == [
        "preempted by pod default/p (priority 1000) to make room for 8 nvidia.com/gpu on n1"
    ]
    assert w.notes("p", "Preempting") == [
        "preempting pod default/v1 (4 GPUs) on n1; pod default/v2 (4 GPUs) on n1 "
        "for 1 pod nominated to n1"
    ]
    assert w.held_on("n1") == ["p"]
    assert w.scheduler.metrics.preemption_attempts._value.get() == 1

    for victim in victims:
        w.pods.on_delete(victim)  # the kubelet finished them
    w.retry()
    await w.scheduler.drain()
    assert w.bound("p") == "n1"
    assert w.held_on("n1") == []
    assert w.preempting.flights == {}


async def test_a_preemptor_plans_once_while_its_victims_terminate_and_says_how_far_they_are() -> (
    None
):
    victims = [low("v1", "n1"), low("v2", "n1")]
    planner = FixedPlanner(victims, "n1")
    w = world(planner)
    full_node(w, victims)
    w.pods.on_add(high("p"))
    await w.settle()
    w.pods.on_delete(victims[0])
    await w.settle()
    w.retry()
    await w.scheduler.drain()

    assert len(planner.requests) == 1
    assert w.evictions.evicted == ["default/v1", "default/v2"]
    last = w.recorded.unschedulable[-1]
    assert last[0] == "default/p"
    assert last[1].endswith(", 1 of 2 terminated")


async def test_freed_capacity_is_held_for_the_preemptor_against_lower_priority_pods() -> None:
    victims = [low("v1", "n1", gpus=8)]
    w = world(FixedPlanner(victims, "n1"))
    full_node(w, victims)
    w.pods.on_add(high("p", priority=1000))
    await w.settle()
    # A lower-priority pod gets a cycle before the preemptor's (taken out of turn here: the
    # preemptor, activated when its victim went, would come first in the queue).
    sneak = high("sneak", priority=500)
    w.pods.on_add(sneak)
    w.pods.on_delete(victims[0])
    (queued,) = w.scheduler.queue.take([sneak.uid])
    w.scheduler.schedule_one(queued)
    await w.scheduler.drain()

    assert w.bound("sneak") is None
    assert w.held_on("n1") == ["p"]


async def test_a_higher_priority_pod_may_take_the_held_capacity_and_the_preemptor_replans() -> None:
    victims = [low("v1", "n1", gpus=8)]
    planner = FixedPlanner(victims, "n1")
    w = world(planner)
    full_node(w, victims)
    w.pods.on_add(high("p", priority=1000))
    await w.settle()
    w.pods.on_add(high("vip", priority=2000))
    w.pods.on_delete(victims[0])
    w.scheduler.queue.flush()
    queued = w.scheduler.queue.pop_ready()
    assert queued is not None and queued.pod.name == "vip"
    w.scheduler.schedule_one(queued)
    await w.scheduler.drain()
    assert w.bound("vip") == "n1"

    w.retry()  # p: its victims are gone, it still does not fit, and nobody is below it now
    await w.scheduler.drain()
    assert len(planner.requests) == 1
    assert w.bound("p") is None
    assert w.preempting.flights == {}
    assert w.held_on("n1") == []
    assert w.nominations.written[-1] == ("default/p", None)


async def test_a_refused_eviction_evicts_no_more_releases_the_hold_and_the_preemptor_replans() -> (
    None
):
    victims = [low("v1", "n1"), low("v2", "n1")]
    planner = FixedPlanner(victims, "n1")
    w = world(planner, refuse={"v1"})
    full_node(w, victims)
    w.pods.on_add(high("p"))
    await w.settle()

    assert w.evictions.evicted == []  # v2 is not evicted after v1 was refused
    assert w.held_on("n1") == []
    assert w.nominations.written == [("default/p", "n1"), ("default/p", None)]
    assert any("refused" in n for n in w.notes("p", "PreemptionReleased"))

    w.retry()
    assert len(planner.requests) == 2


async def test_a_hold_whose_victims_never_terminate_is_released_at_its_deadline() -> None:
    victims = [low("v1", "n1", gpus=8)]
    w = world(FixedPlanner(victims, "n1"), hold_timeout_s=60.0)
    full_node(w, victims)
    w.pods.on_add(high("p"))
    await w.settle()
    w.clock.advance(59)
    w.preempting.expire(w.clock.now())
    assert w.held_on("n1") == ["p"]

    w.clock.advance(2)
    w.preempting.expire(w.clock.now())
    await w.scheduler.drain()
    assert w.held_on("n1") == []
    assert w.preempting.flights == {}
    assert any("did not terminate within 60s" in n for n in w.notes("p", "PreemptionReleased"))


async def test_a_deleted_preemptor_gives_its_hold_back() -> None:
    victims = [low("v1", "n1", gpus=8)]
    w = world(FixedPlanner(victims, "n1"))
    full_node(w, victims)
    preemptor = high("p")
    w.pods.on_add(preemptor)
    await w.settle()
    w.pods.on_delete(preemptor)
    await w.scheduler.drain()

    assert w.held_on("n1") == []
    assert w.preempting.flights == {}


@pytest.mark.parametrize(
    "policies",
    [("Never",), ("Never", "PreemptLowerPriority")],
    ids=["a pod that says Never", "a gang with one member that says Never"],
)
async def test_preemption_policy_never_preempts_nothing(policies: tuple[str, ...]) -> None:
    victims = [low("v1", "n1", gpus=8)]
    planner = FixedPlanner(victims, "n1")
    w = world(planner)
    full_node(w, victims)
    group = len(policies) > 1
    if group:
        add_group(w, "g", len(policies))
    for i, policy in enumerate(policies):
        pod = (
            make_pod(f"p-{i}").gpus(8).cpu("1").priority(1000).set("spec.preemptionPolicy", policy)
        )
        w.pods.on_add((pod.label(LABEL, "g") if group else pod).view())
    await w.settle()

    assert planner.requests == []
    assert w.evictions.evicted == []
    assert "preemptionPolicy is Never" in w.recorded.unschedulable[-1][1]


def add_group(w: World, name: str, min_member: int) -> None:
    w.scheduler.gangs.on_add(
        parse_pod_group(
            {
                "metadata": {"name": name, "namespace": "default", "uid": f"pg-{name}"},
                "spec": {"minMember": min_member},
            }
        )
    )


def gang(
    name: str, size: int, gpus: int, priority: int, nodes: Sequence[str] = ()
) -> list[PodView]:
    out = []
    for i in range(size):
        pod = make_pod(f"{name}-{i}").gpus(gpus).cpu("1").priority(priority).label(LABEL, name)
        out.append((pod.node(nodes[i]) if nodes else pod).view())
    return out


async def test_a_16_gpu_gang_evicts_two_8_gpu_gangs_whole_with_the_real_planner_and_binds() -> None:
    w = world()
    for i in range(3):
        w.nodes.on_add(make_node(f"n{i}").gpus(8).cpu("64").view())
    add_group(w, "low-a", 2)
    add_group(w, "low-b", 2)
    add_group(w, "mid", 2)
    running = [
        *gang("low-a", 2, 4, 0, ["n0", "n0"]),
        *gang("low-b", 2, 4, 0, ["n1", "n1"]),
        *gang("mid", 2, 4, 500, ["n2", "n2"]),  # as many pods, but of higher priority
    ]
    for pod in running:
        w.pods.on_add(pod)
    add_group(w, "high", 2)
    for pod in gang("high", 2, 8, 1000):
        w.pods.on_add(pod)
    await w.settle()

    assert sorted(w.evictions.evicted) == [
        "default/low-a-0",
        "default/low-a-1",
        "default/low-b-0",
        "default/low-b-1",
    ]
    assert w.held_on("n0") == ["high-0"] or w.held_on("n0") == ["high-1"]
    assert w.preempting.notes()["default/high"].endswith("0 of 4 terminated")
    for pod in running[:4]:
        w.pods.on_delete(pod)
    w.retry()
    await w.scheduler.drain()
    assert sorted((w.bound("high-0"), w.bound("high-1"))) == ["n0", "n1"]  # type: ignore[type-var]
    assert w.preempting.flights == {}


async def test_an_incomplete_gang_does_not_preempt() -> None:
    victims = [low("v1", "n1", gpus=8)]
    planner = FixedPlanner(victims, "n1")
    w = world(planner)
    full_node(w, victims)
    add_group(w, "g", 2)
    w.pods.on_add(gang("g", 1, 8, 1000)[0])
    await w.settle()
    assert planner.requests == []


async def test_the_request_carries_start_times_budgets_and_gangs_from_live_state() -> None:
    victims = [low("v1", "n1", gpus=8)]
    planner = FixedPlanner(victims, "n1")
    w = world(planner, min_runtime_s=600.0)
    full_node(w, victims)
    w.clock.advance(30)
    w.pods.on_add(high("p"))
    await w.settle()

    request = planner.requests[0]
    assert request.min_runtime_s == 600.0
    assert request.now == w.clock.now()
    # Created at the epoch in the builder's pods: its creation time stands in for its start.
    assert request.started[victims[0].uid] == started_at(
        victims[0], w.clock.now(), w.clock.wall(), {}
    )
    assert "uid-default-p" not in request.started


NOW, WALL = 1000.0, 1_700_001_000.0
STARTS = [
    (
        "status.startTime wins",
        {"start_time": WALL - 50, "creation_time": WALL - 90},
        {"u": 990.0},
        950.0,
    ),
    ("then when the scheduler saw it start", {"creation_time": WALL - 90}, {"u": 990.0}, 990.0),
    ("then its creation time", {"creation_time": WALL - 90}, {}, 910.0),
    ("a start in the future is now", {"start_time": WALL + 50}, {}, NOW),
    ("nothing known: now", {}, {}, NOW),
]


@pytest.mark.parametrize(
    ("fields", "seen", "expected"), [s[1:] for s in STARTS], ids=[s[0] for s in STARTS]
)
def test_started_at(fields: dict[str, float], seen: dict[str, float], expected: float) -> None:
    import dataclasses

    pod = dataclasses.replace(
        make_pod("x").view(),
        uid="u",
        start_time=fields.get("start_time", 0.0),
        creation_time=fields.get("creation_time", 0.0),
    )
    assert started_at(pod, NOW, WALL, seen) == expected


EVICTION_ANSWERS = [
    (
        "a PodDisruptionBudget refuses it",
        ApiError(
            429,
            "TooManyRequests",
            "Cannot evict pod as it would violate the pod's disruption budget.",
        ),
        EvictionOutcome.REFUSED,
    ),
    (
        "the API server throttles (Priority and Fairness): try again",
        ApiError(429, "TooManyRequests", "Too many requests, please try again later."),
        EvictionOutcome.FAILED,
    ),
    ("the pod is gone", ApiError(404, "NotFound", "pods x not found"), EvictionOutcome.GONE),
    (
        "a successor has the name",
        ApiError(
            409, "Conflict", "Precondition failed: UID in precondition: a, UID in object meta: b"
        ),
        EvictionOutcome.GONE,
    ),
    ("the server fails", ApiError(500, "InternalError", "etcd"), EvictionOutcome.FAILED),
]


@pytest.mark.parametrize(
    ("err", "outcome"), [a[1:] for a in EVICTION_ANSWERS], ids=[a[0] for a in EVICTION_ANSWERS]
)
def test_an_eviction_answer_is_an_outcome(err: ApiError, outcome: EvictionOutcome) -> None:
    assert _classify(err).outcome is outcome


# Reclaim: what a tenant below its guarantee may take from tenants borrowing above theirs.


def reclaim_layer(running: Sequence[tuple[str, str, int]]) -> TenantLayer:
    """Tenants a (guarantee 8 GPUs), b (4), c (none); `running`: (name, namespace, GPUs),
    started one second apart in that order."""
    tenants = [
        Tenant("a", guaranteed={GPU: 8000}, namespaces=frozenset({"a"})),
        Tenant("b", guaranteed={GPU: 4000}, namespaces=frozenset({"b"})),
        Tenant("c", namespaces=frozenset({"c"})),
    ]
    clock = FakeClock()
    layer = TenantLayer(QuotaPolicy({t.name: t for t in tenants}), clock, lambda p: True)
    for name, namespace, gpus in running:
        clock.advance(1)
        layer.counted(make_pod(name, namespace).gpus(gpus).node("n1").view())
    return layer


RECLAIMS = [
    (
        "b borrows 8 above its guarantee: its two youngest pods",
        [("b1", "b", 4), ("b2", "b", 4), ("b3", "b", 4)],
        8,
        ["b2", "b3"],
    ),
    (
        "a unit that overshoots the excess still goes: b is above its guarantee before it",
        [("b1", "b", 4), ("b2", "b", 2)],
        8,
        ["b2"],
    ),
    ("b within its guarantee keeps everything", [("b1", "b", 4)], 8, []),
    ("c has no guarantee: all it uses is borrowed", [("c1", "c", 8)], 8, ["c1"]),
    ("a would exceed its own guarantee: nothing", [("c1", "c", 8), ("a1", "a", 4)], 8, []),
    ("a pod of a's own is never reclaimed from a", [("a1", "a", 2)], 4, []),
]


@pytest.mark.parametrize(
    ("running", "wanted", "expected"), [r[1:] for r in RECLAIMS], ids=[r[0] for r in RECLAIMS]
)
def test_reclaimable(running: list[tuple[str, str, int]], wanted: int, expected: list[str]) -> None:
    layer = reclaim_layer(running)
    preemptor = make_pod("p", "a").gpus(wanted).view()
    found = layer.reclaimable([preemptor])
    assert sorted(uid.rsplit("-", 1)[-1] for uid in found) == expected


def test_a_tenant_whose_guarantee_names_no_resource_it_asks_for_reclaims_nothing() -> None:
    layer = reclaim_layer([("c1", "c", 8)])
    assert layer.reclaimable([make_pod("p", "c").gpus(8).view()]) == frozenset()


# PodDisruptionBudgets, parsed at the edge.


def labelled(namespace: str, labels: dict[str, str]) -> PodView:
    pod = make_pod("x", namespace)
    for key, value in labels.items():
        pod = pod.label(key, value)
    return pod.view()


PDB_CASES = [
    (
        "matchLabels, with the controller's count",
        {"spec": {"selector": {"matchLabels": {"app": "x"}}}, "status": {"disruptionsAllowed": 1}},
        [({"app": "x"}, True), ({"app": "y"}, False)],
        1,
    ),
    (
        "an empty selector selects the whole namespace; no status allows nothing",
        {"spec": {"selector": {}}},
        [({}, True), ({"app": "y"}, True)],
        0,
    ),
    ("a null selector selects nothing", {"spec": {}}, [({}, False)], 0),
    (
        "a status written for an older spec allows nothing, as the Eviction API says",
        {
            "metadata": {"name": "b", "namespace": "ml", "generation": 2},
            "spec": {"selector": {}},
            "status": {"disruptionsAllowed": 3, "observedGeneration": 1},
        },
        [({}, True)],
        0,
    ),
    (
        "a status for the current spec counts",
        {
            "metadata": {"name": "b", "namespace": "ml", "generation": 2},
            "spec": {"selector": {}},
            "status": {"disruptionsAllowed": 3, "observedGeneration": 2},
        },
        [({}, True)],
        3,
    ),
]


@pytest.mark.parametrize(
    ("body", "pods", "allowed"), [c[1:] for c in PDB_CASES], ids=[c[0] for c in PDB_CASES]
)
def test_a_pod_disruption_budget_is_parsed(
    body: dict[str, object], pods: list[tuple[dict[str, str], bool]], allowed: int
) -> None:
    budget = parse_disruption_budget({"metadata": {"name": "b", "namespace": "ml"}, **body})
    assert budget.disruptions_allowed == allowed
    for labels, covered in pods:
        assert budget.covers(labelled("ml", labels)) is covered
        assert not budget.covers(labelled("elsewhere", labels))


def test_a_malformed_budget_names_its_field_and_a_null_selector_is_not_handed_on() -> None:
    with pytest.raises(InvalidObject, match=r"status\.disruptionsAllowed"):
        parse_disruption_budget(
            {"metadata": {"name": "b"}, "spec": {}, "status": {"disruptionsAllowed": "x"}}
        )
    budgets = DisruptionBudgets()
    specs: list[tuple[str, dict[str, object]]] = [("none", {}), ("all", {"selector": {}})]
    for name, spec in specs:
        budgets.on_add(parse_disruption_budget({"metadata": {"name": name}, "spec": spec}))
    assert [b.name for b in budgets.budgets()] == ["all"]


FLAGS = [
    ("a Go duration", "10m", 600.0),
    ("plain seconds", "90", 90.0),
    ("zero, kube-scheduler's behaviour", "0", 0.0),
]


@pytest.mark.parametrize(("text", "seconds"), [f[1:] for f in FLAGS], ids=[f[0] for f in FLAGS])
def test_the_minimum_runtime_flag(text: str, seconds: float) -> None:
    args = build_parser().parse_args(["run", "--preemption-min-runtime", text])
    assert args.preemption_min_runtime == seconds


@pytest.mark.parametrize("text", ["-5", "soon"], ids=["negative", "not a duration"])
def test_a_bad_minimum_runtime_flag_is_refused(text: str) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["run", "--preemption-min-runtime", text])


async def test_a_preempting_gangs_progress_is_annotated_on_its_podgroup_and_removed_after() -> None:
    current: dict[str, str] = {"ml/high": "preempting ..., 0 of 2 terminated"}
    writes: list[tuple[str, object]] = []

    async def patch(path: str, body: Mapping[str, object]) -> object:
        writes.append((path, body["metadata"]))
        return {}

    publisher = NotePublisher(lambda: current, patch)
    await publisher.publish()
    await publisher.publish()  # unchanged: not written again
    current["ml/high"] = "preempting ..., 1 of 2 terminated"
    await publisher.publish()
    current.clear()
    await publisher.publish()

    path = "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/ml/podgroups/high"
    assert writes == [
        (path, {"annotations": {PREEMPTION_ANNOTATION: "preempting ..., 0 of 2 terminated"}}),
        (path, {"annotations": {PREEMPTION_ANNOTATION: "preempting ..., 1 of 2 terminated"}}),
        (path, {"annotations": {PREEMPTION_ANNOTATION: None}}),
    ]


async def test_a_preemptor_holds_no_backfill_reservation_while_its_victims_go() -> None:
    # Its capacity is held on the nominated node already; a reservation on top would only
    # cost plan rebuilds (one per preemptor in a preemption storm) and hold twice.
    victims = [low("v1", "n1"), low("v2", "n1")]
    w = world(FixedPlanner(victims, "n1"))
    backfill = LiveBackfill(w.clock)
    w.scheduler.live.backfill = backfill
    full_node(w, victims)
    w.pods.on_add(high("p"))
    await w.settle()
    assert w.evictions.evicted == ["default/v1", "default/v2"]
    assert backfill.blocked_keys() == []
    w.retry()  # its next failed cycle, victims still terminating
    await w.scheduler.drain()
    assert backfill.blocked_keys() == []


async def test_a_preemptor_is_not_tried_while_its_evictions_are_made_and_its_victims_go() -> None:
    # A cycle then could only find its victims there; the last one's going sends it back.
    victims = [low("v1", "n1"), low("v2", "n1")]
    w = world(FixedPlanner(victims, "n1"))
    full_node(w, victims)
    failed_cycles: list[int] = []

    def meanwhile(calls: int) -> None:
        w.retry()  # a cluster event while the evictions are made
        failed_cycles.append(w.scheduler.live.counts.unschedulable)

    w.evictions.before = meanwhile
    w.pods.on_add(high("p"))
    await w.settle()
    assert failed_cycles[0] == 1  # only its first cycle, the one that planned
    w.evictions.before = None
    tried = w.scheduler.live.counts.unschedulable
    w.retry()  # every eviction accepted, the victims terminating: still no cycle
    assert w.scheduler.live.counts.unschedulable == tried
    assert w.told("p").endswith("0 of 2 terminated")
    for victim in victims:
        w.pods.on_delete(victim)
    await w.settle()  # sent back as the last victim went: it binds
    assert w.bound("p") == "n1"


async def test_a_preemptor_waiting_for_its_victims_is_told_again_only_when_one_went() -> None:
    # Its first cycle said "0 of 2 terminated" with the plan; a waiting cycle before any
    # victim went would post the same news again (an Event and a status write per preemptor).
    victims = [low("v1", "n1"), low("v2", "n1")]
    w = world(FixedPlanner(victims, "n1"))
    full_node(w, victims)
    w.pods.on_add(high("p"))
    await w.settle()
    w.retry()  # waits: nothing went yet
    await w.scheduler.drain()
    assert len(w.notes("p", "FailedScheduling")) == 1
    assert len([key for key, _ in w.recorded.unschedulable if key == "default/p"]) == 1
    assert w.told("p").endswith("0 of 2 terminated")  # said with the plan

    w.pods.on_delete(victims[0])
    w.retry()  # one went: that is news
    await w.scheduler.drain()
    assert w.notes("p", "FailedScheduling")[-1].endswith(", 1 of 2 terminated")
    assert len(w.notes("p", "FailedScheduling")) == 2


async def test_a_preemptor_is_tried_first_on_its_nominated_node_while_its_plan_is_in_flight() -> (
    None
):
    victims = [low("v1", "n1"), low("v2", "n1")]
    w = world(FixedPlanner(victims, "n1"))
    full_node(w, victims)
    p = high("p")
    w.pods.on_add(p)
    await w.settle()
    handle = w.scheduler._handle
    assert handle.nominated_node(p) == "n1"
    for victim in victims:
        w.pods.on_delete(victim)
    await w.settle()
    assert w.bound("p") == "n1"
    assert handle.nominated_node(p) is None  # placed: its plan is no longer in flight


class WatchedBackfill(LiveBackfill):
    """Records every gang or pod put in the backfill plan."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__(clock)
        self.ever_blocked: list[str] = []

    def block(
        self,
        key: str,
        pods: Sequence[PodView],
        runtime: float | None,
        domains: tuple[frozenset[str], ...] = (),
    ) -> None:
        self.ever_blocked.append(key)
        super().block(key, pods, runtime, domains)


async def test_a_preemptor_is_never_added_to_the_backfill_plan_not_even_while_it_plans() -> None:
    # PostFilter runs before the pod is blocked: a pod that starts preempting is never
    # blocked, so its cycle adds no reservation to the plan only to take it out again.
    victims = [low("v1", "n1"), low("v2", "n1")]
    w = world(FixedPlanner(victims, "n1"))
    backfill = WatchedBackfill(w.clock)
    w.scheduler.live.backfill = backfill
    full_node(w, victims)
    w.pods.on_add(high("p"))
    await w.settle()
    w.retry()  # its next failed cycle, victims still terminating
    await w.scheduler.drain()
    assert w.evictions.evicted == ["default/v1", "default/v2"]
    assert backfill.ever_blocked == []


async def test_when_its_last_victim_goes_the_preemptor_is_tried_at_once() -> None:
    # Not after its backoff: the capacity it waited for is free now.
    victims = [low("v1", "n1"), low("v2", "n1")]
    w = world(FixedPlanner(victims, "n1"))
    full_node(w, victims)
    w.pods.on_add(high("p"))
    w.pods.on_add(high("other", priority=0))  # a pod that fits nowhere, to keep the queue busy
    await w.settle()
    w.pods.on_delete(victims[0])
    assert w.scheduler.queue.counts()["active"] == 0  # one victim still there
    w.pods.on_delete(victims[1])
    assert w.scheduler.queue.counts()["active"] == 1
    queued = w.scheduler.queue.pop_ready()
    assert queued is not None and queued.pod.name == "p"


# A plan's evictions: started only when every budget allows them; once started, run to the end.


def guarded(name: str, node: str, gpus: int = 4) -> PodView:
    return make_pod(name).gpus(gpus).cpu("1").priority(0).label("app", "db").node(node).view()


def guard(allowed: int) -> DisruptionBudget:
    return DisruptionBudget("default", "guard", LabelSelector((("app", "db"),)), allowed)


@pytest.mark.parametrize(
    ("covered", "allowed", "told"),
    [
        (1, 0, "(1 victim covered, 0 disruptions allowed)"),
        (2, 1, "(2 victims covered, 1 disruption allowed)"),
    ],
    ids=["a budget allowing no disruption", "a budget allowing fewer than the plan needs"],
)
async def test_a_plan_a_budget_does_not_allow_is_not_started_and_evicts_nothing(
    covered: int, allowed: int, told: str
) -> None:
    victims = [guarded(f"db-{i}", "n1") for i in range(covered)] + [low("v", "n1")]
    w = world(FixedPlanner(victims, "n1"), budgets=[guard(allowed)])
    full_node(w, victims)
    w.pods.on_add(high("p"))
    await w.settle()

    assert w.evictions.calls == []
    assert w.nominations.written == []
    assert w.preempting.flights == {} and w.preempting.executing == []
    assert w.held_on("n1") == []
    assert f"preemption would violate PodDisruptionBudget default/guard {told}" in w.told("p")
    assert w.notes("p", "Preempting") == []


async def test_a_plan_within_its_budget_is_started_with_the_covered_victims_first() -> None:
    victims = [low("v1", "n1", gpus=2), low("v2", "n1", gpus=2), guarded("db", "n1")]
    w = world(FixedPlanner(victims, "n1"), budgets=[guard(1)])
    full_node(w, victims)
    w.pods.on_add(high("p"))
    await w.settle()
    assert w.evictions.calls == ["default/db", "default/v1", "default/v2"]


async def test_a_refused_first_eviction_evicts_nothing_and_the_preemptor_backs_off() -> None:
    # The budget allowed it when the plan was checked; another disruption took it since.
    victims = [guarded("db", "n1"), low("v", "n1")]
    planner = FixedPlanner(victims, "n1")
    w = world(planner, refuse={"db"}, budgets=[guard(1)])
    full_node(w, victims)
    preemptor = high("p")
    w.pods.on_add(preemptor)
    await w.settle()

    assert w.evictions.calls == ["default/db"]  # and nothing after it
    assert w.evictions.evicted == []
    assert w.held_on("n1") == [] and w.preempting.flights == {}
    assert w.nominations.written == [("default/p", "n1"), ("default/p", None)]
    refused = "preemption would violate PodDisruptionBudget default/guard: the eviction of"
    assert any(refused in n for n in w.notes("p", "PreemptionReleased"))

    # Tried again at once (a cluster event), and again just before the backoff ends: no plan.
    await w.try_again(preemptor)
    assert refused in w.told("p")
    assert w.told("p").endswith("nothing evicted, planning again in 5s")
    await w.tick(4.9)
    await w.try_again(preemptor)
    assert len(planner.requests) == 1 and len(w.evictions.calls) == 1
    assert refused in w.told("p")

    await w.tick(0.1)  # the backoff ends: the preemptor is tried, plans, is refused again
    await w.settle()
    assert len(planner.requests) == 2 and len(w.evictions.calls) == 2
    assert w.notes("p", "PreemptionReleased")[-1].endswith("planning again in 10s")
    await w.tick(9.9)
    await w.try_again(preemptor)
    assert len(planner.requests) == 2


@pytest.mark.parametrize(
    "outcome",
    [EvictionOutcome.REFUSED, EvictionOutcome.FAILED],
    ids=["refused by a budget", "a server error"],
)
async def test_after_a_victim_was_evicted_a_refused_eviction_is_tried_again_after_a_backoff(
    outcome: EvictionOutcome,
) -> None:
    victims = [low("v1", "n1"), low("v2", "n1")]
    w = world(FixedPlanner(victims, "n1"))
    w.evictions.script["v2"] = [outcome, outcome]
    full_node(w, victims)
    w.pods.on_add(high("p"))
    await w.settle()
    assert w.evictions.calls == ["default/v1", "default/v2"]
    assert w.held_on("n1") == ["p"]  # still waiting for its victims

    await w.tick(0.5)
    assert len(w.evictions.calls) == 2  # not at once
    await w.tick(0.5)
    assert len(w.evictions.calls) == 3  # after 1 s; refused again: next after 2 s
    await w.tick(1.5)
    assert len(w.evictions.calls) == 3
    await w.tick(0.5)
    assert w.evictions.evicted == ["default/v1", "default/v2"]
    assert len(w.notes("v2", "Preempted")) == 1
    assert w.preempting.executing == []


def low_gang(w: World, size: int) -> list[PodView]:
    """A running low-priority gang of `size` 8-GPU members, one per full 8-GPU node."""
    for i in range(size):
        w.nodes.on_add(make_node(f"n{i}").gpus(8).cpu("64").view())
    add_group(w, "low", size)
    members = gang("low", size, 8, 0, [f"n{i}" for i in range(size)])
    for member in members:
        w.pods.on_add(member)
    return members


def kubelet_ends(w: World, victims: Sequence[PodView], count: int) -> None:
    """The first `count` pods evicted terminate, and the queue runs (the preemptor may bind)."""
    by_key = {p.key: p for p in victims}
    for key in w.evictions.calls[:count]:
        w.pods.on_delete(by_key[key])
    w.scheduler.queue.move_all("test")
    w.run_queue()


@pytest.mark.parametrize(
    ("preemptor", "room_after"),
    [(1, 1), (2, 2)],
    ids=["a pod of 8 GPUs, placed after 1 of 4", "a gang of 2 x 8 GPUs, placed after 2 of 4"],
)
async def test_a_preemptor_placed_before_its_plan_ends_still_has_every_victim_evicted(
    preemptor: int, room_after: int
) -> None:
    w = world()
    victims = low_gang(w, 4)
    if preemptor == 1:
        pods = [high("p")]
    else:
        add_group(w, "high", preemptor)
        pods = gang("high", preemptor, 8, 1000)
    # As the last eviction goes out (its cycles wait until then), the victims evicted so far
    # are gone and the preemptor has room: its cycle places it.
    w.evictions.before = lambda n: kubelet_ends(w, victims, room_after) if n == 4 else None
    for pod in pods:
        w.pods.on_add(pod)
    await w.settle()

    assert all(w.bound(p.name) is not None for p in pods)
    assert w.preempting.flights == {}
    assert sorted(w.evictions.evicted) == sorted(p.key for p in victims)
    for victim in victims:
        (note,) = w.notes(victim.name, "Preempted")
        assert note.startswith("preempted by ")
    assert w.preempting.executing == []


async def test_a_deleted_preemptor_still_has_the_rest_of_a_victim_gang_evicted() -> None:
    w = world()
    victims = low_gang(w, 3)
    preemptor = high("p")
    w.evictions.before = lambda n: w.pods.on_delete(preemptor) if n == 2 else None
    w.pods.on_add(preemptor)
    await w.settle()

    assert sorted(w.evictions.evicted) == sorted(p.key for p in victims)
    assert w.preempting.flights == {}
    assert any("was deleted" in n for n in w.notes("p", "PreemptionReleased"))


async def test_a_plan_that_evicted_nothing_yet_evicts_nothing_once_its_preemptor_is_gone() -> None:
    victims = [low("v1", "n1"), low("v2", "n1")]
    w = world(FixedPlanner(victims, "n1"))
    w.evictions.script["v1"] = [EvictionOutcome.FAILED]
    full_node(w, victims)
    preemptor = high("p")
    w.pods.on_add(preemptor)
    await w.settle()
    assert w.evictions.calls == ["default/v1"]  # v2 waits for v1's retry

    w.pods.on_delete(preemptor)
    await w.tick(5)
    assert w.evictions.calls == ["default/v1"]
    assert w.preempting.executing == []


async def test_a_victim_that_never_can_be_evicted_is_given_up_with_a_warning() -> None:
    victims = [low("v1", "n1"), low("v2", "n1")]
    w = world(FixedPlanner(victims, "n1"), hold_timeout_s=10.0)
    w.evictions.script["v2"] = [EvictionOutcome.FAILED] * 10
    full_node(w, victims)
    w.pods.on_add(high("p"))
    await w.settle()
    for _ in range(12):
        await w.tick(1)

    assert w.evictions.calls.count("default/v2") == 4  # at 0, 1, 3 and 7 s; 15 s is too late
    assert w.notes("v2", "PreemptionIncomplete") == [
        "pod default/p gave up evicting it: 500 InternalError: etcd"
    ]
    assert w.preempting.executing == []


async def test_a_victim_whose_preempted_event_fails_is_not_evicted_until_it_is_posted() -> None:
    """The announcement comes first: an eviction nobody explained is what the soak caught."""
    victims = [low("v1", "n1", gpus=8)]
    w = world(FixedPlanner(victims, "n1"))
    assert isinstance(w.recorded, Recorder)
    w.recorded.failing = {"Preempted"}
    full_node(w, victims)
    w.pods.on_add(high("p"))
    await w.settle()
    assert w.evictions.calls == []  # not announced: not evicted
    w.recorded.failing = set()
    await w.tick(60)
    assert w.evictions.evicted == ["default/v1"]
    assert len(w.notes("v1", "Preempted")) == 1


async def test_a_pod_placed_but_not_yet_seen_bound_is_no_victim() -> None:
    """Seen in the soak: a gang was chosen as victims 18 ms after it was placed, while its
    bindings were in flight. Until the watch shows it bound it is not running: spared."""
    w = world()
    w.nodes.on_add(make_node("n1").gpus(8).cpu("64").view())
    fresh = make_pod("fresh").gpus(8).cpu("1").priority(0)
    w.pods.on_add(fresh.view())
    await w.settle()
    assert w.bound("fresh") == "n1" and w.scheduler.cache.is_assumed(fresh.view().uid)
    w.pods.on_add(high("p"))
    await w.settle()
    assert w.evictions.calls == []
    assert "just placed" in w.told("p")
    w.pods.on_update(fresh.view(), make_pod("fresh").gpus(8).cpu("1").node("n1").view())
    await w.try_again(high("p"))
    assert w.evictions.evicted == ["default/fresh"]


# Decide, then act


async def test_deciding_a_preemption_changes_nothing_and_acting_on_it_starts_the_plan() -> None:
    victims = [low("v1", "n1"), low("v2", "n1")]
    w = world(FixedPlanner(victims, "n1"))
    full_node(w, victims)
    pod = high("p")
    runner = w.scheduler.runner_for(pod)
    counted = [sorted(i.pods) for i in w.scheduler.cache.snapshot.nodes]

    decision = w.preempting.decide("pod:default/p", [pod], None, runner)
    assert decision.plan is not None and decision.attempted and not decision.exceeded
    assert [v.name for v in decision.plan.victim_pods()] == ["v1", "v2"]
    assert w.preempting.flights == {} and w.preempting.executing == []
    assert [sorted(i.pods) for i in w.scheduler.cache.snapshot.nodes] == counted
    assert w.scheduler.metrics.preemption_attempts._value.get() == 0

    message = w.preempting.act("pod:default/p", [pod], None, decision)
    await w.scheduler.drain()
    assert message.startswith("preemption: preempting pod default/v1")
    assert list(w.preempting.flights) == ["pod:default/p"] and w.held_on("n1") == ["p"]
    assert w.evictions.evicted == ["default/v1", "default/v2"]
    assert w.scheduler.metrics.preemption_attempts._value.get() == 1


async def test_a_plan_whose_victims_all_went_is_dropped_when_acted_on_not_when_decided() -> None:
    victims = [low("v1", "n1"), low("v2", "n1")]
    w = world(FixedPlanner(victims, "n1"))
    full_node(w, victims)
    w.pods.on_add(high("p"))
    await w.settle()
    first = w.preempting.flights["pod:default/p"]
    for victim in victims:
        w.pods.on_delete(victim)
    pod = high("p")
    runner = w.scheduler.runner_for(pod)

    decision = w.preempting.decide("pod:default/p", [pod], None, runner)
    assert decision.replaces and w.preempting.flights["pod:default/p"] is first

    assert decision.plan is None  # nothing of lower priority is left to evict
    w.preempting.act("pod:default/p", [pod], None, decision)
    await w.scheduler.drain()
    assert w.preempting.flights == {} and w.held_on("n1") == []
    assert w.nominations.written[-1] == ("default/p", None)  # its nomination is cleared
