"""The paper's workload: the shuffled trace, topped up by sampling, cut at the target."""

from __future__ import annotations

import pytest

from batchsched.sim.sampler import paper_stream, sample_to_target
from batchsched.sim.trace import TracePod, embedded_default_pods, read_pods

TRACE = [
    TracePod("a", 1000, 1024, 1, 1000),
    TracePod("b", 1000, 1024, 1, 500),
    TracePod("c", 1000, 1024, 2, 1000),
    TracePod("d", 1000, 1024, 0, 0),
]
CAPACITY = 8 * 1000  # eight GPUs


def requested(pods: list[TracePod]) -> int:
    return sum(p.gpu_request_milli for p in pods)


@pytest.mark.parametrize(
    "inflation",
    [0.1, 0.5, 1.0, 1.3, 2.5],
    ids=[
        "a tenth of the capacity is a prefix of the shuffled trace",
        "half the capacity is still within the trace",
        "exactly the capacity needs copies",
        "the paper's 130 % needs copies",
        "250 % needs many copies",
    ],
)
def test_the_sample_is_the_shortest_stream_prefix_reaching_the_target(inflation: float) -> None:
    sampled = sample_to_target(TRACE, CAPACITY, inflation, seed=42)
    pods = [s.pod for s in sampled]
    assert requested(pods) >= inflation * CAPACITY
    assert requested(pods[:-1]) < inflation * CAPACITY


def test_the_same_seed_gives_the_same_workload_and_another_seed_another() -> None:
    first = sample_to_target(TRACE, CAPACITY, 1.3, seed=42)
    assert sample_to_target(TRACE, CAPACITY, 1.3, seed=42) == first
    others = [sample_to_target(TRACE, CAPACITY, 1.3, seed=s) for s in range(43, 48)]
    assert any(o != first for o in others)


def test_the_stream_is_the_whole_trace_once_then_named_copies() -> None:
    stream = paper_stream(TRACE, seed=7)
    head = [next(stream) for _ in range(len(TRACE))]
    assert sorted(s.name for s in head) == ["a", "b", "c", "d"]
    copies = [next(stream) for _ in range(3)]
    assert [s.name for s in copies] == [f"{s.pod.name}-tuned-{i}" for i, s in enumerate(copies)]


@pytest.mark.parametrize(
    ("trace", "capacity", "inflation", "message"),
    [
        ([TracePod("cpu", 1, 1, 0, 0)], CAPACITY, 1.3, "no pod in the workload asks for a GPU"),
        (TRACE, 0, 1.3, "the cluster has no GPUs"),
        (TRACE, CAPACITY, 0.0, "inflation must be positive"),
    ],
    ids=[
        "a workload without GPU pods can never reach a GPU target",
        "a cluster without GPUs has no capacity to fill",
        "a zero inflation is refused",
    ],
)
def test_impossible_targets_are_refused(
    trace: list[TracePod], capacity: int, inflation: float, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        sample_to_target(trace, capacity, inflation, seed=1)


def test_the_embedded_trace_reaches_130_percent_of_the_papers_6212_gpus() -> None:
    trace = read_pods(embedded_default_pods())
    sampled = sample_to_target(trace, 6212 * 1000, 1.3, seed=42)
    pods = [s.pod for s in sampled]
    assert requested(pods) >= 1.3 * 6212 * 1000 > requested(pods[:-1])
    assert {s.name for s in sampled[: len(trace)]} == {p.name for p in trace}
