"""What arrives when and for how long: from a trace, from Kubernetes YAML, or generated.

Every source yields `SimPod`s: the pod view the scheduler sees, its arrival on the virtual clock
(seconds), its runtime once bound (None: it never leaves), and its GPU request in milli-GPU
(whole GPUs x 1000, or the share it asks for) for the allocation metrics. A pod that asks for
GPUs through Dynamic Resource Allocation claims carries how many GPU devices they ask for, and
the claims the resourceclaim controller makes for it when it arrives (from its templates).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from batchsched.dra.objects import ResourceClaim
from batchsched.model.errors import InvalidObject
from batchsched.model.fields import FieldError
from batchsched.model.pod import PodView
from batchsched.model.resources import NVIDIA_GPU
from batchsched.sim.claims import pod_devices
from batchsched.sim.sampler import SampledPod
from batchsched.sim.trace import PodFactory, TracePod
from gpu.requests import InvalidGpuRequest, gpu_request

ARRIVAL_ANNOTATION: Final = "batchsched.io/sim-arrival"  # seconds on the virtual clock
RUNTIME_ANNOTATION: Final = "batchsched.io/sim-runtime"  # seconds once bound; absent: forever


@dataclass(frozen=True, slots=True)
class SimPod:
    pod: PodView
    arrival: float
    runtime: float | None = None
    gpu_milli: int = 0  # nvidia.com/gpu or a share of one, not DRA devices
    claims: tuple[ResourceClaim, ...] = ()  # made for it from templates when it arrives
    claim_gpus: int = 0  # GPU devices its claims ask for (shared claims: the first pod)

    @property
    def whole_gpus(self) -> int:
        return self.pod.requests.scalar.get(NVIDIA_GPU, 0)

    @property
    def share_milli(self) -> int:
        return 0 if self.whole_gpus else self.gpu_milli


def gpu_request_milli(pod: PodView) -> int:
    """Whole GPUs x 1000, or the share the annotation asks for (the GPU model's reading)."""
    try:
        return gpu_request(pod).total_milli
    except InvalidGpuRequest as err:
        raise FieldError("metadata.annotations", str(err)) from None


def sim_pod(pod: PodView, arrival: float, runtime: float | None) -> SimPod:
    return SimPod(pod, arrival, runtime, gpu_request_milli(pod))


def paper_workload(sampled: Sequence[SampledPod], factory: PodFactory) -> list[SimPod]:
    """One pod per second of virtual time, in stream order, none ever leaving."""
    return [
        SimPod(factory.view(s.pod, s.name, float(i)), float(i), None, s.pod.gpu_request_milli)
        for i, s in enumerate(sampled)
    ]


def replay_workload(trace: Sequence[TracePod], factory: PodFactory) -> list[SimPod]:
    """Each pod at its creation time, staying deletion - creation once bound.

    Rows without a creation time arrive at 0; rows without a deletion time never leave.
    """
    pods = []
    for row in trace:
        arrival = row.creation_time or 0.0
        pods.append(
            SimPod(
                factory.view(row, row.name, arrival), arrival, row.runtime, row.gpu_request_milli
            )
        )
    return pods


def yaml_workload(pods: Sequence[PodView]) -> list[SimPod]:
    """Pending pods from Kubernetes YAML; arrival and runtime from `batchsched.io/sim-*`.

    Without the arrival annotation a pod arrives at its creationTimestamp relative to the
    earliest one (0 when none has a timestamp).
    """
    stamps = [p.creation_time for p in pods if p.creation_time]
    start = min(stamps) if stamps else 0.0
    out = []
    for pod in pods:
        try:
            arrival = _seconds(pod, ARRIVAL_ANNOTATION)
            if arrival is None:
                arrival = pod.creation_time - start if pod.creation_time else 0.0
            runtime = _seconds(pod, RUNTIME_ANNOTATION)
            out.append(sim_pod(dataclasses.replace(pod, creation_time=arrival), arrival, runtime))
        except FieldError as err:
            raise InvalidObject("Pod", pod.key, err.field, err.message) from err
    return out


def with_claim_gpus(
    pods: Sequence[SimPod], claims: Sequence[ResourceClaim], device_class: str
) -> list[SimPod]:
    """The pods with the GPU devices (of `device_class`) their claims ask for; a claim several
    pods share counts toward the first of them."""
    by_key = {c.key: c for c in claims}
    seen: set[str] = set()
    out = []
    for pod in pods:
        gpus = pod_devices(pod.pod, by_key, device_class, seen) if pod.pod.resource_claims else 0
        out.append(dataclasses.replace(pod, claim_gpus=gpus) if gpus else pod)
    return out


def _seconds(pod: PodView, annotation: str) -> float | None:
    raw = pod.annotations.get(annotation)
    if raw is None:
        return None
    try:
        value = float(raw)
    except ValueError:
        raise FieldError(
            f"metadata.annotations[{annotation}]", f"expected seconds, got {raw!r}"
        ) from None
    if value < 0:
        raise FieldError(f"metadata.annotations[{annotation}]", f"must not be negative: {raw}")
    return value
