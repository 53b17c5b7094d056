"""SchedulingQueue with tenant queues: one active heap per tenant, the tenant whose head ranks
best goes next, QueueSort order decides otherwise. On a fake clock, with a rank the test
controls (the tenant layer's real rank is tested in test_tenants.py)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from batchsched.clock import FakeClock
from batchsched.framework.interfaces import QueuedPod
from batchsched.model.pod import PodView
from batchsched.plugins.priority_sort import PrioritySort
from batchsched.runtime.queue import Rank, SchedulingQueue
from tests.builders import make_pod

LABEL = "batchsched.io/queue"


def tenant_label(pod: PodView) -> str:
    return pod.labels.get(LABEL, "")


def usage_rank(usage: dict[str, int]) -> Rank:
    """Prefer the tenant that uses less (as the fair-share rank does)."""

    def rank(queued: QueuedPod) -> tuple[tuple[int, float], ...]:
        return ((0, float(usage.get(tenant_label(queued.pod), 0))),)

    return rank


def new_queue(
    tenant_of: Callable[[PodView], str] | None = None, rank: Rank | None = None
) -> tuple[SchedulingQueue, FakeClock]:
    clock = FakeClock()
    queue = SchedulingQueue(PrioritySort().less, clock, tenant_of=tenant_of, rank=rank)
    return queue, clock


def pod(name: str, tenant: str = "", priority: int = 0) -> PodView:
    builder = make_pod(name).priority(priority)
    return (builder.label(LABEL, tenant) if tenant else builder).view()


def drain(queue: SchedulingQueue) -> list[str]:
    names = []
    while (queued := queue.pop_ready()) is not None:
        names.append(queued.pod.name)
        queue.done(queued.pod.uid)
    return names


arrivals = st.lists(
    st.tuples(st.integers(0, 3), st.integers(0, 2), st.sampled_from(["", "a", "b"])),
    max_size=12,
)


@given(arrivals)
def test_without_a_rank_the_order_is_priority_then_fifo_whatever_the_tenants(
    items: list[tuple[int, int, str]],
) -> None:
    plain, clock = new_queue()
    split, split_clock = new_queue(tenant_label)
    for i, (priority, wait, tenant) in enumerate(items):
        clock.advance(wait)
        split_clock.advance(wait)
        plain.add(pod(f"p{i}", tenant, priority))
        split.add(pod(f"p{i}", tenant, priority))
    expected = [f"p{i}" for i, _ in sorted(enumerate(items), key=lambda e: (-e[1][0], e[0]))]
    assert drain(plain) == expected
    assert drain(split) == expected


def test_a_rank_that_prefers_the_lighter_tenant_alternates_as_usage_changes() -> None:
    usage = {"a": 0, "b": 0}
    queue, _ = new_queue(tenant_label, usage_rank(usage))
    for i in range(3):
        queue.add(pod(f"a{i}", "a"))
    for i in range(3):
        queue.add(pod(f"b{i}", "b"))
    order = []
    while (queued := queue.pop_ready()) is not None:
        order.append(queued.pod.name)
        usage[tenant_label(queued.pod)] += 1  # it started: its tenant uses more now
        queue.done(queued.pod.uid)
    assert order == ["a0", "b0", "a1", "b1", "a2", "b2"]


def test_the_rank_beats_priority_across_tenants_but_not_within_one() -> None:
    usage = {"a": 5, "b": 0}
    queue, _ = new_queue(tenant_label, usage_rank(usage))
    queue.add(pod("a-high", "a", priority=100))
    queue.add(pod("b-low", "b", priority=1))
    queue.add(pod("b-high", "b", priority=50))
    assert drain(queue) == ["b-high", "b-low", "a-high"]


def test_equal_ranks_fall_back_to_queue_sort_order_across_tenants() -> None:
    queue, _ = new_queue(tenant_label, usage_rank({}))
    queue.add(pod("a-low", "a", priority=1))
    queue.add(pod("b-high", "b", priority=9))
    queue.add(pod("a-first", "a", priority=9))
    assert drain(queue) == ["b-high", "a-first", "a-low"]


@pytest.mark.parametrize(
    ("moves_to", "order"),
    [("a", ["x", "z", "y"]), ("c", ["z", "y", "x"])],
    ids=[
        "a pod moved to the lighter tenant goes first there, keeping its seat",
        "a pod moved to the heavier tenant waits behind the lighter one's pods",
    ],
)
def test_a_pod_whose_label_moves_it_to_another_tenant_changes_heaps_and_pops_once(
    moves_to: str, order: list[str]
) -> None:
    usage = {"a": 0, "b": 10, "c": 20}
    queue, _ = new_queue(tenant_label, usage_rank(usage))
    queue.add(pod("x", "b"))
    queue.add(pod("y", "b"))
    queue.add(pod("z", "a"))
    queue.update(pod("x", "b"), pod("x", moves_to))
    popped = []
    while (queued := queue.pop_ready()) is not None:
        popped.append(queued.pod.name)
        if queued.pod.name == "x":
            assert tenant_label(queued.pod) == moves_to  # the new version, not the stale one
        queue.done(queued.pod.uid)
    assert popped == order
    assert queue.counts()["active"] == 0


def test_set_tenants_refiles_active_pods_and_keeps_their_arrival_order() -> None:
    usage = {"a": 10, "b": 0}
    queue, _ = new_queue()
    for name, tenant in [("a0", "a"), ("b0", "b"), ("a1", "a"), ("b1", "b")]:
        queue.add(pod(name, tenant))
    queue.set_tenants(tenant_label, usage_rank(usage))
    assert drain(queue) == ["b0", "b1", "a0", "a1"]


def test_set_tenants_back_to_one_tenant_restores_the_plain_order() -> None:
    queue, _ = new_queue(tenant_label, usage_rank({"a": 10}))
    for name, tenant in [("a0", "a"), ("b0", "b"), ("a1", "a")]:
        queue.add(pod(name, tenant))
    queue.set_tenants(lambda p: "", None)
    assert drain(queue) == ["a0", "b0", "a1"]


def test_a_deleted_pod_is_never_popped_even_when_it_headed_the_best_tenant() -> None:
    usage = {"a": 0, "b": 10}
    queue, _ = new_queue(tenant_label, usage_rank(usage))
    queue.add(pod("a0", "a"))
    queue.add(pod("a1", "a"))
    queue.add(pod("b0", "b"))
    queue.delete(pod("a0", "a"))
    queue.delete(pod("b0", "b"))
    assert drain(queue) == ["a1"]


def test_a_pod_deleted_after_changing_tenant_is_popped_from_neither_heap() -> None:
    queue, _ = new_queue(tenant_label, usage_rank({}))
    queue.add(pod("x", "a"))
    queue.update(pod("x", "a"), pod("x", "b"))
    queue.delete(pod("x", "b"))
    assert queue.pop_ready() is None
    assert queue.counts()["active"] == 0


def test_a_pod_back_from_backoff_joins_its_tenants_heap() -> None:
    usage = {"a": 0, "b": 10}
    queue, clock = new_queue(tenant_label, usage_rank(usage))
    queue.add(pod("a0", "a"))
    first = queue.pop_ready()
    assert first is not None
    queue.requeue_backoff(first)
    queue.done(first.pod.uid)
    queue.add(pod("b0", "b"))
    assert drain(queue) == ["b0"]  # a0 still backs off
    clock.advance(queue.backoff_duration(first.attempts))
    assert drain(queue) == ["a0"]


ops = st.lists(
    st.tuples(
        st.sampled_from(["add", "relabel", "delete", "pop"]),
        st.integers(0, 5),
        st.sampled_from(["a", "b", "c"]),
    ),
    max_size=40,
)


@given(ops)
def test_every_live_pod_pops_exactly_once_and_no_deleted_pod_pops(
    steps: list[tuple[str, int, str]],
) -> None:
    usage: dict[str, int] = {}
    queue, _ = new_queue(tenant_label, usage_rank(usage))
    queued: dict[str, str] = {}  # name -> tenant, pods added and neither popped nor deleted
    popped: list[str] = []
    for op, n, tenant in steps:
        name = f"p{n}"
        if op == "add" and name not in queued and name not in popped:
            queue.add(pod(name, tenant))
            queued[name] = tenant
        elif op == "relabel" and name in queued:
            queue.update(pod(name, queued[name]), pod(name, tenant))
            queued[name] = tenant
        elif op == "delete" and name in queued:
            queue.delete(pod(name, queued.pop(name)))
        elif op == "pop" and (got := queue.pop_ready()) is not None:
            assert got.pod.name in queued
            owner = queued.pop(got.pod.name)
            usage[owner] = usage.get(owner, 0) + 1
            popped.append(got.pod.name)
            queue.done(got.pod.uid)
    rest = drain(queue)
    assert sorted(rest) == sorted(queued)
    assert len(set(popped + rest)) == len(popped + rest)
