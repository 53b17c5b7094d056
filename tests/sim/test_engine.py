"""The virtual clock: event order, departures freeing capacity, the queue, through ProfileRunner."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from batchsched.config import default_config
from batchsched.framework.profile import Profile
from batchsched.model.node import NodeView
from batchsched.model.pod import PodView
from batchsched.plugins.gpu_topology import GpuTopology
from batchsched.plugins.gpu_topology_args import GpuTopologyArgs
from batchsched.sim.engine import Simulator, unfit_key
from batchsched.sim.workload import SimPod, sim_pod
from batchsched.snapshot import NodeInfo, Snapshot
from gpu.ledger import Grants
from gpu.workload_estimate import EstimateSettings, WorkloadEstimate
from tests.builders import PodBuilder, make_node, make_pod


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


def paper_profile() -> Profile:
    return dataclasses.replace(profile(), percentage_of_nodes_to_score=100)


def test_a_copy_of_a_pod_that_found_no_node_is_settled_without_a_cycle() -> None:
    pods = [sim_pod(make_pod(f"big-{i}").cpu("1").gpus(2).view(), i, None) for i in range(3)]
    sim = Simulator(Snapshot(one_gpu_node()), paper_profile(), Log(), record_reasons=False)
    sim.run(pods)
    assert (sim.attempts, sim.known_unfit, sim.waiting) == (1, 2, 3)


def test_a_departure_lets_a_known_unfit_shape_try_again() -> None:
    pods = [
        gpu_pod("holder", 0, runtime=10),
        gpu_pod("a-first", 1, runtime=None),
        gpu_pod("b-copy", 2, runtime=None),  # known unfit: settled without a cycle
    ]
    log = Log()
    sim = Simulator(Snapshot(one_gpu_node()), paper_profile(), log, record_reasons=False)
    sim.run(pods)
    # The departure at 10 requeues both: a-first takes the GPU; b-copy, its shape forgotten,
    # gets a full cycle again and fails.
    assert log.of("placed") == [(0, "holder", "n1"), (10, "a-first", "n1")]
    assert sim.known_unfit == 1 and sim.attempts == 4


def test_failure_reasons_asked_for_turn_the_shortcut_off() -> None:
    pods = [sim_pod(make_pod(f"big-{i}").cpu("1").gpus(2).view(), i, None) for i in range(3)]
    sim = Simulator(Snapshot(one_gpu_node()), paper_profile(), Log(), record_reasons=True)
    sim.run(pods)
    assert (sim.attempts, sim.known_unfit) == (3, 0)
    assert len(sim.last_failure) == 3


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        (make_pod("a").cpu("1").gpus(1), make_pod("b").cpu("1").gpus(1), True),
        (make_pod("a").cpu("1").gpus(1), make_pod("b").cpu("2").gpus(1), False),
        (
            make_pod("a").annotation("batchsched.io/gpu-milli", "300"),
            make_pod("b").annotation("batchsched.io/gpu-milli", "400"),
            False,
        ),
        (make_pod("a").cpu("1"), make_pod("b").cpu("1").label("app", "x"), False),
        (
            make_pod("a").cpu("1"),
            make_pod("b").cpu("1").toleration("gpu", operator="Exists"),
            False,
        ),
    ],
    ids=[
        "pods that differ only by name are one shape",
        "a different cpu request is another shape",
        "a different GPU share is another shape",
        "labels are part of the shape (other pods' anti-affinity reads them)",
        "tolerations are part of the shape",
    ],
)
def test_unfit_key_tells_shapes_apart(a: PodBuilder, b: PodBuilder, same: bool) -> None:
    assert (unfit_key(a.view()) == unfit_key(b.view())) is same


_SPREAD = {
    "maxSkew": 1,
    "topologyKey": "kubernetes.io/hostname",
    "whenUnsatisfiable": "DoNotSchedule",
    "labelSelector": {"matchLabels": {"app": "x"}},
}
_AFFINITY = {
    "podAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "zone"}
        ]
    }
}


@pytest.mark.parametrize(
    "pod",
    [
        make_pod("s").set("spec.topologySpreadConstraints", [_SPREAD]),
        make_pod("a").set("spec.affinity", _AFFINITY),
        make_pod("g").label("scheduling.x-k8s.io/pod-group", "train"),
        make_pod("g").label("pod-group.scheduling.sigs.k8s.io", "train"),
    ],
    ids=[
        "a spread constraint can be met once other pods are placed",
        "required pod affinity can be met once its peer is placed",
        "a gang member may wait for its quorum",
        "so may one with the older PodGroup label",
    ],
)
def test_pods_whose_fit_can_grow_as_pods_are_placed_have_no_unfit_key(pod: PodBuilder) -> None:
    assert unfit_key(pod.view()) is None


# (whole GPUs, share milli, cpu cores, allowed model or "") per pod; the nodes are fixed.
_POD = st.tuples(
    st.integers(0, 3),
    st.sampled_from([0, 0, 250, 500, 700]),
    st.integers(0, 40),
    st.sampled_from(["", "", "G2", "T4"]),
)


def _paper_pod(i: int, shape: tuple[int, int, int, str], runtime: float | None = None) -> SimPod:
    gpus, milli, cpu, model = shape
    pod = make_pod(f"p{i}").cpu(str(cpu)).memory("1Gi")
    if gpus:
        pod.gpus(gpus)
    elif milli:
        pod.annotation("batchsched.io/gpu-milli", str(milli))
    if model and (gpus or milli):
        pod.annotation("batchsched.io/gpu-models", model)
    return sim_pod(pod.view(), float(i), runtime)


def _placements(
    record_reasons: bool,
    pods: list[SimPod],
    batching: bool = True,
    nodes: list[NodeView] | None = None,
) -> list[tuple[str, str, object]]:
    nodes = nodes or [
        make_node(f"n{i}")
        .cpu(cpu)
        .memory("256Gi")
        .gpus(count)
        .label("nvidia.com/gpu.product", product)
        .view()
        for i, (product, count, cpu) in enumerate(
            [("G2", 8, "96"), ("T4", 2, "104"), ("G2", 8, "48"), ("T4", 4, "32"), ("G2", 2, "16")]
        )
    ]
    log, snap = Log(), Snapshot(nodes)
    sim = Simulator(
        snap, paper_profile(), log, seed=7, record_reasons=record_reasons, batching=batching
    )
    sim.run(pods)
    return [(pod, node, snap.gpu_grants(f"uid-default-{pod}")) for _, pod, node in log.of("placed")]


@settings(max_examples=40, deadline=None)
@given(st.lists(_POD, min_size=1, max_size=60))
def test_the_shortcuts_of_a_decisions_only_run_change_no_placement(
    shapes: list[tuple[int, int, int, str]],
) -> None:
    # Known-unfit shapes and GpuTopology's narrowed candidates (record_reasons=False) against
    # full cycles for every pod (record_reasons=True): the same nodes and the same GPUs.
    pods = [_paper_pod(i, shape) for i, shape in enumerate(shapes)]
    assert _placements(False, pods) == _placements(True, pods)


# Pods as (whole GPUs, milli-GPU share, cores, GPU model) and how long each runs (None: for
# ever): a few shapes repeating, with departures.
_ARRIVALS = st.lists(
    st.tuples(
        st.sampled_from([(1, 0, 2, ""), (0, 500, 1, ""), (2, 0, 4, ""), (0, 0, 6, "")]),
        st.sampled_from([None, 2.0, 4.0, 7.0]),
    ),
    min_size=1,
    max_size=40,
)


@settings(max_examples=80, deadline=None)
@given(_ARRIVALS, st.booleans())
def test_lone_pod_batching_changes_no_placement(
    spec: list[tuple[tuple[int, int, int, str], float | None]], record_reasons: bool
) -> None:
    # A few shapes repeating, pods leaving while others arrive: the kept batches must see the
    # nodes that gained room (a node SimCandidates left out when the batch was built among
    # them) and those that lost it, so every pod lands where a full cycle puts it.
    # A small cluster, so that nodes fill up and free again.
    nodes = [make_node(f"n{i}").cpu("8").memory("64Gi").gpus(2 + i % 2).view() for i in range(4)]
    pods = [_paper_pod(i, shape, runtime) for i, (shape, runtime) in enumerate(spec)]
    batched = _placements(record_reasons, pods, nodes=nodes)
    assert batched == _placements(record_reasons, pods, batching=False, nodes=nodes)


def test_a_trace_of_repeating_shapes_is_decided_from_kept_batches() -> None:
    # The test above would pass with batching never used: this one sees it used.
    log, snap = Log(), Snapshot([make_node(f"n{i}").cpu("32").gpus(8).view() for i in range(4)])
    sim = Simulator(snap, paper_profile(), log, seed=7, record_reasons=False)
    sim.run([_paper_pod(i, (1, 0, 1, ""), 20.0) for i in range(12)])
    assert sim.lone_batches is not None and sim.lone_batches.batched >= 9


def _learning_profile() -> Profile:
    # GpuTopology's fragmentation target re-estimated every other pod and adopted on any
    # change, from a prior worth one pod: it moves many times in a short run.
    built = paper_profile()
    (topology,) = [s.plugin for s in built.score if s.plugin.name == "GpuTopology"]
    assert isinstance(topology, GpuTopology)
    settings = EstimateSettings(prior_pods=1, refresh_pods=2, tolerance=0.0)
    topology.estimate = WorkloadEstimate(GpuTopologyArgs().workload(), settings)
    return built


def _learning_run(
    pods: list[SimPod], batching: bool
) -> tuple[list[tuple[str, str, Grants]], Simulator]:
    nodes = [make_node(f"n{i}").cpu("8").memory("64Gi").gpus(2 + i % 2).view() for i in range(4)]
    log, snap = Log(), Snapshot(nodes)
    sim = Simulator(snap, _learning_profile(), log, seed=7, record_reasons=False, batching=batching)
    sim.run(pods)
    placed = [
        (pod, node, snap.gpu_grants(f"uid-default-{pod}")) for _, pod, node in log.of("placed")
    ]
    return placed, sim


@settings(max_examples=60, deadline=None)
@given(_ARRIVALS)
def test_a_kept_batch_rescored_after_the_learned_target_moved_places_as_full_cycles(
    spec: list[tuple[tuple[int, int, int, str], float | None]],
) -> None:
    # A target move keeps each batch's verdicts and other scores and re-scores GpuTopology
    # alone (LoneBatches.rescored); every pod must still land where a full cycle puts it.
    pods = [_paper_pod(i, shape, runtime) for i, (shape, runtime) in enumerate(spec)]
    assert _learning_run(pods, batching=True)[0] == _learning_run(pods, batching=False)[0]


def test_a_learned_target_move_rescores_kept_batches_instead_of_rebuilding_them() -> None:
    # The test above would pass with every batch rebuilt: this one sees them re-scored.
    pods = [_paper_pod(i, (1 + i % 2, 0, 1 + i % 3, ""), 3.0) for i in range(30)]
    _, sim = _learning_run(pods, batching=True)
    assert sim.lone_batches is not None
    assert sim.lone_batches.rescored >= 5
