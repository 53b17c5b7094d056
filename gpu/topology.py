"""A node's GPU topology: devices, NUMA nodes, the link between every pair of GPUs, MIG.

Frozen data. The groupings placement needs (NVLink islands, PCIe switches, sockets) are
derived once when a topology is built, so choosing a GPU set never walks the link matrix
for them again. Topologies are shared between nodes of the same kind and compared by
identity (`eq=False`), which keeps them cheap as cache keys.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import IntEnum

__all__ = [
    "GpuDevice",
    "GpuLoad",
    "Link",
    "LinkLevel",
    "MigPartition",
    "NodeTopology",
    "NumaNode",
    "flat_topology",
]

MILLI_PER_GPU = 1000


class LinkLevel(IntEnum):
    """How two GPUs reach each other, worst to best (`nvidia-smi topo -m` vocabulary)."""

    SYS = 0  # across sockets (QPI/UPI, Infinity Fabric)
    PHB = 1  # through a PCIe host bridge on one socket
    PXB = 2  # through several PCIe switches, without the host bridge
    PIX = 3  # through a single PCIe switch
    NVLINK = 4  # direct NVLink lanes
    NVSWITCH = 5  # NVLink through NVSwitch: every pair at full bandwidth
    SELF = 6  # a GPU and itself (the matrix diagonal)


@dataclass(frozen=True, slots=True)
class Link:
    level: LinkLevel
    nvlinks: int = 0  # NVLink lanes between the pair (0 below NVLINK)
    bandwidth_gbps: int = 0  # NVLink bandwidth between the pair, both directions, GB/s


@dataclass(frozen=True, slots=True)
class MigPartition:
    """MIG instances of one profile configured on a GPU, e.g. ("1g.10gb", 7)."""

    profile: str
    count: int


@dataclass(frozen=True, slots=True)
class GpuDevice:
    index: int
    uuid: str  # "" until the node agent reports it
    model: str
    memory_mib: int
    numa_node: int
    pci_bus_id: str
    healthy: bool = True
    mig: tuple[MigPartition, ...] = ()


@dataclass(frozen=True, slots=True)
class GpuLoad:
    """One GPU's measured load: NVML's utilisation over its last sample period (0..100) and
    the memory in use, as the node agent reads and publishes them."""

    index: int
    utilization_pct: int
    memory_used_mib: int
    memory_total_mib: int

    @property
    def memory_used_fraction(self) -> float:
        return self.memory_used_mib / self.memory_total_mib if self.memory_total_mib else 0.0


@dataclass(frozen=True, slots=True)
class NumaNode:
    id: int
    socket: int
    cpus: tuple[int, ...]
    memory_mib: int


@dataclass(frozen=True, slots=True, eq=False)
class NodeTopology:
    """GPUs by index, NUMA nodes, and `links[i][j]` between GPUs i and j (symmetric)."""

    model: str
    gpus: tuple[GpuDevice, ...]
    numa_nodes: tuple[NumaNode, ...]
    links: tuple[tuple[Link, ...], ...]
    machine: str = ""  # the reference machine this was matched to, "" for a flat topology
    # Derived in __post_init__: GPU index groups, each sorted, groups ordered by first index.
    # islands: joined by NVLink/NVSwitch; switches: by a PCIe switch or better (an NVSwitch
    # machine is one group); sockets: without crossing the inter-socket link.
    islands: tuple[tuple[int, ...], ...] = field(init=False)
    switches: tuple[tuple[int, ...], ...] = field(init=False)
    sockets: tuple[tuple[int, ...], ...] = field(init=False)
    numa_groups: tuple[tuple[int, ...], ...] = field(init=False)

    def __post_init__(self) -> None:
        _check(self)
        set_ = object.__setattr__
        set_(self, "islands", _components(self.links, LinkLevel.NVLINK))
        set_(self, "switches", _components(self.links, LinkLevel.PIX))
        set_(self, "sockets", _components(self.links, LinkLevel.PHB))
        by_numa: dict[int, list[int]] = {}
        for gpu in self.gpus:
            by_numa.setdefault(gpu.numa_node, []).append(gpu.index)
        set_(self, "numa_groups", tuple(tuple(g) for _, g in sorted(by_numa.items())))

    @property
    def gpu_count(self) -> int:
        return len(self.gpus)

    def level(self, a: int, b: int) -> LinkLevel:
        return self.links[a][b].level

    def healthy_indices(self) -> tuple[int, ...]:
        return tuple(g.index for g in self.gpus if g.healthy)


def _check(topology: NodeTopology) -> None:
    count = len(topology.gpus)
    if [g.index for g in topology.gpus] != list(range(count)):
        raise ValueError("GPU indices must be 0..n-1 in order")
    if len(topology.links) != count or any(len(row) != count for row in topology.links):
        raise ValueError(f"link matrix must be {count}x{count}")
    numa_ids = {n.id for n in topology.numa_nodes}
    for gpu in topology.gpus:
        if gpu.numa_node not in numa_ids:
            raise ValueError(f"GPU {gpu.index} is on unknown NUMA node {gpu.numa_node}")
    for i in range(count):
        if topology.links[i][i].level is not LinkLevel.SELF:
            raise ValueError(f"link[{i}][{i}] must be SELF")
        for j in range(i):
            if topology.links[i][j] != topology.links[j][i]:
                raise ValueError(f"link matrix is not symmetric at ({i}, {j})")


def _components(
    links: Sequence[Sequence[Link]], at_least: LinkLevel
) -> tuple[tuple[int, ...], ...]:
    """Connected groups of GPUs joined by links of `at_least` or better."""
    parent = list(range(len(links)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, row in enumerate(links):
        for j in range(i):
            if row[j].level >= at_least:
                parent[root(i)] = root(j)
    groups: dict[int, list[int]] = {}
    for i in range(len(links)):
        groups.setdefault(root(i), []).append(i)
    return tuple(sorted(tuple(g) for g in groups.values()))


def link_matrix(
    count: int, level_of: dict[tuple[int, int], Link], default: Link
) -> tuple[tuple[Link, ...], ...]:
    """A symmetric matrix from the links of some pairs (i < j); the rest get `default`."""
    own = Link(LinkLevel.SELF)
    rows = []
    for i in range(count):
        row = []
        for j in range(count):
            if i == j:
                row.append(own)
            else:
                row.append(level_of.get((min(i, j), max(i, j)), default))
        rows.append(tuple(row))
    return tuple(rows)


def flat_topology(
    model: str, count: int, unhealthy: frozenset[int] = frozenset(), memory_mib: int = 0
) -> NodeTopology:
    """All GPUs equal behind one host bridge on one NUMA node: what a node without a known
    machine gets (the trace's G2 or T4 nodes, or an unknown product label)."""
    gpus = tuple(
        GpuDevice(i, "", model, memory_mib, 0, "", healthy=i not in unhealthy) for i in range(count)
    )
    return NodeTopology(
        model=model,
        gpus=gpus,
        numa_nodes=(NumaNode(0, 0, (), 0),),
        links=link_matrix(count, {}, Link(LinkLevel.PHB)),
    )
