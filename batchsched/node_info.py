"""A node and the pods counted on it, as the cycle's snapshot holds them (`Snapshot` in
batchsched.snapshot places and removes pods; plugins only read).

GPU nodes carry a `GpuLedger`: free milli-GPU per GPU and the GPUs each pod holds.
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import count
from typing import Final

from batchsched.model.affinity import HostPort
from batchsched.model.node import NodeView
from batchsched.model.pod import PodView
from batchsched.model.resources import Resources
from gpu.discovery import topology_for
from gpu.ledger import GpuLedger
from gpu.topology import MILLI_PER_GPU, NodeTopology

# Every change to any node takes a fresh number: plugins cache per-node results by it.
_GENERATIONS: Final = count(1)


def ledger_for(node: NodeView, measured: NodeTopology | None = None) -> GpuLedger | None:
    # The node agent's measured topology, where there is one, replaces the label-derived one.
    topology = measured if measured is not None else topology_for(node)
    return GpuLedger(topology) if topology.gpus else None


def gpu_host(info: NodeInfo) -> tuple[str, int, int, int] | None:
    """What a GPU node offers a pod shape: (GPU model, allocatable milli-cpu, allocatable
    memory, healthy GPUs), the fields of gpu/workload_estimate.py's Host; None without GPUs.
    Nodes are counted by it (the capacity supply) and the snapshot tells when it changed."""
    ledger = info.gpu
    if ledger is None:
        return None
    gpus = ledger.capacity_milli // MILLI_PER_GPU  # MILLI_PER_GPU per healthy GPU, 0 per sick
    return (ledger.model, info.alloc_milli_cpu, info.alloc_memory, gpus)


class NodeInfo:
    """A node and the pods counted on it. Plugins read it and never change it."""

    __slots__ = (
        "alloc_ephemeral",
        "alloc_memory",
        "alloc_milli_cpu",
        "alloc_pods",
        "alloc_scalar",
        "changes",
        "generation",
        "gpu",
        "name",
        "node",
        "nz_memory",
        "nz_milli_cpu",
        "pods",
        "pods_with_affinity",
        "pods_with_required_anti_affinity",
        "req_ephemeral",
        "req_memory",
        "req_milli_cpu",
        "req_scalar",
        "used_ports",
    )

    def __init__(self, node: NodeView, measured: NodeTopology | None = None) -> None:
        self.node = node
        self.name = node.name
        alloc = node.allocatable
        self.alloc_milli_cpu = alloc.milli_cpu
        self.alloc_memory = alloc.memory
        self.alloc_ephemeral = alloc.ephemeral_storage
        self.alloc_pods = alloc.pods
        self.alloc_scalar: Mapping[str, int] = alloc.scalar
        self.pods: dict[str, PodView] = {}
        self.req_milli_cpu = 0
        self.req_memory = 0
        self.req_ephemeral = 0
        self.req_scalar: dict[str, int] = {}
        self.nz_milli_cpu = 0
        self.nz_memory = 0
        self.used_ports: list[HostPort] = []
        self.pods_with_affinity = 0
        self.pods_with_required_anti_affinity = 0
        self.gpu = ledger_for(node, measured)
        self.generation = next(_GENERATIONS)
        # The snapshot's change log (Snapshot.changed_since): each new generation is told.
        self.changes: list[NodeInfo] | None = None

    def mark_changed(self) -> None:
        """A fresh generation: whatever a plugin cached for this node is stale."""
        self.generation = next(_GENERATIONS)
        if self.changes is not None:
            self.changes.append(self)

    @property
    def requested(self) -> Resources:
        return Resources(
            self.req_milli_cpu,
            self.req_memory,
            self.req_ephemeral,
            len(self.pods),
            dict(self.req_scalar),
        )

    @property
    def free(self) -> Resources:
        return self.node.allocatable - self.requested

    def _account(self, pod: PodView, sign: int) -> None:
        req = pod.requests
        self.req_milli_cpu += sign * req.milli_cpu
        self.req_memory += sign * req.memory
        self.req_ephemeral += sign * req.ephemeral_storage
        for name, amount in req.scalar.items():
            left = self.req_scalar.get(name, 0) + sign * amount
            if left:
                self.req_scalar[name] = left
            else:
                self.req_scalar.pop(name, None)
        self.nz_milli_cpu += sign * pod.non_zero_milli_cpu
        self.nz_memory += sign * pod.non_zero_memory
        if pod.pod_affinity is not None or pod.pod_anti_affinity is not None:
            self.pods_with_affinity += sign
        if pod.pod_anti_affinity is not None and pod.pod_anti_affinity.required:
            self.pods_with_required_anti_affinity += sign

    def add(self, pod: PodView) -> None:
        self.pods[pod.uid] = pod
        self._account(pod, 1)
        self.used_ports.extend(pod.host_ports)
        self.mark_changed()

    def remove(self, pod: PodView) -> None:
        del self.pods[pod.uid]
        self._account(pod, -1)
        for port in pod.host_ports:
            self.used_ports.remove(port)
        self.mark_changed()
