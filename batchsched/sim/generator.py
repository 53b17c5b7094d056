"""A seeded synthetic workload: jobs of N pods (gangs) from tenants, with runtimes.

`GeneratorSpec.parse("jobs=200,gang=1-4,gpus=1|2|4|8,share=0.2,tenants=3,runtime=600-7200,
interval=30")`: jobs arrive as a Poisson process (mean `interval` seconds apart); each job is a
gang of 1..4 pods labelled with one PodGroup name, in the namespace of one of `tenants` tenants;
each pod asks for a GPU count drawn from `gpus`, or with probability `share` for a share of one
GPU (100..900 milli); every pod of a job runs for the job's runtime, uniform in the range.

`gpus_as` says how a pod asks for its GPUs: `nvidia.com/gpu` (the default: the extended
resource) or `dra`: a Dynamic Resource Allocation claim made from the template `gpu-<N>` (N
GPUs of DeviceClass `gpu.nvidia.com`), which the simulated resourceclaim controller makes
when the pod arrives, named `<pod>-gpus`. A DRA claim cannot ask for a share of a GPU the way
`batchsched.io/gpu-milli` does, so `dra` needs `share=0`. The same seed draws the same jobs
either way.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Final

from batchsched.dra.objects import ResourceClaim
from batchsched.dra.templates import template_claim
from batchsched.model.pod import PodView, parse_pod
from batchsched.model.resources import NVIDIA_GPU
from batchsched.sim.dra_cluster import GPU_DEVICE_CLASS
from batchsched.sim.trace import DEFAULT_SCHEDULER_NAME, GPU_MILLI_ANNOTATION
from batchsched.sim.workload import SimPod, sim_pod

POD_GROUP_LABEL: Final = "scheduling.x-k8s.io/pod-group"
TENANT_LABEL: Final = "batchsched.io/tenant"
CPU_PER_GPU: Final = 8
MEMORY_GI_PER_GPU: Final = 32
EXTENDED_RESOURCE: Final = NVIDIA_GPU
DRA: Final = "dra"
GPUS_AS: Final = (EXTENDED_RESOURCE, DRA)
CLAIM_ENTRY: Final = "gpus"  # the pod's claim entry, and its containers' claim


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
    gpus_as: str = EXTENDED_RESOURCE

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
        if self.gpus_as == DRA and self.share:
            raise GeneratorError(
                f"generator: gpus_as=dra asks for whole GPUs through claims, and share={self.share}"
                " asks for shares of one (batchsched.io/gpu-milli): add share=0"
            )


def _gpus_as(raw: str) -> str:
    if raw not in GPUS_AS:
        raise ValueError(f"expected one of {', '.join(GPUS_AS)}, got {raw!r}")
    return raw


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
    "gpus_as": _gpus_as,
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
            name = f"job-{job}-{member}"
            if spec.gpus_as == DRA and gpus:
                view = _pod(name, f"job-{job}", tenant, gpus, 0, clock, dra=True)
                pods.append(SimPod(view, clock, runtime, 0, (_claim(view, gpus),), gpus))
            else:
                view = _pod(name, f"job-{job}", tenant, gpus, share, clock)
                pods.append(sim_pod(view, clock, runtime))
    return pods


def _claim(pod: PodView, gpus: int) -> ResourceClaim:
    """The claim the resourceclaim controller makes for the pod from `gpu-<gpus>`."""
    return template_claim(pod, pod.resource_claims[0], claim_spec(gpus))


def claim_template(gpus: int) -> str:
    return f"gpu-{gpus}"


def claim_spec(gpus: int) -> dict[str, object]:
    """The spec of the template `gpu-<gpus>`: that many GPUs of NVIDIA's DeviceClass."""
    request = {"name": "gpus", "exactly": {"deviceClassName": GPU_DEVICE_CLASS, "count": gpus}}
    return {"devices": {"requests": [request]}}


def _pod(
    name: str, group: str, tenant: str, gpus: int, share: int, arrival: float, dra: bool = False
) -> PodView:
    """The pod; with `dra`, its GPUs come from a claim made from the template `gpu-<gpus>`,
    named in its status as the resourceclaim controller writes it."""
    weight = gpus or 1
    requests: dict[str, object] = {
        "cpu": str(CPU_PER_GPU * weight if not share else CPU_PER_GPU // 2),
        "memory": f"{MEMORY_GI_PER_GPU * weight if not share else MEMORY_GI_PER_GPU // 2}Gi",
    }
    annotations = {GPU_MILLI_ANNOTATION: str(share)} if share else {}
    container: dict[str, object] = {"name": "main", "resources": {"requests": requests}}
    spec: dict[str, object] = {"schedulerName": DEFAULT_SCHEDULER_NAME, "containers": [container]}
    status: dict[str, object] = {}
    if gpus and dra:
        container["resources"] = {"requests": requests, "claims": [{"name": CLAIM_ENTRY}]}
        entry = {"name": CLAIM_ENTRY, "resourceClaimTemplateName": claim_template(gpus)}
        spec["resourceClaims"] = [entry]
        made = {"name": CLAIM_ENTRY, "resourceClaimName": f"{name}-{CLAIM_ENTRY}"}
        status["resourceClaimStatuses"] = [made]
    elif gpus:
        requests[EXTENDED_RESOURCE] = str(gpus)
    view = parse_pod(
        {
            "metadata": {
                "name": name,
                "namespace": tenant,
                "uid": f"{tenant}/{name}",
                "labels": {POD_GROUP_LABEL: group, TENANT_LABEL: tenant},
                "annotations": annotations,
            },
            "spec": spec,
            "status": status,
        }
    )
    # creation_time orders the queue (PrioritySort is FIFO within a priority).
    return dataclasses.replace(view, creation_time=arrival)
