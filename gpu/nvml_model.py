"""Purely computational: what NVML reported per GPU, turned into links and NUMA nodes.

`gpu.nvml` gathers one `GpuLinks` per GPU (its CPU affinity and active NVLinks) and the PCIe
common ancestor of each pair; here they become the `Link` between a pair and the node's NUMA
nodes. No NVML, no I/O: tested with plain values.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from gpu.topology import GpuDevice, Link, LinkLevel, NumaNode

__all__ = ["GpuLinks", "HostNuma", "numa_layout", "nvlink_between"]

# NVLink bandwidth per link, both directions, GB/s, by nvmlNvlinkVersion_t (1 = NVLink 1.0 ...
# 7 = 5.0): P100 40; V100, A100 and H100 50 (12 links on an A100 make its 600 GB/s, 18 on an
# H100 its 900 GB/s); Blackwell 100. Unknown versions count 0: bandwidth only breaks ties.
# Linux builds for at most 8192 CPUs (CONFIG_NR_CPUS); room to spare, but a bound.
MAX_CPUS: Final = 65536
_GBPS_PER_LINK: Final = {1: 40, 2: 50, 3: 50, 4: 50, 5: 50, 6: 50, 7: 100, 8: 100}


@dataclass(frozen=True, slots=True)
class GpuLinks:
    """One GPU's view: the CPUs near it and its active NVLinks."""

    cpus: tuple[int, ...] = ()
    peers: Mapping[str, int] = field(default_factory=dict)  # NVLinks to a GPU, by its bus id
    switch_lanes: int = 0  # NVLinks to NVSwitches
    version: int = 0  # nvmlNvlinkVersion_t of its links


@dataclass(frozen=True, slots=True)
class HostNuma:
    """A NUMA node as the host (sysfs, or a reference machine) describes it."""

    id: int
    socket: int
    cpus: tuple[int, ...]
    memory_mib: int
    distances: Mapping[int, int] = field(default_factory=dict)  # to each NUMA node id


def nvlink_between(a: GpuLinks, b: GpuLinks, bus_a: str, bus_b: str) -> Link | None:
    """The NVLink between two GPUs, or None when they share none (PCIe decides)."""
    per_link = min(_GBPS_PER_LINK.get(a.version, 0), _GBPS_PER_LINK.get(b.version, 0))
    if a.switch_lanes and b.switch_lanes:
        lanes = min(a.switch_lanes, b.switch_lanes)
        return Link(LinkLevel.NVSWITCH, lanes, lanes * per_link)
    lanes = max(a.peers.get(bus_b, 0), b.peers.get(bus_a, 0))
    if lanes:
        return Link(LinkLevel.NVLINK, lanes, lanes * per_link)
    return None


def numa_layout(
    devices: Sequence[GpuDevice], cpus: Sequence[tuple[int, ...]], host: Sequence[HostNuma]
) -> tuple[tuple[GpuDevice, ...], tuple[NumaNode, ...]]:
    """Every GPU on a known NUMA node, and the node's NUMA nodes.

    The host's nodes come first; a GPU whose NUMA node NVML did not say (-1: an old driver, a
    lost GPU) goes to the node its CPU affinity overlaps most, else the first. Without host
    information a NUMA node holds the CPUs near its GPUs, and its socket is taken to be its
    id (true on two-socket servers without sub-NUMA clustering).
    """
    nodes: dict[int, NumaNode] = {
        h.id: NumaNode(h.id, h.socket, h.cpus, h.memory_mib) for h in host
    }
    for device, near in zip(devices, cpus, strict=True):
        if device.numa_node >= 0 and device.numa_node not in nodes:
            nodes[device.numa_node] = NumaNode(device.numa_node, device.numa_node, (), 0)
        if device.numa_node >= 0 and not host:
            node = nodes[device.numa_node]
            merged = tuple(sorted(set(node.cpus) | set(near)))
            nodes[device.numa_node] = NumaNode(node.id, node.socket, merged, 0)
    if not host:  # NUMA ids unknown too: one node per distinct CPU affinity
        for device, near in zip(devices, cpus, strict=True):
            known = any(set(near) <= set(n.cpus) for n in nodes.values())
            if device.numa_node < 0 and near and not known:
                new = max(nodes, default=-1) + 1
                nodes[new] = NumaNode(new, new, near, 0)
    if not nodes:
        nodes[0] = NumaNode(0, 0, (), 0)
    placed = tuple(_place(d, near, nodes) for d, near in zip(devices, cpus, strict=True))
    return placed, tuple(nodes[i] for i in sorted(nodes))


def _place(device: GpuDevice, near: tuple[int, ...], nodes: Mapping[int, NumaNode]) -> GpuDevice:
    if device.numa_node >= 0:
        return device
    wanted = set(near)
    best = max(sorted(nodes), key=lambda i: len(wanted.intersection(nodes[i].cpus)))
    return GpuDevice(
        device.index,
        device.uuid,
        device.model,
        device.memory_mib,
        best,
        device.pci_bus_id,
        device.healthy,
        device.mig,
    )


def cpu_list(cpus: Sequence[int]) -> str:
    """Linux cpulist notation: (0, 1, 2, 5) -> "0-2,5"."""
    parts: list[str] = []
    ordered = sorted(set(cpus))
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        parts.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(parts)


def parse_cpu_list(text: str) -> tuple[int, ...]:
    """ "0-2,5" -> (0, 1, 2, 5); ValueError on anything else, or on a CPU number no kernel
    has (a range like "0-99999999999" would otherwise fill memory)."""
    found: set[int] = set()
    for part in text.strip().split(","):
        if not part:
            continue
        low, _, high = part.partition("-")
        first, last = int(low), int(high or low)
        if first < 0 or last < first:
            raise ValueError(f"bad CPU range {part!r}")
        if last >= MAX_CPUS:
            raise ValueError(f"bad CPU range {part!r}: CPU numbers stop at {MAX_CPUS - 1}")
        found.update(range(first, last + 1))
    return tuple(sorted(found))
