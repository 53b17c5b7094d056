"""Trace variants: published mixes reproduced, targets hit, seeds honoured, clusters reshaped."""

from __future__ import annotations

import random
from functools import cache

import pytest

from batchsched.model.node import NodeView
from batchsched.model.resources import NVIDIA_GPU
from batchsched.sim.trace import TracePod, embedded_default_pods, read_pods, trace_node
from batchsched.sim.variants import (
    SPEC_WEIGHTS,
    ClusterShape,
    Mix,
    VariantError,
    fits_some_node,
    measure_mix,
    parse_variant,
    resample,
    reshape_cluster,
)


@cache
def default_trace() -> tuple[TracePod, ...]:
    return tuple(read_pods(embedded_default_pods()))


# The published files' pod counts and shares (cpu-only, gpu-share, multi-gpu, gpu-spec), measured
# with measure_mix(read_pods(".../openb_pod_list_<name>.csv")) on the files in
# /work/shared/traces/alibaba-gpu-2023/csv (alibaba/clusterdata cluster-trace-gpu-v2023).
PUBLISHED = [
    ("cpu037", 7336, 0.0371, 0.2845, 0.0729, 0.0000),
    ("cpu200", 8832, 0.2002, 0.2845, 0.0729, 0.0000),
    ("gpushare40", 8152, 0.1335, 0.4007, 0.0674, 0.0000),
    ("gpushare80", 8152, 0.1335, 0.8004, 0.0254, 0.0000),
    ("gpuspec10", 8152, 0.1335, 0.2845, 0.0729, 0.1036),
    ("gpuspec33", 8152, 0.1335, 0.2845, 0.0729, 0.3381),
    ("multigpu20", 8324, 0.1307, 0.2444, 0.2038, 0.0000),
    ("multigpu50", 9061, 0.1201, 0.1525, 0.5032, 0.0000),
]


@pytest.mark.parametrize(
    ("name", "pods", "cpu_only", "gpu_share", "multi_gpu", "gpu_spec"),
    PUBLISHED,
    ids=[f"{row[0]} made from the default trace has the published file's mix" for row in PUBLISHED],
)
def test_a_published_variant_regenerated_from_default_has_the_published_mix(
    name: str, pods: int, cpu_only: float, gpu_share: float, multi_gpu: float, gpu_spec: float
) -> None:
    for seed in (42, 43, 44):
        made = resample(default_trace(), parse_variant(name).mix, seed)
        mix = measure_mix(made)
        assert len(made) == pytest.approx(pods, rel=0.01)
        assert mix.cpu_only == pytest.approx(cpu_only, abs=0.005)
        assert mix.gpu_share == pytest.approx(gpu_share, abs=0.015)
        assert mix.multi_gpu == pytest.approx(multi_gpu, abs=0.015)
        assert mix.gpu_spec == pytest.approx(gpu_spec, abs=0.01)


@pytest.mark.parametrize(
    "name",
    [
        "cpu150",
        "cpu400+gpushare50",
        "gpushare70+multigpu20",
        "gpuspec50+multigpu35",
        "cpu250+gpushare50+gpuspec25+multigpu25",
        "gpushare100+cpu0",
    ],
)
def test_every_target_the_name_sets_is_hit_and_the_rest_kept(name: str) -> None:
    target = parse_variant(name).mix
    base = measure_mix(default_trace())
    for seed in (47, 48):
        mix = measure_mix(resample(default_trace(), target, seed))
        for field in ("cpu_only", "gpu_share", "multi_gpu", "gpu_spec"):
            wanted = getattr(target, field)
            if wanted is not None:
                assert getattr(mix, field) == pytest.approx(wanted, abs=0.01), field
        if target.cpu_only is None and target.gpu_share is None and target.multi_gpu is None:
            assert mix.cpu_only == base.cpu_only


def test_a_seed_gives_the_same_variant_every_time_and_another_seed_another() -> None:
    mix = parse_variant("cpu200+gpushare60+gpuspec20").mix
    first = resample(default_trace(), mix, 47)
    assert resample(default_trace(), mix, 47) == first
    assert resample(default_trace(), mix, 48) != first


