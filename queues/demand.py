"""What a pod or a gang asks of its tenant's quota, in queue units (see queues.model).

Purely computational. Whole GPUs count 1000 milli-GPU each; a pod asking for a share of one
GPU (`batchsched.io/gpu-milli`) counts its share. Once the node is known, GPUs also count
against the node's GPU model (`nvidia.com/gpu@<product>`), so per-model quotas hold.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from batchsched.model.pod import PodView
from batchsched.model.resources import CPU, EPHEMERAL_STORAGE, MEMORY, NVIDIA_GPU, Resources
from gpu.requests import InvalidGpuRequest, gpu_request
from queues.model import MILLI_PER_GPU, Amounts, flavor_key, total

PRODUCT_LABEL = "nvidia.com/gpu.product"


def device_demand(devices: Mapping[str, int], classes: Mapping[str, str]) -> dict[str, int]:
    """What devices allocated (or asked for) through DRA claims count, by DeviceClass, under
    the quota file's `deviceClasses`: a device of a class mapped to nvidia.com/gpu is one
    whole GPU, any other mapped device one unit; unmapped classes count nothing."""
    out: dict[str, int] = {}
    for device_class, count in devices.items():
        resource = classes.get(device_class)
        if resource is None or count <= 0:
            continue
        amount = count * MILLI_PER_GPU if resource == NVIDIA_GPU else count
        out[resource] = out.get(resource, 0) + amount
    return out


def pod_demand(
    pod: PodView, product: str | None = None, devices: Mapping[str, int] | None = None
) -> dict[str, int]:
    """The pod's quota demand; `product` is its node's GPU model when it is placed;
    `devices` what its DRA claims count (device_demand)."""
    out = _resources(pod.requests)
    try:
        milli = gpu_request(pod).total_milli
    except InvalidGpuRequest:
        milli = pod.requests.scalar.get(NVIDIA_GPU, 0) * MILLI_PER_GPU  # the plugin reports it
    if milli:
        out[NVIDIA_GPU] = milli
        if product:
            out[flavor_key(product)] = milli
    else:
        out.pop(NVIDIA_GPU, None)
    for name, amount in (devices or {}).items():
        out[name] = out.get(name, 0) + amount
    return out


def gang_demand(
    pods: Iterable[PodView],
    products: Mapping[str, str] | None = None,
    devices: Mapping[str, Mapping[str, int]] | None = None,
) -> dict[str, int]:
    """Sum over members; `products` maps a member's uid to its node's GPU model, `devices`
    to what its DRA claims count."""
    products, devices = products or {}, devices or {}
    return total(pod_demand(p, products.get(p.uid), devices.get(p.uid)) for p in pods)


def capacity_of(allocatable: Iterable[tuple[Resources, Mapping[str, str]]]) -> dict[str, int]:
    """What the cluster offers tenants, from each node's allocatable and labels."""
    out: dict[str, int] = {}
    for alloc, labels in allocatable:
        amounts = _resources(alloc)
        gpus = alloc.scalar.get(NVIDIA_GPU, 0) * MILLI_PER_GPU
        if gpus:
            amounts[NVIDIA_GPU] = gpus
            product = labels.get(PRODUCT_LABEL)
            if product:
                amounts[flavor_key(product)] = gpus
        for name, amount in amounts.items():
            out[name] = out.get(name, 0) + amount
    return out


def sole_product(capacity: Amounts) -> str | None:
    """The GPU model, when every GPU in the cluster is of one model (from `capacity_of`): a
    gang's per-model demand is then known before it is placed."""
    models = [name for name in capacity if name.startswith(NVIDIA_GPU + "@")]
    if len(models) != 1 or capacity[models[0]] != capacity.get(NVIDIA_GPU, 0):
        return None
    return models[0][len(NVIDIA_GPU) + 1 :]


def _resources(requests: Resources) -> dict[str, int]:
    """The non-zero amounts but pods, in `Resources.names()` order; read field by field, as
    this runs for every pod counted (issue #17) and `names()` costs several times this."""
    out = {}
    if requests.milli_cpu:
        out[CPU] = requests.milli_cpu
    if requests.memory:
        out[MEMORY] = requests.memory
    if requests.ephemeral_storage:
        out[EPHEMERAL_STORAGE] = requests.ephemeral_storage
    scalar = requests.scalar  # never holds a zero
    for name in sorted(scalar) if len(scalar) > 1 else scalar:
        out[name] = scalar[name]
    return out


def gpus(amounts: Amounts) -> float:
    """Whole GPUs in a demand or usage, for messages and metrics."""
    return amounts.get(NVIDIA_GPU, 0) / MILLI_PER_GPU
