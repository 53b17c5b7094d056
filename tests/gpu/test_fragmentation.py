"""The FGD fragmentation measure, the typical workload, and how pods ask for GPUs."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpu.fragmentation import FragmentationModel, FragReport, node_fragmentation, shape_fragment
from gpu.requests import GpuRequest, InvalidGpuRequest, gpu_request
from gpu.topology import LinkLevel
from gpu.workload import DEFAULT_WORKLOAD, MIB, PodShape, Workload, typical_workload
from tests.builders import make_pod

WHOLE = PodShape(4000, 0, gpu_count=1)
SHARE = PodShape(1000, 0, gpu_milli=500)
CPU_ONLY = PodShape(2000, 0)
ONLY_Y = PodShape(4000, 0, gpu_count=1, models=frozenset({"Y"}))
TWO = PodShape(4000, 0, gpu_count=2)


@pytest.mark.parametrize(
    ("shape", "cpu_left", "free", "fragment"),
    [
        (WHOLE, 8000, (1000, 300), 300),
        (SHARE, 8000, (1000, 300), 300),
        (SHARE, 8000, (1000, 600), 0),
        (WHOLE, 2000, (1000, 300), 1300),
        (CPU_ONLY, 8000, (1000, 300), 1300),
        (ONLY_Y, 8000, (1000, 300), 1300),
        (TWO, 8000, (1000, 300), 1300),
        (TWO, 8000, (1000, 1000, 300), 300),
        (WHOLE, 8000, (0, 0), 0),
    ],
    ids=[
        "a whole-GPU pod that fits cannot use the partly used GPU",
        "a share that fits cannot use a GPU with less room than it",
        "a share that fits both GPUs leaves nothing stranded",
        "a pod short of cpu sees every free GPU as fragment",
        "a pod without GPUs sees every free GPU as fragment",
        "a pod that cannot use this GPU model sees every free GPU as fragment",
        "a 2-GPU pod with one whole GPU free cannot run at all",
        "a 2-GPU pod with two whole GPUs free strands only the partial one",
        "a node without free GPUs has no fragment",
    ],
)
def test_shape_fragment(
    shape: PodShape, cpu_left: int, free: tuple[int, ...], fragment: int
) -> None:
    assert shape_fragment(shape, "X", cpu_left, 10**12, free) == fragment


def test_node_fragmentation_is_the_expectation_over_the_workload() -> None:
    workload = Workload(((WHOLE, 0.5), (SHARE, 0.25), (CPU_ONLY, 0.25)))
    # whole: 300, share: 300, cpu-only: all 1300
    assert node_fragmentation(workload, "X", 8000, 10**12, (1000, 300)) == pytest.approx(
        0.5 * 300 + 0.25 * 300 + 0.25 * 1300
    )


@given(
    st.lists(st.sampled_from((0, 50, 190, 300, 470, 530, 810, 1000)), min_size=0, max_size=8),
    st.integers(0, 130_000),
    st.integers(0, 600_000),
    st.sampled_from(("G2", "T4", "V100M16")),
)
def test_the_memoized_model_equals_the_definition(
    free: list[int], cpu: int, memory_mib: int, model: str
) -> None:
    ordered = tuple(sorted(free, reverse=True))
    memoized = FragmentationModel(DEFAULT_WORKLOAD)
    direct = node_fragmentation(DEFAULT_WORKLOAD, model, cpu, memory_mib * MIB, ordered)
    assert memoized.value(model, cpu, memory_mib * MIB, ordered) == pytest.approx(direct)


def test_stranded_gpus_are_those_the_cpu_cannot_feed() -> None:
    model = FragmentationModel(Workload(((WHOLE, 1.0),)))  # 4 cpu per GPU: 4 milli-cpu per milli
    assert model.cpu_per_milli == 4.0
    assert model.stranded(8000, 10**12, 4000) == 2000  # cpu for two of four GPUs
    assert model.stranded(16000, 10**12, 4000) == 0


def test_stranded_gpus_can_be_measured_at_another_workloads_ratio() -> None:
    # The fragment terms follow the 32-cpu pair; the stranded measure the 4-cpu pods.
    heavy = Workload(((PodShape(32_000, 0, gpu_count=2), 1.0),))
    model = FragmentationModel(heavy, stranded_at=Workload(((WHOLE, 1.0),)))
    assert (model.cpu_per_milli, FragmentationModel(heavy).cpu_per_milli) == (4.0, 16.0)
    assert model.stranded(8000, 10**12, 4000) == 2000
    assert model.value("X", 8000, 10**12, (1000, 1000)) == 2000  # no pair fits 8 cpu
    assert model.value("X", 32_000, 10**12, (1000, 1000)) == 0


def test_report_totals() -> None:
    report = FragReport(frag_milli=500.0, idle_milli=1000, total_milli=10000)
    assert (report.fragmented_gpus, report.pct_of_total, report.pct_of_idle) == (0.5, 5.0, 50.0)


def test_typical_workload_keeps_the_most_popular_shapes_up_to_the_coverage() -> None:
    shapes = [WHOLE] * 6 + [SHARE] * 3 + [CPU_ONLY]
    workload = typical_workload(shapes, coverage=0.9)
    assert [(s, round(p, 3)) for s, p in workload.shapes] == [(WHOLE, 0.667), (SHARE, 0.333)]


def test_the_default_workload_is_the_openb_trace() -> None:
    top, p = DEFAULT_WORKLOAD.shapes[0]
    assert (top.milli_cpu, top.gpu_milli, round(p, 3)) == (3152, 810, 0.135)
    assert sum(p for _, p in DEFAULT_WORKLOAD.shapes) == pytest.approx(1.0)


def test_a_shape_asks_for_whole_gpus_or_a_share() -> None:
    with pytest.raises(ValueError):
        PodShape(0, 0, gpu_count=1, gpu_milli=500)


@pytest.mark.parametrize(
    ("annotations", "gpus", "expected"),
    [
        ({}, 0, GpuRequest()),
        ({}, 2, GpuRequest(2)),
        ({"batchsched.io/gpu-milli": "460"}, 0, GpuRequest(0, 460)),
        (
            {"batchsched.io/gpu-milli": "460", "batchsched.io/gpu-models": "V100M16|V100M32"},
            0,
            GpuRequest(0, 460, frozenset({"V100M16", "V100M32"})),
        ),
        ({"batchsched.io/gpu-models": "G2"}, 0, GpuRequest()),
        (
            {"batchsched.io/gpu-connectivity": "NVLink"},
            4,
            GpuRequest(4, connectivity=LinkLevel.NVLINK),
        ),
        ({"batchsched.io/gpu-models": " | "}, 1, GpuRequest(1)),
    ],
    ids=[
        "no GPU request",
        "whole GPUs from nvidia.com/gpu",
        "a share from the annotation",
        "a share with allowed models",
        "allowed models without a GPU request ask for nothing",
        "a required connectivity",
        "an empty model list allows any model",
    ],
)
def test_gpu_request(annotations: dict[str, str], gpus: int, expected: GpuRequest) -> None:
    pod = make_pod("p")
    if gpus:
        pod.gpus(gpus)
    for key, value in annotations.items():
        pod.annotation(key, value)
    assert gpu_request(pod.view()) == expected


@pytest.mark.parametrize(
    ("annotations", "gpus", "message"),
    [
        ({"batchsched.io/gpu-milli": "1000"}, 0, "1..999 milli-GPU"),
        ({"batchsched.io/gpu-milli": "half"}, 0, "1..999 milli-GPU"),
        ({"batchsched.io/gpu-milli": "300"}, 1, "must not also request nvidia.com/gpu"),
        ({"batchsched.io/gpu-connectivity": "fast"}, 2, "NVLink, PCIeSwitch, Socket"),
    ],
    ids=[
        "a whole GPU is nvidia.com/gpu, not 1000 milli",
        "a share must be a number",
        "a share and whole GPUs together",
        "an unknown connectivity",
    ],
)
def test_bad_gpu_request(annotations: dict[str, str], gpus: int, message: str) -> None:
    pod = make_pod("p")
    if gpus:
        pod.gpus(gpus)
    for key, value in annotations.items():
        pod.annotation(key, value)
    with pytest.raises(InvalidGpuRequest, match=message):
        gpu_request(pod.view())
