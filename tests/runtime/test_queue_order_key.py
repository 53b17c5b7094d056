"""A keyed QueueSort's `order_key` orders exactly as its `less`, so the queue may compare keys
computed once per entry instead of calling `less` on every heap comparison."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from batchsched.clock import FakeClock
from batchsched.framework.interfaces import KeyedQueueSort, QueuedPod, QueueSortPlugin
from batchsched.plugins.gang_sort import GangSort
from batchsched.plugins.priority_sort import PrioritySort
from batchsched.runtime.queue import SchedulingQueue
from tests.builders import make_pod

_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
_Spec = tuple[int, str | None, int, float]


class _Ages:
    def __init__(self, ages: dict[str, float]) -> None:
        self.ages = ages

    def created(self, key: str) -> float | None:
        return self.ages.get(key)


def _queued(i: int, priority: int, group: str | None, second: int, at: float) -> QueuedPod:
    builder = make_pod(f"p{i}").priority(priority).created(f"2026-01-01T00:00:{second:02d}Z")
    if group is not None:
        builder = builder.label(_GROUP_LABEL, group)
    return QueuedPod(builder.view(), at, 0)


_pods = st.lists(
    st.tuples(
        st.integers(0, 2),  # priority
        st.sampled_from([None, "g1", "g2", "g3"]),
        st.integers(0, 3),  # creation second: ties are common
        st.sampled_from([0.0, 1.0, 2.0]),  # enqueued at: ties too
    ),
    min_size=2,
    max_size=12,
)


def _sorts() -> list[QueueSortPlugin]:
    return [PrioritySort(), GangSort(groups=_Ages({"default/g1": 5.0, "default/g2": -1.0}))]


@settings(max_examples=200, deadline=None)
@given(_pods)
def test_order_key_agrees_with_less_on_every_pair(specs: list[_Spec]) -> None:
    pods = [_queued(i, *spec) for i, spec in enumerate(specs)]
    for plugin in _sorts():
        assert isinstance(plugin, KeyedQueueSort)
        for a in pods:
            for b in pods:
                assert plugin.less(a, b) == (plugin.order_key(a) < plugin.order_key(b))


class _Unkeyed:
    """The same order through `less` alone (what an out-of-tree QueueSort offers)."""

    name = "Unkeyed"

    def __init__(self, inner: QueueSortPlugin) -> None:
        self.inner = inner

    def less(self, a: QueuedPod, b: QueuedPod) -> bool:
        return self.inner.less(a, b)


@pytest.mark.parametrize("index", [0, 1], ids=["PrioritySort", "GangSort"])
def test_the_queue_pops_in_the_same_order_with_keys_as_with_less(index: int) -> None:
    rng = random.Random(7)
    specs = [
        (rng.randint(0, 2), rng.choice([None, "g1", "g2"]), rng.randint(0, 5), float(i % 3))
        for i in range(200)
    ]
    orders = []
    for plugin in (_sorts()[index], _Unkeyed(_sorts()[index])):
        queue = SchedulingQueue(plugin.less, FakeClock())
        for i, spec in enumerate(specs):
            queue.add(_queued(i, *spec).pod)
        popped = []
        while (qp := queue.pop_ready()) is not None:
            popped.append(qp.pod.name)
        orders.append(popped)
    assert orders[0] == orders[1]
    assert len(orders[0]) == 200