def test_the_order_of_the_input_rows_does_not_change_the_variant() -> None:
    mix = parse_variant("gpushare60+multigpu30").mix
    shuffled = list(default_trace())
    random.Random(1).shuffle(shuffled)
    assert resample(shuffled, mix, 47) == resample(default_trace(), mix, 47)


def test_generated_pods_have_unique_names() -> None:
    made = resample(default_trace(), parse_variant("cpu300+multigpu40").mix, 47)
    assert len({p.name for p in made}) == len(made)


def test_model_constraints_are_the_production_ones_and_can_be_taken_off() -> None:
    with_specs = resample(default_trace(), Mix(gpu_spec=0.5), 47)
    assert {p.gpu_spec for p in with_specs if p.gpu_spec} <= {s for s, _ in SPEC_WEIGHTS}
    fewer = measure_mix(resample(with_specs, Mix(gpu_spec=0.1), 47))
    assert fewer.gpu_spec == pytest.approx(0.1, abs=0.001)


def test_a_class_the_trace_lacks_is_a_clear_error() -> None:
    no_multi = [p for p in default_trace() if p.num_gpu <= 1]
    with pytest.raises(VariantError, match="no multi-GPU pod"):
        resample(no_multi, Mix(multi_gpu=0.2), 47)


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("gpushare40+bogus7", "part 'bogus7' is not one of"),
        ("cpu1000", "cpu must be a share below 100 %"),
        ("gpushare70+multigpu40", "add up to over 100 %"),
        ("gpn0", "gpn must be at least 1"),
    ],
    ids=["an unknown part", "all pods CPU-only", "GPU shares over 100 %", "no GPU per node"],
)
def test_a_bad_variant_name_is_a_clear_error(name: str, message: str) -> None:
    with pytest.raises(VariantError, match=message):
        parse_variant(name)


def test_names_parse_to_their_mix_and_cluster() -> None:
    variant = parse_variant("cpu037+gpushare40+cpux1.5+gpn4")
    assert variant.mix == Mix(cpu_only=0.037, gpu_share=0.4)
    assert variant.cluster == ClusterShape(cpu_per_gpu=1.5, max_gpus_per_node=4)
    assert parse_variant("default").mix == Mix()


NODES = [
    trace_node("g8", 96_000, 786_432, 8, "G2"),
    trace_node("t2", 32_000, 131_072, 2, "T4"),
    trace_node("c0", 64_000, 262_144, 0, ""),
]


def gpus(nodes: list[NodeView]) -> list[int]:
    return [n.allocatable.scalar.get(NVIDIA_GPU, 0) for n in nodes]


def test_more_cpu_per_gpu_scales_gpu_nodes_only() -> None:
    shaped = reshape_cluster(NODES, ClusterShape(cpu_per_gpu=2.0))
    assert [n.allocatable.milli_cpu for n in shaped] == [192_000, 64_000, 64_000]
    assert gpus(shaped) == [8, 2, 0]


def test_fewer_gpus_per_node_splits_large_nodes_with_their_cpu_and_memory() -> None:
    shaped = reshape_cluster(NODES, ClusterShape(max_gpus_per_node=3))
    assert [n.name for n in shaped] == ["g8-0", "g8-1", "g8-2", "t2", "c0"]
    assert gpus(shaped) == [3, 3, 2, 2, 0]
    assert [n.allocatable.milli_cpu for n in shaped[:3]] == [36_000, 36_000, 24_000]
    assert sum(n.allocatable.memory for n in shaped[:3]) == NODES[0].allocatable.memory
    assert shaped[0].labels["kubernetes.io/hostname"] == "g8-0"
    assert shaped[0].labels["nvidia.com/gpu.product"] == "G2"


def test_pods_no_node_can_hold_are_left_out() -> None:
    shaped = reshape_cluster(NODES, ClusterShape(max_gpus_per_node=4))
    pods = [
        TracePod("eight", 8000, 1024, 8, 1000),
        TracePod("four", 8000, 1024, 4, 1000),
        TracePod("t4-only-four", 8000, 1024, 4, 1000, gpu_spec="T4"),
        TracePod("cpu", 8000, 1024, 0, 0),
    ]
    assert [p.name for p in fits_some_node(pods, shaped)] == ["four", "cpu"]
