"""What a pod asks of a node's GPUs, read from its requests and annotations.

- Whole GPUs: the extended resource `nvidia.com/gpu: N`.
- A share of one GPU: the annotation `batchsched.io/gpu-milli: "460"` (1..999 milli-GPU) and
  no `nvidia.com/gpu` request, so NodeResourcesFit does not count it; shares are packed per
  GPU by GpuTopology, at most 1000 milli per GPU.
- Allowed GPU models: `batchsched.io/gpu-models: "V100M16|V100M32"`, matched against the
  node's GPU product (`nvidia.com/gpu.product`).
- Required connectivity of a multi-GPU set: `batchsched.io/gpu-connectivity` = `NVLink`
  (one NVLink/NVSwitch island), `PCIeSwitch` (one PCIe switch) or `Socket` (one socket).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from batchsched.model.pod import PodView
from batchsched.model.resources import NVIDIA_GPU
from gpu.topology import MILLI_PER_GPU, LinkLevel

__all__ = [
    "GPU_CONNECTIVITY_ANNOTATION",
    "GPU_MILLI_ANNOTATION",
    "GPU_MODELS_ANNOTATION",
    "NO_GPU",
    "GpuRequest",
    "InvalidGpuRequest",
    "counted_request",
    "gpu_request",
]

GPU_MILLI_ANNOTATION: Final = "batchsched.io/gpu-milli"
GPU_MODELS_ANNOTATION: Final = "batchsched.io/gpu-models"
GPU_CONNECTIVITY_ANNOTATION: Final = "batchsched.io/gpu-connectivity"

CONNECTIVITY: Final = {
    "nvlink": LinkLevel.NVLINK,
    "pcieswitch": LinkLevel.PIX,
    "socket": LinkLevel.PHB,
}


class InvalidGpuRequest(ValueError):
    """A GPU annotation the scheduler cannot act on; the message names it."""


@dataclass(frozen=True, slots=True)
class GpuRequest:
    count: int = 0  # whole GPUs
    milli: int = 0  # a share of one GPU (1..999); 0 with whole GPUs or none
    models: frozenset[str] | None = None  # allowed GPU products; None: any
    connectivity: LinkLevel = LinkLevel.SYS  # the worst link allowed inside the set

    @property
    def wants_gpu(self) -> bool:
        return self.count > 0 or self.milli > 0

    @property
    def per_gpu_milli(self) -> int:
        """What the pod needs free on each GPU it gets."""
        return MILLI_PER_GPU if self.count else self.milli

    @property
    def total_milli(self) -> int:
        return self.count * MILLI_PER_GPU + self.milli


NO_GPU: Final = GpuRequest()


def gpu_request(pod: PodView) -> GpuRequest:
    """The pod's GPU request; InvalidGpuRequest for an annotation that makes no sense."""
    count = pod.requests.scalar.get(NVIDIA_GPU, 0)
    annotations = pod.annotations
    if not annotations:
        return GpuRequest(count) if count else NO_GPU
    milli = _milli(annotations.get(GPU_MILLI_ANNOTATION), count)
    if not count and not milli:
        return NO_GPU
    return GpuRequest(
        count,
        milli,
        _models(annotations.get(GPU_MODELS_ANNOTATION)),
        _connectivity(annotations.get(GPU_CONNECTIVITY_ANNOTATION)),
    )


def counted_request(pod: PodView) -> GpuRequest:
    """The request to count for a pod already bound: a bad annotation counts as no share
    (the pod runs whatever we think of it; refusing to count it would hide its GPUs)."""
    try:
        return gpu_request(pod)
    except InvalidGpuRequest:
        count = pod.requests.scalar.get(NVIDIA_GPU, 0)
        return GpuRequest(count) if count else NO_GPU


def _milli(value: str | None, count: int) -> int:
    if value is None:
        return 0
    # ASCII digits, at most three significant: "²" is a digit to str.isdigit() but not to
    # int(), and int() refuses a string of thousands of digits.
    text = value.strip().lstrip("0")
    if not (text.isascii() and text.isdigit() and len(text) <= 3) or int(text) >= MILLI_PER_GPU:
        raise InvalidGpuRequest(
            f'annotation {GPU_MILLI_ANNOTATION}: "{value}" is not a share of one GPU in '
            "1..999 milli-GPU (ask for whole GPUs with nvidia.com/gpu)"
        )
    if count:
        raise InvalidGpuRequest(
            f"annotation {GPU_MILLI_ANNOTATION} asks for a share of one GPU, so the pod must "
            f"not also request {NVIDIA_GPU}"
        )
    return int(text)


def _models(value: str | None) -> frozenset[str] | None:
    if value is None:
        return None
    models = frozenset(m.strip() for m in value.split("|") if m.strip())
    return models or None


def _connectivity(value: str | None) -> LinkLevel:
    if value is None or not value.strip():
        return LinkLevel.SYS
    level = CONNECTIVITY.get(value.strip().lower())
    if level is None:
        raise InvalidGpuRequest(
            f'annotation {GPU_CONNECTIVITY_ANNOTATION}: "{value}" is not one of '
            "NVLink, PCIeSwitch, Socket"
        )
    return level
