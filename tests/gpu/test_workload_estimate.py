"""WorkloadEstimate: decayed counts of the arriving pod shapes and the target adopted from them."""

from __future__ import annotations

import pytest

from gpu.workload import MIB, PodShape, Workload, typical_workload
from gpu.workload_estimate import (
    EstimateSettings,
    Host,
    WorkloadEstimate,
    host_ranks,
    per_supply,
    supply_factor,
    variation_distance,
)

GIB = 1024 * MIB
ANY_GPU = PodShape(8000, 16384 * MIB, 1)
T4_ONLY = PodShape(8000, 16384 * MIB, 1, models=frozenset({"T4"}))
CPU_ONLY = PodShape(4000, 8192 * MIB)
PRIOR = typical_workload([(ANY_GPU, 3.0), (CPU_ONLY, 1.0)], coverage=1.0)


def weights(workload: Workload) -> dict[PodShape, float]:
    return {shape: round(p, 6) for shape, p in workload.shapes}


def settings(**changes: float) -> EstimateSettings:
    base = {"half_life": 1e9, "prior_pods": 0.0, "refresh_pods": 1, "tolerance": 0.0}
    base.update(changes)
    return EstimateSettings(
        half_life=base["half_life"],
        prior_pods=base["prior_pods"],
        refresh_pods=int(base["refresh_pods"]),
        tolerance=base["tolerance"],
        coverage=1.0,
    )


def test_before_any_pod_the_target_is_the_prior() -> None:
    estimate = WorkloadEstimate(PRIOR, settings(prior_pods=100))
    assert estimate.current is PRIOR and estimate.version == 0
    assert weights(estimate.estimate()) == {ANY_GPU: 0.75, CPU_ONLY: 0.25}


def test_the_target_counts_the_model_restricted_pods_that_arrive() -> None:
    estimate = WorkloadEstimate(PRIOR, settings(prior_pods=4))
    for _ in range(4):
        estimate.observe(T4_ONLY)
    assert weights(estimate.current) == {T4_ONLY: 0.5, ANY_GPU: 0.375, CPU_ONLY: 0.125}
    assert estimate.version == 4


def test_the_target_is_reestimated_only_every_refresh_pods() -> None:
    estimate = WorkloadEstimate(PRIOR, settings(prior_pods=4, refresh_pods=3))
    assert [estimate.observe(T4_ONLY) for _ in range(6)] == [False, False, True] * 2
    assert estimate.version == 2


def test_a_target_that_moved_less_than_the_tolerance_is_kept() -> None:
    # 1 T4 pod among 100 prior pods moves the target by 1/101 < 0.02.
    estimate = WorkloadEstimate(PRIOR, settings(prior_pods=100, tolerance=0.02))
    assert not estimate.observe(T4_ONLY)
    assert estimate.current is PRIOR
    for _ in range(2):
        estimate.observe(T4_ONLY)  # 3/103 > 0.02
    assert estimate.version == 1 and T4_ONLY in weights(estimate.current)


def test_a_pods_weight_halves_after_half_life_more_pods() -> None:
    # 100 of A then 100 of B: each B pod weighs twice the A pod 100 before it.
    estimate = WorkloadEstimate(PRIOR, settings(half_life=100))
    for shape in (ANY_GPU, T4_ONLY):
        for _ in range(100):
            estimate.observe(shape)
    found = weights(estimate.estimate())
    assert found[T4_ONLY] == pytest.approx(2 / 3, abs=1e-6)
    assert found[ANY_GPU] == pytest.approx(1 / 3, abs=1e-6)


def test_the_prior_fades_as_pods_arrive() -> None:
    estimate = WorkloadEstimate(PRIOR, settings(half_life=10, prior_pods=1000))
    for _ in range(200):
        estimate.observe(T4_ONLY)
    assert weights(estimate.current)[T4_ONLY] > 0.99


def test_counts_stay_finite_when_the_scale_is_rescaled() -> None:
    # A half-life of 1/100 pod multiplies the scale by 2**100 per pod: rescaled within 4 pods.
    estimate = WorkloadEstimate(PRIOR, settings(half_life=0.01, prior_pods=1))
    for shape in (ANY_GPU, CPU_ONLY, ANY_GPU, CPU_ONLY, ANY_GPU, T4_ONLY):
        estimate.observe(shape)
    assert weights(estimate.current) == {T4_ONLY: 1.0}


def test_the_same_pods_in_the_same_order_give_the_same_target() -> None:
    pods = [ANY_GPU, T4_ONLY, CPU_ONLY, T4_ONLY, ANY_GPU] * 40
    targets = []
    for _ in range(2):
        estimate = WorkloadEstimate(PRIOR, settings(prior_pods=10, refresh_pods=7, half_life=50))
        for shape in pods:
            estimate.observe(shape)
        targets.append(estimate.current)
    assert targets[0] == targets[1]


def test_variation_distance_between_workloads() -> None:
    only_t4 = Workload(((T4_ONLY, 1.0),))
    assert variation_distance(PRIOR, PRIOR) == 0.0
    assert variation_distance(PRIOR, only_t4) == pytest.approx(1.0)
    half = typical_workload([(T4_ONLY, 1.0), (ANY_GPU, 1.0)], coverage=1.0)
    assert variation_distance(half, only_t4) == pytest.approx(0.5)


T4_NODE = Host("T4", 96_000, 384 * 1024 * MIB, 2)
A100_NODE = Host("A100", 96_000, 384 * 1024 * MIB, 2)


def test_a_shape_confined_to_a_quarter_of_the_gpus_weighs_four_times_as_much_there() -> None:
    half = typical_workload([(T4_ONLY, 1.0), (ANY_GPU, 1.0)], coverage=1.0)
    found = weights(per_supply(half, {T4_NODE: 1, A100_NODE: 3}))
    assert found == {T4_ONLY: 0.8, ANY_GPU: 0.2}


