"""A simulated cluster whose GPUs are Dynamic Resource Allocation devices, as NVIDIA's driver
publishes them.

`as_dra_cluster` takes nodes that offer `nvidia.com/gpu` (the trace's, say) and gives each one
the same GPUs as a ResourceSlice of driver `gpu.nvidia.com` instead: one pool named after the
node, devices `gpu-0`.. with the driver's attributes `type: gpu`, `uuid`, `productName`,
`pcieBusID` and the standard `resource.kubernetes.io/pcieRoot`, and `memory` capacity where
the GPU model knows it. The node no longer offers `nvidia.com/gpu` (a node serves one or the
other). Each node gets its GPU topology as measured topology, as the node agent publishes it
next to NVIDIA's slices: the allocator joins devices to it by PCI bus ID, so a claim's GPU set
is chosen by the same topology model as an `nvidia.com/gpu` pod's. GPUs a topology has no bus
ID for get one here (`0000:<index + 1>:00.0`), the same on every node of a kind, so nodes of
one kind keep sharing one topology object.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from batchsched.dra import nvidia
from batchsched.dra.objects import DeviceClass, ResourceSlice
from batchsched.dra.parse import parse_device_class, parse_resource_slice
from batchsched.model.node import NodeView
from batchsched.model.resources import NVIDIA_GPU
from gpu.discovery import topology_for
from gpu.topology import NodeTopology

# The DeviceClass NVIDIA's chart installs for whole GPUs; the simulator counts its devices as
# the cluster's GPUs.
GPU_DEVICE_CLASS: Final = nvidia.GPU_CLASS
_UUIDS: Final = uuid.UUID("6ba7b811-9dad-11d1-80b4-00c04fd430c8")  # uuid.NAMESPACE_URL


@dataclass(frozen=True)
class DraNodes:
    nodes: list[NodeView]  # without nvidia.com/gpu
    slices: list[ResourceSlice]
    topologies: dict[str, NodeTopology]  # node name -> its GPUs, as the agent would report


def gpu_device_class() -> DeviceClass:
    """NVIDIA's `gpu.nvidia.com` DeviceClass: every device of its driver of type gpu."""
    return parse_device_class(nvidia.device_class(GPU_DEVICE_CLASS))


def as_dra_cluster(nodes: Sequence[NodeView]) -> DraNodes:
    """The nodes with their `nvidia.com/gpu` published as DRA devices instead."""
    joinable: dict[int, NodeTopology] = {}  # by id of the label-derived topology
    out = DraNodes([], [], {})
    for node in nodes:
        if node.allocatable.scalar.get(NVIDIA_GPU, 0) <= 0:
            out.nodes.append(node)
            continue
        derived = topology_for(node)
        topology = joinable.get(id(derived))
        if topology is None:
            topology = joinable[id(derived)] = with_bus_ids(derived)
        scalar = {k: v for k, v in node.allocatable.scalar.items() if k != NVIDIA_GPU}
        allocatable = dataclasses.replace(node.allocatable, scalar=scalar)
        out.nodes.append(dataclasses.replace(node, allocatable=allocatable))
        out.slices.append(gpu_slice(node.name, topology))
        out.topologies[node.name] = topology
    return out


def with_bus_ids(topology: NodeTopology) -> NodeTopology:
    """The topology with a PCI bus ID on every GPU (those it has are kept)."""
    if all(g.pci_bus_id for g in topology.gpus):
        return topology
    gpus = tuple(
        g if g.pci_bus_id else dataclasses.replace(g, pci_bus_id=f"0000:{g.index + 1:02x}:00.0")
        for g in topology.gpus
    )
    return NodeTopology(topology.model, gpus, topology.numa_nodes, topology.links, topology.machine)


def gpu_slice(node_name: str, topology: NodeTopology) -> ResourceSlice:
    """The slice NVIDIA's kubelet plugin publishes for the node's GPUs (healthy or not: the
    driver publishes what NVML lists)."""
    root_of = {i: n for n, group in enumerate(topology.sockets) for i in group}
    devices = [
        nvidia.basic_gpu(
            gpu.index,
            f"GPU-{uuid.uuid5(_UUIDS, f'{node_name}/{gpu.index}')}",
            gpu.model.replace("-", " "),
            f"pci{root_of.get(gpu.index, 0):04x}:00",
            f"{gpu.memory_mib}Mi" if gpu.memory_mib else None,
            {"pcieBusID": {"string": gpu.pci_bus_id}},
        )
        for gpu in topology.gpus
    ]
    return parse_resource_slice(
        nvidia.resource_slice(node_name, devices, f"{node_name}-{nvidia.DRIVER}")
    )
