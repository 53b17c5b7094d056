"""WorkloadEstimate: decayed counts of the arriving pod shapes and the target adopted from them."""

from __future__ import annotations

import pytest

from gpu.workload import MIB, PodShape, Workload, typical_workload
from gpu.workload_estimate import (
    EstimateSettings,
    WorkloadEstimate,
    per_supply,
    variation_distance,
)

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


def test_a_shape_confined_to_a_quarter_of_the_gpus_weighs_four_times_as_much_there() -> None:
    half = typical_workload([(T4_ONLY, 1.0), (ANY_GPU, 1.0)], coverage=1.0)
    found = weights(per_supply(half, {"T4": 2, "A100": 6}))
    assert found == {T4_ONLY: 0.8, ANY_GPU: 0.2}


def test_shapes_without_supply_and_clusters_without_gpus_keep_their_weights() -> None:
    half = typical_workload([(T4_ONLY, 1.0), (ANY_GPU, 1.0)], coverage=1.0)
    assert weights(per_supply(half, {"A100": 8})) == weights(half)
    assert per_supply(half, {}) is half


@pytest.mark.parametrize(
    "changes",
    [{"half_life": 0.0}, {"prior_pods": -1.0}, {"refresh_pods": 0}, {"tolerance": 1.0}],
)
def test_settings_out_of_range_are_refused(changes: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        settings(**changes)
