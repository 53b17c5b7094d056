"""A seeded gang workload with network-topology requests, for the batch simulator.

Gangs of 2 to 64 GPUs arrive as a Poisson process (mean `interval` seconds apart) and run
for a uniform time in `runtime`. A gang of `big_gpus` or more is made of 8-GPU pods (whole
nodes); a smaller one of 1-, 2- or 4-GPU pods, at least two of them. Each gang asks for a
domain: with probability `required_rack` one rack (required), with `required_clique` one
NVLink clique (required; only gangs of at most `clique_gpus` GPUs, others fall through to
the preferred request), else a preferred `preferred` level (from the tightest level up to it,
then anywhere: batchsched.gang.domains). The same seed draws the same gangs.
"""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass

from batchsched.gang.topology import CLIQUE_LABEL, RACK_LABEL, TopologyRequest
from batchsched.sim.batch_jobs import BatchJob
from batchsched.sim.batch_workloads import gang_job

__all__ = ["TopologyMix", "strip_topology", "topology_jobs"]

NODE_GPUS = 8


@dataclass(frozen=True, slots=True)
class TopologyMix:
    gangs: int = 300
    interval: float = 6.0  # mean seconds between arrivals
    runtime: tuple[float, float] = (600.0, 3600.0)
    # GPUs per gang, with their weights
    gang_gpus: tuple[int, ...] = (2, 4, 8, 16, 32, 64)
    weights: tuple[float, ...] = (0.2, 0.2, 0.2, 0.15, 0.15, 0.1)
    big_gpus: int = 16  # gangs this big or bigger are made of 8-GPU pods
    required_rack: float = 0.3
    required_clique: float = 0.2
    clique_gpus: int = 16  # GPUs of one clique: a gang may require one only up to this
    preferred: str = CLIQUE_LABEL
    tenant: str = "t"
    namespace: str = "train"

    def __post_init__(self) -> None:
        if len(self.gang_gpus) != len(self.weights) or not self.gang_gpus:
            raise ValueError("gang_gpus and weights: one weight per gang size")
        if min(self.gang_gpus) < 2:
            raise ValueError("a gang has 2 GPUs or more (at least two 1-GPU pods)")
        if not 0 <= self.required_rack + self.required_clique <= 1:
            raise ValueError("required_rack + required_clique must lie within 0..1")
        if self.gangs < 0 or self.interval <= 0 or not 0 <= self.runtime[0] <= self.runtime[1]:
            raise ValueError("gangs >= 0, interval > 0 and a runtime range low <= high please")


def topology_jobs(mix: TopologyMix, seed: int) -> list[BatchJob]:
    """The gangs in arrival order, keys `<namespace>/g-<n>` and job class `<gpus>gpu`."""
    rng = random.Random(seed)
    jobs = []
    clock = 0.0
    for n in range(mix.gangs):
        clock += rng.expovariate(1 / mix.interval)
        gpus = rng.choices(mix.gang_gpus, mix.weights)[0]
        per_pod = _pod_gpus(rng, gpus, mix.big_gpus)
        runtime = rng.uniform(*mix.runtime)
        request = _request(rng, gpus, mix)
        job = gang_job(
            f"{mix.namespace}/g-{n:04d}",
            mix.tenant,
            gpus // per_pod,
            per_pod,
            clock,
            runtime,
            job_class=f"{gpus}gpu",
        )
        jobs.append(dataclasses.replace(job, topology=request))
    return jobs


def _pod_gpus(rng: random.Random, gpus: int, big_gpus: int) -> int:
    """GPUs per pod: whole nodes for big gangs; else 1, 2 or 4, leaving two pods or more."""
    if gpus >= big_gpus and gpus % NODE_GPUS == 0:
        return NODE_GPUS
    choices = [size for size in (1, 2, 4) if gpus % size == 0 and gpus // size >= 2]
    return rng.choice(choices)


def _request(rng: random.Random, gpus: int, mix: TopologyMix) -> TopologyRequest:
    draw = rng.random()
    if draw < mix.required_rack:
        return TopologyRequest(RACK_LABEL, required=True)
    if draw < mix.required_rack + mix.required_clique and gpus <= mix.clique_gpus:
        return TopologyRequest(CLIQUE_LABEL, required=True)
    return TopologyRequest(mix.preferred, required=False)


def strip_topology(jobs: list[BatchJob]) -> list[BatchJob]:
    """The same gangs asking for no domain: the topology-blind baseline."""
    return [dataclasses.replace(job, topology=None) for job in jobs]
