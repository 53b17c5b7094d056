"""SchedulerCache: watch events and assumed pods folded into the live snapshot."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import pytest

from batchsched.cache import SchedulerCache
from batchsched.clock import FakeClock
from batchsched.framework.registry import assemble_profile
from batchsched.framework.runner import ProfileRunner
from batchsched.plugins.priority_sort import PrioritySort
from batchsched.plugins.registry import DEFAULT_PLUGINS, default_registry
from batchsched.runtime.queue import SchedulingQueue
from batchsched.snapshot import NodeInfo, Snapshot
from tests.builders import make_node, make_pod

TTL = 30.0


def accounting_errors(snapshot: Snapshot) -> list[str]:
    """Every way the snapshot's running sums differ from what its pods add up to."""
    errors = []
    seen: dict[str, str] = {}
    for info in snapshot.nodes:
        expected = _recomputed(info)
        actual = (
            info.req_milli_cpu,
            info.req_memory,
            info.req_ephemeral,
            info.req_scalar,
            info.nz_milli_cpu,
            info.nz_memory,
            Counter(info.used_ports),
            info.pods_with_affinity,
            info.pods_with_required_anti_affinity,
        )
        if actual != expected:
            errors.append(f"{info.name}: sums {actual} != recomputed {expected}")
        for uid in info.pods:
            if uid in seen:
                errors.append(f"{uid} counted on {seen[uid]} and {info.name}")
            seen[uid] = info.name
            if snapshot.node_of(uid) is not info:
                errors.append(f"{uid} is on {info.name} but node_of says otherwise")
    return errors


def _recomputed(info: NodeInfo) -> tuple[object, ...]:
    pods = list(info.pods.values())
    scalar: dict[str, int] = {}
    for pod in pods:
        for name, amount in pod.requests.scalar.items():
            scalar[name] = scalar.get(name, 0) + amount
    return (
        sum(p.requests.milli_cpu for p in pods),
        sum(p.requests.memory for p in pods),
        sum(p.requests.ephemeral_storage for p in pods),
        {k: v for k, v in scalar.items() if v},
        sum(p.non_zero_milli_cpu for p in pods),
        sum(p.non_zero_memory for p in pods),
        Counter(port for p in pods for port in p.host_ports),
        sum(1 for p in pods if p.pod_affinity is not None or p.pod_anti_affinity is not None),
        sum(1 for p in pods if p.pod_anti_affinity is not None and p.pod_anti_affinity.required),
    )


def cache_with(*node_names: str) -> tuple[SchedulerCache, FakeClock]:
    clock = FakeClock()
    cache = SchedulerCache(clock, assume_ttl=TTL)
    for name in node_names:
        cache.add_node(make_node(name).view())
    return cache, clock


def cpu_on(cache: SchedulerCache, node: str) -> tuple[int, int]:
    info = cache.snapshot.get(node)
    assert info is not None
    return info.req_milli_cpu, len(info.pods)


Step = Callable[[SchedulerCache, FakeClock], object]


def add(name: str, cpu: str, node: str, phase: str = "Running") -> Step:
    return lambda cache, _: cache.add_pod(make_pod(name).cpu(cpu).node(node).phase(phase).view())


def update(name: str, cpu: str, node: str, phase: str = "Running", deleting: bool = False) -> Step:
    def step(cache: SchedulerCache, _: FakeClock) -> None:
        old = make_pod(name).node(node).view()
        builder = make_pod(name).cpu(cpu).node(node).phase(phase)
        if deleting:
            builder.set("metadata.deletionTimestamp", "2024-01-01T00:00:00Z")
        cache.update_pod(old, builder.view())

    return step


def remove(name: str, node: str) -> Step:
    return lambda cache, _: cache.remove_pod(make_pod(name).node(node).view())


def assume(name: str, cpu: str, node: str) -> Step:
    return lambda cache, _: cache.assume(make_pod(name).cpu(cpu).view(), node)


def finish(name: str) -> Step:
    return lambda cache, _: cache.finish_binding(make_pod(name).view())


def forget(name: str) -> Step:
    return lambda cache, _: cache.forget(make_pod(name).view())


def advance(seconds: float) -> Step:
    def step(cache: SchedulerCache, clock: FakeClock) -> None:
        clock.advance(seconds)
        cache.cleanup_expired()

    return step


