"""A seeded synthetic workload: jobs of N pods (gangs) from tenants, with runtimes.

`GeneratorSpec.parse("jobs=200,gang=1-4,gpus=1|2|4|8,share=0.2,tenants=3,runtime=600-7200,
interval=30")`: jobs arrive as a Poisson process (mean `interval` seconds apart); each job is a
gang of 1..4 pods labelled with one PodGroup name, in the namespace of one of `tenants` tenants;
each pod asks for a GPU count drawn from `gpus`, or with probability `share` for a share of one
GPU (100..900 milli); every pod of a job runs for the job's runtime, uniform in the range.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Final

from batchsched.model.pod import PodView, parse_pod
from batchsched.sim.trace import DEFAULT_SCHEDULER_NAME, GPU_MILLI_ANNOTATION
from batchsched.sim.workload import SimPod, sim_pod

POD_GROUP_LABEL: Final = "scheduling.x-k8s.io/pod-group"
TENANT_LABEL: Final = "batchsched.io/tenant"
CPU_PER_GPU: Final = 8
MEMORY_GI_PER_GPU: Final = 32


class GeneratorError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class GeneratorSpec:
    jobs: int = 200
    gang: tuple[int, int] = (1, 4)
    gpus: tuple[int, ...] = (1, 2, 4, 8)
    share: float = 0.2
    tenants: int = 3
    runtime: tuple[float, float] = (600.0, 7200.0)
    interval: float = 30.0

    @classmethod
    def parse(cls, text: str) -> GeneratorSpec:
        """`key=value` pairs separated by commas; unnamed keys keep their defaults."""
        values: dict[str, object] = {}
        known = {f.name for f in fields(cls)}
        for item in filter(None, (part.strip() for part in text.split(","))):
            key, sep, raw = item.partition("=")
            if not sep or key not in known:
                names = ", ".join(sorted(known))
                raise GeneratorError(f"generator: {item!r}: expected key=value with key in {names}")
            try:
                values[key] = _PARSERS[key](raw)
            except ValueError as err:
                raise GeneratorError(f"generator: {key}: {err}") from None
        spec = cls(**values)  # type: ignore[arg-type]
        spec.check()
        return spec

    def check(self) -> None:
        if self.jobs < 0 or self.tenants < 1 or self.interval <= 0:
            raise GeneratorError("generator: jobs >= 0, tenants >= 1 and interval > 0 please")
        if not 1 <= self.gang[0] <= self.gang[1]:
            raise GeneratorError(f"generator: gang range {self.gang} must be 1 <= low <= high")
        if not self.gpus or min(self.gpus) < 0 or not 0 <= self.share <= 1:
            raise GeneratorError("generator: gpus must be counts >= 0 and share within 0..1")
        if not 0 <= self.runtime[0] <= self.runtime[1]:
            raise GeneratorError(f"generator: runtime range {self.runtime} is empty")


def _int_range(raw: str) -> tuple[int, int]:
    low, _, high = raw.partition("-")
    return int(low), int(high or low)


def _float_range(raw: str) -> tuple[float, float]:
    low, _, high = raw.partition("-")
    return float(low), float(high or low)


_PARSERS: Final[dict[str, Callable[[str], object]]] = {
    "jobs": int,
    "gang": _int_range,
    "gpus": lambda raw: tuple(int(x) for x in raw.split("|")),
    "share": float,
    "tenants": int,
    "runtime": _float_range,
    "interval": float,
}


def generate(spec: GeneratorSpec, seed: int) -> list[SimPod]:
    rng = random.Random(seed)
    pods: list[SimPod] = []
    clock = 0.0
    for job in range(spec.jobs):
        clock += rng.expovariate(1 / spec.interval)
        tenant = f"tenant-{rng.randrange(spec.tenants)}"
        members = rng.randint(*spec.gang)
        runtime = rng.uniform(*spec.runtime)
        shared = rng.random() < spec.share
        gpus = 0 if shared else rng.choice(spec.gpus)
        share = rng.randrange(100, 1000, 10) if shared else 0
        for member in range(members):
            view = _pod(f"job-{job}-{member}", f"job-{job}", tenant, gpus, share, clock)
            pods.append(sim_pod(view, clock, runtime))
    return pods


def _pod(name: str, group: str, tenant: str, gpus: int, share: int, arrival: float) -> PodView:
    weight = gpus or 1
    requests: dict[str, object] = {
        "cpu": str(CPU_PER_GPU * weight if not share else CPU_PER_GPU // 2),
        "memory": f"{MEMORY_GI_PER_GPU * weight if not share else MEMORY_GI_PER_GPU // 2}Gi",
    }
    annotations = {GPU_MILLI_ANNOTATION: str(share)} if share else {}
    if gpus:
        requests["nvidia.com/gpu"] = str(gpus)
    view = parse_pod(
        {
            "metadata": {
                "name": name,
                "namespace": tenant,
                "uid": f"{tenant}/{name}",
                "labels": {POD_GROUP_LABEL: group, TENANT_LABEL: tenant},
                "annotations": annotations,
            },
            "spec": {
                "schedulerName": DEFAULT_SCHEDULER_NAME,
                "containers": [{"name": "main", "resources": {"requests": requests}}],
            },
        }
    )
    # creation_time orders the queue (PrioritySort is FIFO within a priority).
    return dataclasses.replace(view, creation_time=arrival)
