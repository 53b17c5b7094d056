"""Hypothesis: GPU pods and shares placed and removed through the default profile and trials
never over-allocate a GPU, and a discarded trial restores every GPU exactly."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from batchsched.framework.registry import assemble_profile
from batchsched.framework.runner import ProfileRunner
from batchsched.model.pod import PodView
from batchsched.plugins.registry import DEFAULT_PLUGINS, default_registry
from batchsched.snapshot import Snapshot
from tests.builders import make_node, make_pod

PROFILE = assemble_profile(
    default_registry(), "gpu-scheduler", DEFAULT_PLUGINS, {}, percentage_of_nodes_to_score=100
)
PRODUCTS = ("G2", "NVIDIA-H100-80GB-HBM3", "NVIDIA-L40S", "Tesla-T4")

State = dict[str, tuple[tuple[int, ...], dict[str, tuple[tuple[int, int], ...]], int]]


def cluster(shapes: list[tuple[str, int]]) -> Snapshot:
    nodes = []
    for i, (product, count) in enumerate(shapes):
        nodes.append(
            make_node(f"n{i}")
            .cpu("64")
            .memory("256Gi")
            .gpus(count)
            .label("nvidia.com/gpu.product", product)
            .view()
        )
    return Snapshot(nodes)


def gpu_pod(i: int, kind: int) -> PodView:
    pod = make_pod(f"p{i}").cpu("1").memory("1Gi")
    if kind >= 1000:
        pod.gpus(kind // 1000)
    elif kind:
        pod.annotation("batchsched.io/gpu-milli", str(kind))
    return pod.view()


def state_of(snap: Snapshot) -> State:
    return {
        info.name: (tuple(info.gpu.free), dict(info.gpu.grants), info.req_milli_cpu)
        for info in snap.nodes
        if info.gpu is not None
    }


def check_no_overallocation(snap: Snapshot) -> None:
    for info in snap.nodes:
        ledger = info.gpu
        if ledger is None:
            continue
        held = [0] * len(ledger.free)
        for uid, grants in ledger.grants.items():
            assert uid in info.pods
            for index, milli in grants:
                held[index] += milli
        for index, used in enumerate(held):
            assert used <= ledger.capacity[index], f"GPU {index} of {info.name} over-allocated"
            assert ledger.free[index] == ledger.capacity[index] - used


KINDS = st.sampled_from((0, 100, 250, 470, 500, 810, 999, 1000, 2000, 4000, 8000))
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("place"), KINDS),
        st.tuples(st.just("remove"), st.integers(0, 10**6)),
        st.tuples(st.just("trial"), st.booleans()),
    ),
    min_size=1,
    max_size=40,
)
NODES = st.lists(
    st.tuples(st.sampled_from(PRODUCTS), st.sampled_from((1, 2, 4, 8))), min_size=1, max_size=4
)


@settings(max_examples=60, deadline=None)
@given(NODES, OPS)
def test_gpus_are_never_over_allocated_and_discards_restore_them(
    shapes: list[tuple[str, int]], ops: list[tuple[str, object]]
) -> None:
    snap = cluster(shapes)
    runner = ProfileRunner(PROFILE, seed=0)
    placed: list[PodView] = []
    for i, (op, arg) in enumerate(ops):
        if op == "place":
            result = runner.schedule_one(gpu_pod(i, int(arg)), snap)  # type: ignore[call-overload]
            if result.placed:
                placed.append(result.pod)
        elif op == "remove" and placed:
            snap.forget(placed.pop(int(arg) % len(placed)))  # type: ignore[call-overload]
        elif op == "trial":
            before = state_of(snap)
            trial = snap.begin_trial()
            inside = [
                runner.schedule_one(gpu_pod(10_000 + i * 10 + j, kind), snap)
                for j, kind in enumerate((500, 1000, 2000))
            ]
            removed = placed[:1]
            for pod in removed:
                snap.forget(pod)
            check_no_overallocation(snap)
            if arg:
                trial.commit()
                placed = placed[len(removed) :] + [r.pod for r in inside if r.placed]
            else:
                trial.discard()
                assert state_of(snap) == before
        check_no_overallocation(snap)