LIFECYCLE = [
    ([add("a", "1", "n1")], (1000, 1), (0, 0)),
    ([add("a", "1", "n1"), update("a", "3", "n1")], (3000, 1), (0, 0)),
    ([add("a", "1", "n1"), update("a", "1", "n1", deleting=True)], (1000, 1), (0, 0)),
    ([add("a", "1", "n1"), update("a", "1", "n1", phase="Succeeded")], (0, 0), (0, 0)),
    ([add("a", "1", "n1"), update("a", "1", "n1", phase="Failed")], (0, 0), (0, 0)),
    ([add("a", "1", "n1"), remove("a", "n1")], (0, 0), (0, 0)),
    ([add("a", "1", "n1", phase="Succeeded")], (0, 0), (0, 0)),
    ([add("a", "1", "n1"), add("a", "2", "n1")], (2000, 1), (0, 0)),
    ([remove("a", "n1")], (0, 0), (0, 0)),
    ([update("a", "2", "n2")], (0, 0), (2000, 1)),
    ([assume("a", "1", "n1")], (1000, 1), (0, 0)),
    ([assume("a", "1", "n1"), finish("a"), add("a", "1", "n1")], (1000, 1), (0, 0)),
    ([assume("a", "1", "n1"), finish("a"), add("a", "1", "n2")], (0, 0), (1000, 1)),
    ([assume("a", "1", "n1"), finish("a"), update("a", "1", "n1")], (1000, 1), (0, 0)),
    ([assume("a", "1", "n1"), finish("a"), forget("a")], (0, 0), (0, 0)),
    ([assume("a", "1", "n1"), remove("a", "n1")], (0, 0), (0, 0)),
    ([assume("a", "1", "n1"), finish("a"), advance(TTL + 1)], (0, 0), (0, 0)),
    ([assume("a", "1", "n1"), finish("a"), advance(TTL)], (1000, 1), (0, 0)),
    ([assume("a", "1", "n1"), advance(TTL * 10)], (1000, 1), (0, 0)),
    (
        [assume("a", "1", "n1"), finish("a"), add("a", "1", "n1"), advance(TTL * 2)],
        (1000, 1),
        (0, 0),
    ),
    ([assume("a", "1", "n1"), finish("a"), add("a", "1", "n1"), forget("a")], (1000, 1), (0, 0)),
]


@pytest.mark.parametrize(
    ("steps", "on_n1", "on_n2"),
    LIFECYCLE,
    ids=[
        "a bound pod counts on its node",
        "an update with more cpu replaces the old request",
        "a terminating pod still counts until it is deleted",
        "a succeeded pod stops counting",
        "a failed pod stops counting",
        "a deleted pod stops counting",
        "a finished pod from a relist never counts",
        "adding the same pod twice counts it once with the newer request",
        "deleting a pod the cache never saw is harmless",
        "an update for a pod the cache never saw adds it",
        "an assumed pod counts at once",
        "confirmation on the assumed node keeps a single count",
        "confirmation on another node moves the pod there",
        "confirmation by an update event keeps a single count",
        "forget after a failed binding stops counting",
        "deleting an assumed pod stops counting it",
        "an assumed pod expires once the ttl after binding has passed",
        "an assumed pod exactly at its deadline has not expired",
        "an assumed pod whose binding never finished does not expire",
        "a confirmed pod never expires",
        "forgetting a confirmed pod leaves it counted",
    ],
)
def test_pod_lifecycle(steps: list[Step], on_n1: tuple[int, int], on_n2: tuple[int, int]) -> None:
    cache, clock = cache_with("n1", "n2")
    for step in steps:
        step(cache, clock)
    assert (cpu_on(cache, "n1"), cpu_on(cache, "n2")) == (on_n1, on_n2)
    assert accounting_errors(cache.snapshot) == []


@pytest.mark.parametrize(
    ("steps", "assumed"),
    [
        ([assume("a", "1", "n1")], True),
        ([assume("a", "1", "n1"), finish("a"), add("a", "1", "n1")], False),
        ([assume("a", "1", "n1"), forget("a")], False),
        ([assume("a", "1", "n1"), finish("a"), advance(TTL + 1)], False),
    ],
    ids=[
        "an assumed pod is assumed",
        "a confirmed pod is no longer assumed",
        "a forgotten pod is no longer assumed",
        "an expired pod is no longer assumed",
    ],
)
def test_is_assumed(steps: list[Step], assumed: bool) -> None:
    cache, clock = cache_with("n1", "n2")
    for step in steps:
        step(cache, clock)
    assert cache.is_assumed("uid-default-a") is assumed


