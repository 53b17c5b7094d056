"""Purely computational: which k of a node's free devices a request gets, best first.

GPUs are joined to the node agent's topology (NodeResourceTopology) by UUID, then PCI bus
ID; when every candidate is joined, the set is the one `gpu.placement.best_gpu_set` picks for
the ledger (one NVLink island, then one PCIe switch and NUMA node, then the choice that keeps
whole islands free). Without agent data, devices are grouped by the standard
`resource.kubernetes.io/pcieRoot` attribute and the set comes from the fullest-fitting root.
Devices with neither come in slice order.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Final

from batchsched.dra.device import Device
from gpu.placement import best_gpu_set
from gpu.topology import MILLI_PER_GPU, NodeTopology

PCIE_ROOT: Final = "resource.kubernetes.io/pcieRoot"
# Attributes NVIDIA's DRA driver publishes that name a GPU the agent also reports: its UUID,
# and its PCI address (the standard attribute in newer releases, its own name before).
UUID_ATTRIBUTES: Final = ("gpu.nvidia.com/uuid",)
PCI_ATTRIBUTES: Final = ("resource.kubernetes.io/pciBusID", "gpu.nvidia.com/pcieBusID")
# Quality of a set (higher is better): GpuChoice.quality where the agent's topology joins,
# else one PCIe root as good as one PCIe switch on one NUMA node, several as a host bridge.
ONE_ROOT_QUALITY: Final = 7
SPREAD_QUALITY: Final = 2


@dataclass(frozen=True, slots=True)
class DeviceSet:
    devices: tuple[Device, ...]
    quality: int


def gpu_indices(topology: NodeTopology, devices: Sequence[Device]) -> list[int] | None:
    """Each device's GPU index in `topology`, or None when one of them does not join."""
    by_uuid = {g.uuid.lower(): g.index for g in topology.gpus if g.uuid}
    by_pci = {_pci(g.pci_bus_id): g.index for g in topology.gpus if g.pci_bus_id}
    found = []
    for device in devices:
        index = _lookup(device, UUID_ATTRIBUTES, by_uuid)
        if index is None:
            index = _lookup(device, PCI_ATTRIBUTES, by_pci)
        if index is None:
            return None
        found.append(index)
    return found


def _lookup(device: Device, names: Sequence[str], table: dict[str, int]) -> int | None:
    for name in names:
        value = device.attributes.get(name)
        if isinstance(value, str):
            found = table.get(_pci(value) if name in PCI_ATTRIBUTES else value.lower())
            if found is not None:
                return found
    return None


def _pci(bus_id: str) -> str:
    """NVML's "00000000:1B:00.0" and sysfs's "0000:1b:00.0" name the same PCI function."""
    parts = bus_id.lower().split(":")
    if len(parts) == 3:
        try:
            return f"{int(parts[0], 16):04x}:{parts[1]}:{parts[2]}"
        except ValueError:
            pass
    return bus_id.lower()


def ranked_sets(
    free: Sequence[Device], k: int, topology: NodeTopology | None
) -> Iterator[DeviceSet]:
    """Sets of k devices out of `free`: the best first, then every other one in slice order
    (the allocator backtracks through them when a later request or constraint needs it)."""
    if k <= 0 or len(free) < k:
        return
    best = best_set(free, k, topology)
    yield best
    chosen = {d.id for d in best.devices}
    for combo in combinations(free, k):
        if {d.id for d in combo} != chosen:
            yield DeviceSet(combo, _spread_quality(combo))


def best_set(free: Sequence[Device], k: int, topology: NodeTopology | None) -> DeviceSet:
    """The best k of `free` (len(free) >= k)."""
    if topology is not None:
        indices = gpu_indices(topology, free)
        if indices is not None and len(set(indices)) == len(indices):
            found = _topology_set(free, indices, k, topology)
            if found is not None:
                return found
    return _root_set(free, k)


def _topology_set(
    free: Sequence[Device], indices: list[int], k: int, topology: NodeTopology
) -> DeviceSet | None:
    milli = [0] * topology.gpu_count
    for index in indices:
        milli[index] = MILLI_PER_GPU
    choice = best_gpu_set(topology, milli, k)
    if choice is None:  # an unhealthy GPU in the agent's view: let the slice decide
        return None
    device_of = dict(zip(indices, free, strict=True))
    return DeviceSet(tuple(device_of[i] for i in choice.indices), choice.quality)


def _root_set(free: Sequence[Device], k: int) -> DeviceSet:
    roots: dict[str, list[Device]] = {}
    for device in free:
        root = device.attributes.get(PCIE_ROOT)
        roots.setdefault(root if isinstance(root, str) else "", []).append(device)
    if "" in roots or len(roots) == 1:
        return DeviceSet(tuple(free[:k]), _spread_quality(free[:k]))
    fitting = [(len(group), name) for name, group in roots.items() if len(group) >= k]
    if fitting:
        _, name = min(fitting)  # the tightest root that holds the whole set
        return DeviceSet(tuple(roots[name][:k]), ONE_ROOT_QUALITY)
    chosen: list[Device] = []
    for _, name in sorted(((-len(g), n) for n, g in roots.items())):
        chosen.extend(roots[name][: k - len(chosen)])
        if len(chosen) == k:
            break
    return DeviceSet(tuple(chosen), SPREAD_QUALITY)


def _spread_quality(devices: Sequence[Device]) -> int:
    roots = {d.attributes.get(PCIE_ROOT) for d in devices}
    if None in roots or len(roots) > 1:
        return SPREAD_QUALITY
    return ONE_ROOT_QUALITY
