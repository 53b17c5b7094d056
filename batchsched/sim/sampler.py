"""The workload of the paper's method: the trace shuffled, topped up by sampling, cut at a target.

Weng et al. (ATC '23) replay the trace through their simulator's "workload tuning" (`-tune 1.3`):
with the random generator seeded, the trace pods (sorted by name) are shuffled; when their GPU
requests fall short of `ratio` x the cluster's GPU capacity, pods drawn uniformly with replacement
from the trace are appended (named `<pod>-tuned-<i>`); when they exceed it, pods are dropped.
We do the same with Python's generator, so a seed gives the same stream on every machine but not
the artifact's Go stream. One deliberate difference: the artifact stops before the pod that would
overshoot the target, so its arrived load ends a little under 130 %; we keep that last pod, so
the stream is the shortest one whose GPU requests reach the target and the 130 % point exists.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from batchsched.sim.trace import TracePod


@dataclass(frozen=True, slots=True)
class SampledPod:
    pod: TracePod
    name: str  # the row's name, or `<name>-tuned-<i>` for a copy drawn by the top-up


def paper_stream(trace: Sequence[TracePod], seed: int) -> Iterator[SampledPod]:
    """The trace shuffled, then copies drawn with replacement, forever."""
    rng = random.Random(seed)
    ordered = sorted(trace, key=lambda p: p.name)
    shuffled = list(ordered)
    rng.shuffle(shuffled)
    for pod in shuffled:
        yield SampledPod(pod, pod.name)
    copy = 0
    while True:
        pod = ordered[rng.randrange(len(ordered))]
        yield SampledPod(pod, f"{pod.name}-tuned-{copy}")
        copy += 1


def sample_to_target(
    trace: Sequence[TracePod], capacity_milli: int, inflation: float, seed: int
) -> list[SampledPod]:
    """The shortest prefix of the stream whose GPU requests reach inflation x capacity."""
    if inflation <= 0:
        raise ValueError(f"inflation must be positive, got {inflation}")
    if capacity_milli <= 0:
        raise ValueError("the cluster has no GPUs, so there is no GPU capacity to fill")
    if not any(p.gpu_request_milli for p in trace):
        raise ValueError("no pod in the workload asks for a GPU, so no target can be reached")
    target = inflation * capacity_milli
    chosen: list[SampledPod] = []
    arrived = 0
    for sampled in paper_stream(trace, seed):
        if arrived >= target:
            break
        chosen.append(sampled)
        arrived += sampled.pod.gpu_request_milli
    return chosen
