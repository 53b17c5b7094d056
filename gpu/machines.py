"""Reference machines as data: what a node with a known GPU product and count looks like.

Each machine is a table (GPU model and memory, the NUMA node, PCIe switch and bus id of each
GPU, the NUMA nodes' CPUs and memory, the GPU fabric); `build()` turns a table into a
`NodeTopology`. Links follow from the table: NVSwitch machines link every pair through the
switch; on PCIe machines two GPUs under one switch are PIX, under different switches of one
socket PXB, on the host bridge of one socket PHB, and on different sockets SYS.

The product names are the values NVIDIA's GPU feature discovery puts in the node label
`nvidia.com/gpu.product`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from gpu.topology import (
    GpuDevice,
    Link,
    LinkLevel,
    NodeTopology,
    NumaNode,
    link_matrix,
)

__all__ = [
    "DGX_A100",
    "DGX_H100",
    "L4_BOX",
    "PCIE_SERVER",
    "REFERENCE_MACHINES",
    "T4_BOX",
    "Machine",
    "build",
    "machine_for",
]


@dataclass(frozen=True, slots=True)
class Machine:
    name: str
    product: str
    gpu_memory_mib: int
    gpu_numa: tuple[int, ...]  # NUMA node of each GPU, by index
    gpu_switch: tuple[int | None, ...]  # PCIe switch of each GPU; None: on the host bridge
    gpu_bus: tuple[str, ...]
    numa: tuple[tuple[int, tuple[range, ...], int], ...]  # (socket, cpu ranges, memory MiB)
    nvswitch: Link | None = None  # every pair's link on an NVSwitch machine

    @property
    def gpu_count(self) -> int:
        return len(self.gpu_numa)


def _bus(*ids: str) -> tuple[str, ...]:
    return tuple(f"00000000:{i}:00.0" for i in ids)


DGX_A100: Final = Machine(
    name="DGX A100",
    product="NVIDIA-A100-SXM4-80GB",
    gpu_memory_mib=81920,
    gpu_numa=(0, 0, 0, 0, 1, 1, 1, 1),
    gpu_switch=(0, 0, 1, 1, 2, 2, 3, 3),
    gpu_bus=_bus("07", "0F", "47", "4E", "87", "90", "B7", "BD"),
    numa=(
        (0, (range(0, 64), range(128, 192)), 524288),
        (1, (range(64, 128), range(192, 256)), 524288),
    ),
    nvswitch=Link(LinkLevel.NVSWITCH, nvlinks=12, bandwidth_gbps=600),
)

DGX_H100: Final = Machine(
    name="DGX H100",
    product="NVIDIA-H100-80GB-HBM3",
    gpu_memory_mib=81559,
    gpu_numa=(0, 0, 0, 0, 1, 1, 1, 1),
    gpu_switch=(0, 1, 2, 3, 4, 5, 6, 7),
    gpu_bus=_bus("1B", "43", "52", "61", "9D", "C3", "D1", "DF"),
    numa=(
        (0, (range(0, 56), range(112, 168)), 1048576),
        (1, (range(56, 112), range(168, 224)), 1048576),
    ),
    nvswitch=Link(LinkLevel.NVSWITCH, nvlinks=18, bandwidth_gbps=900),
)

# Two PCIe switches per socket, two GPUs under each: GPUs 0-1 on switch A and 2-3 on switch B
# of socket 0, 4-5 and 6-7 on the two switches of socket 1.
PCIE_SERVER: Final = Machine(
    name="8-GPU PCIe server",
    product="NVIDIA-L40S",
    gpu_memory_mib=46068,
    gpu_numa=(0, 0, 0, 0, 1, 1, 1, 1),
    gpu_switch=(0, 0, 1, 1, 2, 2, 3, 3),
    gpu_bus=_bus("1A", "1B", "3D", "3E", "9C", "9D", "BC", "BD"),
    numa=(
        (0, (range(0, 32), range(64, 96)), 524288),
        (1, (range(32, 64), range(96, 128)), 524288),
    ),
)

L4_BOX: Final = Machine(
    name="4xL4 PCIe box",
    product="NVIDIA-L4",
    gpu_memory_mib=23034,
    gpu_numa=(0, 0, 0, 0),
    gpu_switch=(None, None, None, None),
    gpu_bus=_bus("01", "41", "81", "C1"),
    numa=((0, (range(0, 32),), 262144),),
)

T4_BOX: Final = Machine(
    name="2xT4 PCIe box",
    product="Tesla-T4",
    gpu_memory_mib=15360,
    gpu_numa=(0, 0),
    gpu_switch=(None, None),
    gpu_bus=_bus("3B", "D8"),
    numa=((0, (range(0, 16),), 131072),),
)

REFERENCE_MACHINES: Final = (DGX_A100, DGX_H100, PCIE_SERVER, L4_BOX, T4_BOX)
_BY_PRODUCT: Final = {(m.product, m.gpu_count): m for m in REFERENCE_MACHINES}


def machine_for(product: str, count: int) -> Machine | None:
    """The reference machine with this GPU product label and GPU count, if there is one."""
    return _BY_PRODUCT.get((product, count))


def build(machine: Machine, unhealthy: frozenset[int] = frozenset()) -> NodeTopology:
    numa_nodes = tuple(
        NumaNode(i, socket, tuple(cpu for r in ranges for cpu in r), memory)
        for i, (socket, ranges, memory) in enumerate(machine.numa)
    )
    gpus = tuple(
        GpuDevice(
            index=i,
            uuid="",
            model=machine.product,
            memory_mib=machine.gpu_memory_mib,
            numa_node=machine.gpu_numa[i],
            pci_bus_id=machine.gpu_bus[i],
            healthy=i not in unhealthy,
        )
        for i in range(machine.gpu_count)
    )
    return NodeTopology(
        model=machine.product,
        gpus=gpus,
        numa_nodes=numa_nodes,
        links=link_matrix(machine.gpu_count, _pairs(machine), Link(LinkLevel.SYS)),
        machine=machine.name,
    )


def _pairs(machine: Machine) -> dict[tuple[int, int], Link]:
    socket_of = [machine.numa[n][0] for n in machine.gpu_numa]
    links: dict[tuple[int, int], Link] = {}
    for i in range(machine.gpu_count):
        for j in range(i + 1, machine.gpu_count):
            if machine.nvswitch is not None:
                links[i, j] = machine.nvswitch
            elif socket_of[i] != socket_of[j]:
                continue  # SYS, the default
            elif machine.gpu_switch[i] is None or machine.gpu_switch[j] is None:
                links[i, j] = Link(LinkLevel.PHB)
            elif machine.gpu_switch[i] == machine.gpu_switch[j]:
                links[i, j] = Link(LinkLevel.PIX)
            else:
                links[i, j] = Link(LinkLevel.PXB)
    return links
