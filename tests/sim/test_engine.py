"""The virtual clock: event order, departures freeing capacity, the queue, through ProfileRunner."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from batchsched.config import default_config
from batchsched.framework.profile import Profile
from batchsched.model.node import NodeView
from batchsched.model.pod import PodView
from batchsched.sim.engine import Simulator
from batchsched.sim.workload import SimPod, sim_pod
from batchsched.snapshot import NodeInfo, Snapshot
from tests.builders import make_node, make_pod


@dataclass
class Log:
    """Every observer call, as (time, event, pod name, node name)."""

    events: list[tuple[float, str, str, str]] = field(default_factory=list)

    def arrived(self, pod: SimPod, now: float) -> None:
        self.events.append((now, "arrived", pod.pod.name, ""))

    def placed(self, pod: SimPod, info: NodeInfo, now: float) -> None:
        self.events.append((now, "placed", pod.pod.name, info.name))

    def departed(self, pod: SimPod, info: NodeInfo, now: float) -> None:
        self.events.append((now, "departed", pod.pod.name, info.name))

    def instant_done(self, now: float, waiting: int) -> None:
        pass

    def of(self, kind: str) -> list[tuple[float, str, str]]:
        return [(t, pod, node) for t, event, pod, node in self.events if event == kind]


def profile() -> Profile:
    return default_config().build_profiles()["gpu-scheduler"]


def gpu_pod(name: str, at: float, runtime: float | None = None, priority: int = 0) -> SimPod:
    view = make_pod(name).cpu("1").gpus(1).priority(priority).view()
    return sim_pod(view, at, runtime)


def run(nodes: list[NodeView], pods: list[SimPod]) -> tuple[Simulator, Log]:
    log = Log()
    sim = Simulator(Snapshot(nodes), profile(), log, seed=1)
    sim.run(pods)
    return sim, log


def one_gpu_node() -> list[NodeView]:
    return [make_node("n1").cpu("8").gpus(1).view()]


def test_a_departure_frees_its_gpu_for_a_pod_arriving_at_the_same_instant() -> None:
    sim, log = run(one_gpu_node(), [gpu_pod("first", 0, runtime=10), gpu_pod("second", 10)])
    assert log.of("placed") == [(0, "first", "n1"), (10, "second", "n1")]
    assert log.events.index((10, "departed", "first", "n1")) < log.events.index(
        (10, "arrived", "second", "")
    )
    assert sim.attempts == 2  # the second pod never waited


def test_a_waiting_pod_is_placed_when_a_departure_frees_capacity() -> None:
    sim, log = run(one_gpu_node(), [gpu_pod("first", 0, runtime=10), gpu_pod("second", 3)])
    assert log.of("placed") == [(0, "first", "n1"), (10, "second", "n1")]
    assert sim.waiting == 0 and sim.attempts == 3


def test_the_queue_sort_decides_who_gets_the_freed_gpu() -> None:
    pods = [
        gpu_pod("holder", 0, runtime=10),
        gpu_pod("early-low", 1),
        gpu_pod("late-high", 2, priority=100),
    ]
    sim, log = run(one_gpu_node(), pods)
    assert log.of("placed") == [(0, "holder", "n1"), (10, "late-high", "n1")]
    assert [p.pod.name for p in sim.waiting_pods()] == ["early-low"]


def test_a_pod_that_never_fits_keeps_waiting_with_kube_schedulers_reason() -> None:
    nodes = [make_node("n1").cpu("8").gpus(1).view(), make_node("n2").cpu("8").view()]
    big = sim_pod(make_pod("big").cpu("1").gpus(2).view(), 0, None)
    sim, log = run(nodes, [big])
    assert log.of("placed") == []
    assert (
        sim.last_failure[big.pod.uid] == "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."
    )


def test_the_cycle_picks_the_only_node_the_filters_allow() -> None:
    nodes = [make_node("small").cpu("2").view(), make_node("large").cpu("16").view()]
    pod = sim_pod(make_pod("wide").cpu("8").view(), 0, 5)
    _, log = run(nodes, [pod])
    assert log.of("placed") == [(0, "wide", "large")]
    assert log.of("departed") == [(5, "wide", "large")]


def test_a_departure_from_a_node_the_pod_cannot_use_does_not_retry_it() -> None:
    nodes = [make_node("gpu").cpu("8").gpus(1).view(), make_node("cpu").cpu("8").view()]
    pods = [
        gpu_pod("holder", 0, runtime=100),
        sim_pod(make_pod("cpu-job").cpu("1").view(), 0, 5),
        gpu_pod("waiter", 1),
    ]
    sim, log = run(nodes, pods)
    # holder, cpu-job, waiter at 1, then waiter again only when the GPU node frees at 100.
    assert sim.attempts == 4
    assert log.of("placed")[-1] == (100, "waiter", "gpu")


@pytest.mark.parametrize(
    "pod",
    [
        make_pod("other").cpu("1").scheduler("default-scheduler").view(),
        make_pod("gated").cpu("1").set("spec.schedulingGates", [{"name": "hold"}]).view(),
    ],
    ids=["a pod for another scheduler is left alone", "a pod with a scheduling gate is held"],
)
def test_pods_the_profile_must_not_schedule_are_ignored(pod: PodView) -> None:
    sim, log = run(one_gpu_node(), [sim_pod(pod, 0, None)])
    assert log.of("placed") == [] and sim.attempts == 0
    assert [p.pod.name for p in sim.ignored] == [pod.name]
