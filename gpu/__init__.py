"""GPU topology model: devices, links, NUMA, reference machines; GPU-set choice, share packing
and the FGD fragmentation measure. Pure: no NVML here (the node agent reads NVML)."""

from gpu.discovery import topology_for
from gpu.fragmentation import FragmentationModel, FragReport, node_fragmentation
from gpu.placement import GpuChoice, best_gpu_set, share_gpu
from gpu.topology import GpuDevice, Link, LinkLevel, MigPartition, NodeTopology, NumaNode
from gpu.workload import DEFAULT_WORKLOAD, PodShape, Workload, typical_workload

__all__ = [
    "DEFAULT_WORKLOAD",
    "FragReport",
    "FragmentationModel",
    "GpuChoice",
    "GpuDevice",
    "Link",
    "LinkLevel",
    "MigPartition",
    "NodeTopology",
    "NumaNode",
    "PodShape",
    "Workload",
    "best_gpu_set",
    "node_fragmentation",
    "share_gpu",
    "topology_for",
    "typical_workload",
]