def test_cleanup_expired_returns_only_the_expired_pods_bound_to_their_node() -> None:
    cache, clock = cache_with("n1")
    cache.assume(make_pod("early").cpu("1").view(), "n1")
    cache.finish_binding(make_pod("early").view())
    clock.advance(10)
    cache.assume(make_pod("late").cpu("1").view(), "n1")
    cache.finish_binding(make_pod("late").view())
    clock.advance(TTL - 5)
    expired = cache.cleanup_expired()
    assert [(p.name, p.node_name) for p in expired] == [("early", "n1")]
    assert cpu_on(cache, "n1") == (1000, 1)
    assert cache.cleanup_expired() == []


def test_a_pod_bound_to_an_unknown_node_counts_when_the_node_arrives() -> None:
    cache, _ = cache_with()
    cache.add_pod(make_pod("a").cpu("1").node("n1").view())
    assert cache.snapshot.get("n1") is None
    cache.add_node(make_node("n1").view())
    assert cpu_on(cache, "n1") == (1000, 1)


def test_a_removed_node_keeps_its_pods_aside_until_it_comes_back() -> None:
    cache, _ = cache_with("n1")
    cache.add_pod(make_pod("a").cpu("1").node("n1").view())
    cache.assume(make_pod("b").cpu("2").view(), "n1")
    cache.remove_node(make_node("n1").view())
    assert cache.snapshot.node_of("uid-default-a") is None and len(cache.snapshot) == 0
    cache.add_node(make_node("n1").view())
    assert cpu_on(cache, "n1") == (3000, 2)
    assert cache.is_assumed("uid-default-b")


def test_a_pod_aside_can_be_deleted_and_an_assumed_one_can_expire() -> None:
    cache, clock = cache_with("n1")
    cache.add_pod(make_pod("a").cpu("1").node("n1").view())
    cache.assume(make_pod("b").cpu("2").view(), "n1")
    cache.finish_binding(make_pod("b").view())
    cache.remove_node(make_node("n1").view())
    cache.remove_pod(make_pod("a").node("n1").view())
    clock.advance(TTL + 1)
    assert [p.name for p in cache.cleanup_expired()] == ["b"]
    cache.add_node(make_node("n1").view())
    assert cpu_on(cache, "n1") == (0, 0)


def test_a_node_update_keeps_its_pods_and_refreshes_node_facts() -> None:
    cache, _ = cache_with()
    old = make_node("n1").cpu("4").image(["cuda:12"], 10)
    new = make_node("n1").cpu("8").image(["pytorch:2"], 20).taint("spot", "", "PreferNoSchedule")
    cache.add_node(old.view())
    cache.add_pod(make_pod("a").cpu("1").node("n1").view())
    cache.update_node(old.view(), new.view())
    info = cache.snapshot.get("n1")
    assert info is not None
    assert (info.alloc_milli_cpu, info.req_milli_cpu, len(info.pods)) == (8000, 1000, 1)
    assert info.node.taints == new.view().taints
    assert cache.snapshot.image_node_counts == {"pytorch:2": 1}
    assert cache.snapshot.has_prefer_no_schedule_taints
    cache.update_node(new.view(), old.view())
    assert cache.snapshot.image_node_counts == {"cuda:12": 1}
    assert not cache.snapshot.has_prefer_no_schedule_taints


def test_an_update_for_an_unknown_node_adds_it() -> None:
    cache, _ = cache_with()
    cache.update_node(make_node("n1").view(), make_node("n1").view())
    assert [info.name for info in cache.snapshot.nodes] == ["n1"]


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda c: c.add_pod(make_pod("p").view()), "not bound"),
        (lambda c: c.assume(make_pod("p").view(), "nowhere"), "unknown node"),
        (lambda c: c.assume(make_pod("run").view(), "n2"), "already in the cache on n1"),
        (lambda c: c.assume(make_pod("res").view(), "n2"), "reserved on n1, not n2"),
    ],
    ids=[
        "an unbound pod is refused",
        "assuming onto an unknown node is refused",
        "assuming a pod the cache already counts is refused",
        "assuming a pod elsewhere than the runner reserved it is refused",
    ],
)
def test_misuse_is_refused(call: Callable[[SchedulerCache], object], error: str) -> None:
    cache, _ = cache_with("n1", "n2")
    cache.add_pod(make_pod("run").node("n1").view())
    cache.snapshot.assume(make_pod("res").view(), "n1")
    with pytest.raises(ValueError, match=error):
        call(cache)