def test_shapes_without_supply_and_clusters_without_gpus_keep_their_weights() -> None:
    half = typical_workload([(T4_ONLY, 1.0), (ANY_GPU, 1.0)], coverage=1.0)
    assert weights(per_supply(half, {A100_NODE: 4})) == weights(half)
    assert per_supply(half, {}) is half


# A cluster like openb's: one node with 128 cores and 8 GPUs, three with 96 cores and 8 GPUs,
# four with 2 GPUs (32 + 8 of the 40 GPUs).
BIG = Host("G3", 128_000, 1024 * 1024 * MIB, 8)
MID = Host("G2", 96_000, 384 * 1024 * MIB, 8)
PAIR = Host("T4", 104_000, 512 * 1024 * MIB, 2)
CLUSTER = {BIG: 1, MID: 3, PAIR: 4}
SMALL = PodShape(8_000, 32 * 1024 * MIB, 1)
HUGE_CPU = PodShape(120_000, 256 * 1024 * MIB, 8)
HUGE_MEMORY = PodShape(64_000, 800 * 1024 * MIB, 1)
EIGHT_GPUS = PodShape(64_000, 256 * 1024 * MIB, 8)
HUGE_CPU_ON_G2 = PodShape(120_000, 256 * 1024 * MIB, 8, models=frozenset({"G2"}))
SMALL_ON_G3 = PodShape(8_000, 32 * 1024 * MIB, 1, models=frozenset({"G3"}))
HUGE_CPU_ONLY = PodShape(200_000, 8 * 1024 * MIB)


@pytest.mark.parametrize(
    ("shape", "capacity", "factor"),
    [
        pytest.param(HUGE_CPU, True, 5.0, id="120 cores: only the 128-core node's 8 of 40 GPUs"),
        pytest.param(HUGE_CPU, False, 1.0, id="120 cores, capacity off: any model, weight kept"),
        pytest.param(HUGE_MEMORY, True, 5.0, id="800 GiB: only the 1 TiB node's GPUs"),
        pytest.param(EIGHT_GPUS, True, 40 / 32, id="8 GPUs: not the 2-GPU nodes"),
        pytest.param(SMALL, True, 1.0, id="a small pod fits every node"),
        pytest.param(SMALL_ON_G3, True, 5.0, id="model alone restricts it, as without capacity"),
        pytest.param(SMALL_ON_G3, False, 5.0, id="the model restriction without capacity"),
        pytest.param(HUGE_CPU_ON_G2, True, 1.0, id="no node of its model is big enough: kept"),
        pytest.param(HUGE_CPU_ON_G2, False, 40 / 24, id="capacity off: its model's 24 GPUs"),
        pytest.param(HUGE_CPU_ONLY, True, 1.0, id="a pod without GPUs keeps its weight"),
    ],
)
def test_a_shape_weighs_the_cluster_gpus_over_those_of_nodes_that_could_host_it(
    shape: PodShape, capacity: bool, factor: float
) -> None:
    # Beside an equally popular small pod that fits everywhere, the shape's weight becomes
    # factor : 1, renormalized.
    found = weights(
        per_supply(typical_workload([(shape, 1.0), (SMALL, 1.0)], 1.0), CLUSTER, capacity)
    )
    share = factor / (factor + 1) if shape != SMALL else 1.0
    assert found[shape] == round(share, 6)
    assert supply_factor(shape, CLUSTER, capacity) == pytest.approx(factor)
    assert sum(found.values()) == pytest.approx(1.0)


def test_factors_are_remembered_per_shape_for_the_caller() -> None:
    factors: dict[PodShape, float] = {}
    workload = typical_workload([(HUGE_CPU, 1.0), (SMALL, 1.0)], 1.0)
    first = per_supply(workload, CLUSTER, True, factors)
    assert factors == {HUGE_CPU: 5.0, SMALL: 1.0}
    factors[HUGE_CPU] = 1.0  # what the caller keeps is what is used
    assert weights(per_supply(workload, CLUSTER, True, factors)) == weights(workload)
    assert weights(first) == {HUGE_CPU: round(5 / 6, 6), SMALL: round(1 / 6, 6)}


def test_host_capacity_is_checked_against_allocatable_cpu_memory_and_gpu_count() -> None:
    at_edge = PodShape(BIG.milli_cpu, BIG.memory, BIG.gpus)
    assert BIG.could_host(at_edge, capacity=True)
    assert not MID.could_host(at_edge, capacity=True)
    assert MID.could_host(at_edge, capacity=False)
    assert not PAIR.could_host(PodShape(1_000, MIB, 3), capacity=True)
    assert PAIR.could_host(PodShape(1_000, MIB, 0, 500), capacity=True)  # a share needs one GPU


@pytest.mark.parametrize(
    "changes",
    [{"half_life": 0.0}, {"prior_pods": -1.0}, {"refresh_pods": 0}, {"tolerance": 1.0}],
)
def test_settings_out_of_range_are_refused(changes: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        settings(**changes)


def test_host_ranks_are_the_share_of_gpus_on_hosts_at_least_as_big() -> None:
    small, big = Host("G2", 96_000, 384 * GIB, 8), Host("G3", 128_000, 768 * GIB, 8)
    few = Host("T4", 104_000, 512 * GIB, 2)
    ranks = host_ranks({small: 3, big: 1, few: 2})  # 24 + 8 + 4 = 36 GPUs
    assert ranks == {small: 999 * 32 // 36, big: 999 * 8 // 36, few: 999 * 12 // 36}
    assert host_ranks({}) == {}
