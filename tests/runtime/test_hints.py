"""Queueing hints: which parked pods a cluster event may help."""

from __future__ import annotations

import pytest

from batchsched.clock import FakeClock
from batchsched.framework.interfaces import QueuedPod
from batchsched.model.pod import PodView
from batchsched.runtime import hints
from batchsched.runtime.queue import SchedulingQueue
from tests.builders import make_node, make_pod


def gpu_pod(name: str, gpus: int = 4) -> PodView:
    return make_pod(name).gpus(gpus).view()


def foo_pod(name: str) -> PodView:
    return make_pod(name).set("spec.containers", [_container({"example.com/foo": "1"})]).view()


def _container(requests: dict[str, str]) -> dict[str, object]:
    return {"name": "c", "image": "busybox", "resources": {"requests": requests}}


SPREAD = [
    {
        "maxSkew": 1,
        "topologyKey": "zone",
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": "x"}},
    }
]


@pytest.mark.parametrize(
    ("gone", "full", "waiting", "helps"),
    [
        pytest.param(gpu_pod("g"), False, gpu_pod("w"), True, id="a GPU pod gone helps a GPU pod"),
        pytest.param(
            foo_pod("f"), False, gpu_pod("w"), False, id="freeing another resource does not help"
        ),
        pytest.param(
            foo_pod("f"), True, gpu_pod("w"), True, id="a slot on a node full of pods helps anyone"
        ),
        pytest.param(
            foo_pod("f"),
            False,
            make_pod("s").set("spec.topologySpreadConstraints", SPREAD).view(),
            True,
            id="a pod whose spread counts pods is always helped",
        ),
        pytest.param(
            foo_pod("f"),
            False,
            make_pod("e").view(),
            False,
            id="a pod that requests nothing is not helped by freed resources",
        ),
    ],
)
def test_after_pod_gone(gone: PodView, full: bool, waiting: PodView, helps: bool) -> None:
    assert hints.after_pod_gone(gone, full)(waiting) is helps


@pytest.mark.parametrize(
    ("gpus", "helps"),
    [
        pytest.param(8, True, id="a node that could hold the pod empty helps"),
        pytest.param(2, False, id="a node too small even when empty does not"),
    ],
)
def test_after_node_change(gpus: int, helps: bool) -> None:
    node = make_node("n").gpus(gpus).view()
    assert hints.after_node_change(node)(gpu_pod("w")) is helps


def test_move_where_moves_only_the_pods_the_event_helps() -> None:
    clock = FakeClock()
    queue = SchedulingQueue(lambda a, b: a.pod.name < b.pod.name, clock)
    for pod in (gpu_pod("gpu"), foo_pod("foo")):
        queue.add(pod)
        queued = queue.pop_ready()
        assert queued is not None
        queue.requeue_unschedulable(queued, queue.scheduling_cycle() - 1)
    clock.advance(60)  # past every backoff
    assert queue.counts()["unschedulable"] == 2
    moved = queue.move_where("AssignedPodDelete", hints.after_pod_gone(gpu_pod("done"), False))
    assert moved == 1
    head = queue.pop_ready()
    assert isinstance(head, QueuedPod) and head.pod.name == "gpu"
    assert queue.counts()["unschedulable"] == 1


class _Plan:
    def __init__(self) -> None:
        self.keys: frozenset[str] = frozenset({"default/head"})

    def holding(self) -> frozenset[str]:
        return self.keys

    def block(self, *args: object) -> None:
        pass

    def unblock(self, *args: object) -> None:
        pass

    def verdicts(self, *args: object) -> None:
        return None


async def test_a_reservation_that_leaves_the_plan_sends_the_pool_back() -> None:
    from tests.runtime.test_handlers import setup

    scheduler, pods, nodes, _ = setup()
    plan = _Plan()
    scheduler.live.backfill = plan  # type: ignore[assignment]
    nodes.on_add(make_node("n1").cpu("1").view())
    pods.on_add(make_pod("big").cpu("2").view())
    queued = scheduler.queue.pop_ready()
    assert queued is not None
    scheduler.schedule_one(queued)
    await scheduler.drain()
    assert scheduler.queue.counts()["unschedulable"] == 1
    scheduler.check_reservations()  # nothing left the plan
    assert scheduler.queue.counts()["unschedulable"] == 1
    plan.keys = frozenset()
    scheduler.check_reservations()
    assert scheduler.queue.counts()["unschedulable"] == 0