def test_forget_undoes_a_reservation_the_runner_made_but_nobody_assumed() -> None:
    cache, _ = cache_with("n1")
    cache.snapshot.assume(make_pod("a").cpu("1").view(), "n1")
    cache.forget(make_pod("a").view())
    assert cpu_on(cache, "n1") == (0, 0)


PROFILE = assemble_profile(default_registry(), "gpu-scheduler", DEFAULT_PLUGINS, {})


def test_schedule_assume_bind_and_requeue_through_the_runner() -> None:
    """A scheduling loop in miniature: queue -> runner on the live snapshot -> cache."""
    clock = FakeClock()
    cache = SchedulerCache(clock, assume_ttl=TTL)
    queue = SchedulingQueue(PrioritySort().less, clock)
    runner = ProfileRunner(PROFILE)
    for name in ("n1", "n2"):
        cache.add_node(make_node(name).cpu("2").view())
    for i in range(3):
        queue.add(make_pod(f"p{i}").cpu("2").view())
    placed = []
    while (qp := queue.pop_ready()) is not None:
        cycle = queue.scheduling_cycle()
        result = runner.schedule_one(qp.pod, cache.snapshot)
        if result.node_name is None:
            assert result.message() == "0/2 nodes are available: 2 Insufficient cpu."
            queue.requeue_unschedulable(qp, cycle)
        else:
            bound = cache.assume(qp.pod, result.node_name)
            cache.finish_binding(bound)
            placed.append(bound.node_name)
        queue.done(qp.pod.uid)
    assert sorted(placed) == ["n1", "n2"] and queue.counts()["unschedulable"] == 1
    assert accounting_errors(cache.snapshot) == []
    cache.add_node(make_node("n3").cpu("2").view())
    queue.move_all("NodeAdd")
    clock.advance(1)
    qp = queue.pop_ready()
    assert qp is not None and qp.attempts == 2
    result = runner.schedule_one(qp.pod, cache.snapshot)
    assert result.node_name == "n3"
    cache.assume(qp.pod, "n3")
    assert [cpu_on(cache, n) for n in ("n1", "n2", "n3")] == [(2000, 1)] * 3


def test_removing_a_node_while_a_trial_is_open_is_refused() -> None:
    cache, _ = cache_with("n1", "n2")
    with cache.snapshot.begin_trial():
        cache.snapshot.assume(make_pod("a").view(), "n1")
        with pytest.raises(RuntimeError, match="trial"):
            cache.remove_node(make_node("n1").view())
    assert [info.name for info in cache.snapshot.nodes] == ["n1", "n2"]


def test_forget_after_the_runner_already_unreserved_the_pod() -> None:
    cache, _ = cache_with("n1")
    runner = ProfileRunner(PROFILE)
    pod = make_pod("a").cpu("1").view()
    result = runner.schedule_one(pod, cache.snapshot)
    assert result.node_name == "n1"
    cache.assume(pod, "n1")
    runner.unreserve(result.state, pod, "n1", cache.snapshot)
    cache.forget(pod)
    assert cpu_on(cache, "n1") == (0, 0) and not cache.is_assumed(pod.uid)
    assert accounting_errors(cache.snapshot) == []


def test_by_default_a_pod_whose_binding_was_accepted_never_expires() -> None:
    """kube-scheduler has not expired such pods since 1.23: a watch that reconnects slowly
    after an API server restart must not free GPUs that are in use."""
    clock = FakeClock()
    cache = SchedulerCache(clock)
    cache.add_node(make_node("n1").view())
    pod = make_pod("bound").cpu("1").view()
    cache.assume(pod, "n1")
    cache.finish_binding(pod)
    clock.advance(24 * 3600)
    assert cache.cleanup_expired() == []
    assert cache.is_assumed(pod.uid) and cpu_on(cache, "n1") == (1000, 1)
    cache.remove_pod(pod)  # the relist says it is gone
    assert cpu_on(cache, "n1") == (0, 0)
