"""The NodeResourceTopology object the node agent publishes, and the scheduler's parser of it.

Purely computational: the agent builds the object from a `NodeReading` with `nrt_object`; the
scheduler turns an object from the API into a `NodeTopology` with `parse_nrt`.

One object per node, cluster-scoped, named after the node (`topology.node.k8s.io/v1alpha2`,
the schema NFD's topology-updater writes). Its zones are the NUMA nodes (type "Node", named
"node-<id>") with their `cpu` and `nvidia.com/gpu` (capacity: GPUs there, allocatable: the
healthy ones, available: healthy and held by no pod the kubelet reports), and the NUMA
distances as costs. What the schema cannot hold (the link between every pair of GPUs, UUIDs,
bus ids, health and why, MIG) is one JSON document in the annotation
`batchsched.io/gpu-topology`, with a `version` (1) the parser checks. It changes only when the
GPUs do; the agent's heartbeat lives in its own annotation so a heartbeat alone never makes
the scheduler rebuild a node's GPU accounting. GPU load (utilisation and memory in use, which
GpuLoadAware scores by) rides with each write in `batchsched.io/gpu-load`, also apart from the
topology for the same reason; a load document the parser cannot read counts as no load (it is
advisory: the node's GPUs stay schedulable by their topology).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from batchsched.model.errors import InvalidObject
from gpu.nvml_model import HostNuma, cpu_list, parse_cpu_list
from gpu.topology import (
    GpuDevice,
    GpuLoad,
    Link,
    LinkLevel,
    MigPartition,
    NodeTopology,
    NumaNode,
)

__all__ = [
    "API_VERSION",
    "GPU_LOAD_ANNOTATION",
    "GPU_PODS_ANNOTATION",
    "GPU_TOPOLOGY_ANNOTATION",
    "HEARTBEAT_ANNOTATION",
    "KIND",
    "MeasuredTopology",
    "detail_json",
    "load_json",
    "nrt_object",
    "parse_nrt",
    "pods_json",
]

API_VERSION: Final = "topology.node.k8s.io/v1alpha2"
KIND: Final = "NodeResourceTopology"
GPU_TOPOLOGY_ANNOTATION: Final = "batchsched.io/gpu-topology"
HEARTBEAT_ANNOTATION: Final = "batchsched.io/heartbeat"
# Which GPUs each pod holds, from the kubelet's pod-resources API (only where it is mounted).
GPU_PODS_ANNOTATION: Final = "batchsched.io/gpu-pods"
GPU_LOAD_ANNOTATION: Final = "batchsched.io/gpu-load"
GPU_RESOURCE: Final = "nvidia.com/gpu"
FORMAT_VERSION: Final = 1
_LOCAL_DISTANCE: Final = 10  # what Linux reports for a NUMA node to itself
_REMOTE_DISTANCE: Final = 20


class _Detail(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, strict=True)


class MigDetail(_Detail):
    profile: str
    count: int = Field(ge=1)


class GpuDetail(_Detail):
    index: int = Field(ge=0)
    uuid: str
    model: str
    memory_mib: int = Field(alias="memoryMiB", ge=0)
    numa_node: int = Field(alias="numaNode", ge=0)
    pci_bus_id: str = Field(alias="pciBusId")
    healthy: bool
    reasons: tuple[str, ...] = ()
    mig: tuple[MigDetail, ...] = ()


class NumaDetail(_Detail):
    id: int = Field(ge=0)
    socket: int = Field(ge=0)
    cpus: str  # Linux cpulist, "0-55,112-167"
    memory_mib: int = Field(alias="memoryMiB", ge=0)


class LinkDetail(_Detail):
    gpus: tuple[int, int]  # (i, j), i < j
    level: Literal["SYS", "PHB", "PXB", "PIX", "NVLINK", "NVSWITCH"]
    nvlinks: int = Field(default=0, ge=0)
    bandwidth_gbps: int = Field(default=0, alias="bandwidthGBps", ge=0)


class TopologyDetail(_Detail):
    """The `batchsched.io/gpu-topology` document."""

    version: Literal[1]
    source: str  # "nvml", or "fake:<machine>" for an agent run with --fake
    driver: str
    model: str
    numa_nodes: tuple[NumaDetail, ...] = Field(alias="numaNodes")
    gpus: tuple[GpuDetail, ...]
    links: tuple[LinkDetail, ...]  # every pair i < j, once


@dataclass(frozen=True, slots=True)
class MeasuredTopology:
    """A parsed NRT object: `topology` None when it carries no GPU detail (e.g. written by
    NFD's topology-updater), and the scheduler keeps deriving that node's GPUs from labels."""

    node: str
    topology: NodeTopology | None
    heartbeat: str = ""
    load: tuple[GpuLoad, ...] | None = None  # None: not published (or unreadable)


# Building (the agent)


def detail_json(
    topology: NodeTopology, reasons: Sequence[Sequence[str]], source: str, driver: str
) -> str:
    """The annotation's JSON for a reading: `reasons[i]` says why GPU i is unhealthy."""
    detail = TopologyDetail(
        version=FORMAT_VERSION,
        source=source,
        driver=driver,
        model=topology.model,
        numaNodes=tuple(
            NumaDetail(id=n.id, socket=n.socket, cpus=cpu_list(n.cpus), memoryMiB=n.memory_mib)
            for n in topology.numa_nodes
        ),
        gpus=tuple(_gpu_detail(g, tuple(reasons[g.index])) for g in topology.gpus),
        links=tuple(
            LinkDetail(
                gpus=(i, j),
                level=topology.links[i][j].level.name,  # type: ignore[arg-type]
                nvlinks=topology.links[i][j].nvlinks,
                bandwidthGBps=topology.links[i][j].bandwidth_gbps,
            )
            for i in range(topology.gpu_count)
            for j in range(i + 1, topology.gpu_count)
        ),
    )
    return detail.model_dump_json(by_alias=True)


def pods_json(holders: Mapping[tuple[str, str], Sequence[int]]) -> str:
    """The `batchsched.io/gpu-pods` document: {"version": 1, "pods": [{"namespace", "name",
    "gpus": [indices]}]}, pods in name order."""
    pods = [
        {"namespace": namespace, "name": name, "gpus": list(gpus)}
        for (namespace, name), gpus in sorted(holders.items())
    ]
    return json.dumps({"version": FORMAT_VERSION, "pods": pods}, separators=(",", ":"))


class GpuLoadDetail(_Detail):
    index: int = Field(ge=0)
    utilization: int = Field(ge=0, le=100)
    memory_used_mib: int = Field(alias="memoryUsedMiB", ge=0)
    memory_total_mib: int = Field(alias="memoryTotalMiB", ge=0)


class LoadDetail(_Detail):
    version: Literal[1]
    gpus: tuple[GpuLoadDetail, ...]


def load_json(load: Sequence[GpuLoad]) -> str:
    """The `batchsched.io/gpu-load` document: {"version": 1, "gpus": [{"index", "utilization"
    (percent), "memoryUsedMiB", "memoryTotalMiB"}]}."""
    gpus = [
        {
            "index": g.index,
            "utilization": g.utilization_pct,
            "memoryUsedMiB": g.memory_used_mib,
            "memoryTotalMiB": g.memory_total_mib,
        }
        for g in load
    ]
    return json.dumps({"version": FORMAT_VERSION, "gpus": gpus}, separators=(",", ":"))


@lru_cache(maxsize=4096)
def parse_load(text: str) -> tuple[GpuLoad, ...] | None:
    """The load document's GPUs; None when it cannot be read."""
    try:
        detail = LoadDetail.model_validate_json(text)
    except ValidationError:
        return None
    return tuple(
        GpuLoad(g.index, g.utilization, g.memory_used_mib, g.memory_total_mib) for g in detail.gpus
    )


def _gpu_detail(gpu: GpuDevice, reasons: tuple[str, ...]) -> GpuDetail:
    return GpuDetail(
        index=gpu.index,
        uuid=gpu.uuid,
        model=gpu.model,
        memoryMiB=gpu.memory_mib,
        numaNode=gpu.numa_node,
        pciBusId=gpu.pci_bus_id,
        healthy=gpu.healthy,
        reasons=reasons,
        mig=tuple(MigDetail(profile=m.profile, count=m.count) for m in gpu.mig),
    )


def nrt_object(
    node_name: str,
    topology: NodeTopology,
    detail: str,
    *,
    heartbeat: str,
    host: Sequence[HostNuma] = (),
    gpus_in_use: frozenset[int] = frozenset(),
    policy: str = "none",
    scope: str = "container",
) -> dict[str, object]:
    """The whole object for a server-side apply (the agent owns every field it sets)."""
    distances = {h.id: h.distances for h in host}
    zones = [
        _zone(numa, topology, distances.get(numa.id, {}), gpus_in_use)
        for numa in topology.numa_nodes
    ]
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {
            "name": node_name,
            "annotations": {GPU_TOPOLOGY_ANNOTATION: detail, HEARTBEAT_ANNOTATION: heartbeat},
        },
        # Deprecated in v1alpha2 but still read by older consumers; kubelet's own spelling.
        "topologyPolicies": [_legacy_policy(policy, scope)],
        "attributes": [
            {"name": "topologyManagerPolicy", "value": policy},
            {"name": "topologyManagerScope", "value": scope},
        ],
        "zones": zones,
    }


def _zone(
    numa: NumaNode,
    topology: NodeTopology,
    distances: Mapping[int, int],
    gpus_in_use: frozenset[int],
) -> dict[str, object]:
    here = [g for g in topology.gpus if g.numa_node == numa.id]
    healthy = [g for g in here if g.healthy]
    free = [g for g in healthy if g.index not in gpus_in_use]
    resources: list[dict[str, object]] = [
        _resource("cpu", len(numa.cpus), len(numa.cpus), len(numa.cpus)),
        _resource(GPU_RESOURCE, len(here), len(healthy), len(free)),
    ]
    if numa.memory_mib:
        memory = f"{numa.memory_mib}Mi"
        resources.append(
            {"name": "memory", "capacity": memory, "allocatable": memory, "available": memory}
        )
    costs = [
        {
            "name": f"node-{other.id}",
            "value": distances.get(
                other.id, _LOCAL_DISTANCE if other.id == numa.id else _REMOTE_DISTANCE
            ),
        }
        for other in topology.numa_nodes
    ]
    return {"name": f"node-{numa.id}", "type": "Node", "resources": resources, "costs": costs}


def _resource(name: str, capacity: int, allocatable: int, available: int) -> dict[str, object]:
    return {"name": name, "capacity": capacity, "allocatable": allocatable, "available": available}


def _legacy_policy(policy: str, scope: str) -> str:
    names = {
        "single-numa-node": "SingleNUMANode",
        "restricted": "Restricted",
        "best-effort": "BestEffort",
    }
    if policy not in names:
        return "None"
    level = "PodLevel" if scope == "pod" else "ContainerLevel"
    return names[policy] + level


# Parsing (the scheduler)


def parse_nrt(raw: Mapping[str, object]) -> MeasuredTopology:
    """An NRT object from the API; `InvalidObject` (a ValueError) names the field and the
    reason when its name or its GPU detail is bad."""
    meta = raw.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    if not isinstance(meta, Mapping) or not isinstance(name, str) or not name:
        raise InvalidObject(KIND, "<unnamed>", "metadata.name", "required: the node's name")
    annotations = meta.get("annotations")
    annotations = annotations if isinstance(annotations, Mapping) else {}
    detail = annotations.get(GPU_TOPOLOGY_ANNOTATION)
    heartbeat = annotations.get(HEARTBEAT_ANNOTATION)
    heartbeat = heartbeat if isinstance(heartbeat, str) else ""  # informative only
    load_text = annotations.get(GPU_LOAD_ANNOTATION)
    load = parse_load(load_text) if isinstance(load_text, str) else None
    if detail is None:
        return MeasuredTopology(name, None, heartbeat, load)
    field = f"metadata.annotations[{GPU_TOPOLOGY_ANNOTATION}]"
    if not isinstance(detail, str):
        raise InvalidObject(KIND, name, field, "expected a string (a JSON document)")
    try:
        return MeasuredTopology(name, topology_from_detail(detail), heartbeat, load)
    except ValueError as err:
        raise InvalidObject(KIND, name, field, str(err)) from err


@lru_cache(maxsize=4096)
def topology_from_detail(text: str) -> NodeTopology:
    """The annotation's topology. Cached by text: a node whose GPUs did not change keeps the
    same topology object, which the snapshot compares by identity before rebuilding."""
    try:
        detail = TopologyDetail.model_validate_json(text)
    except ValidationError as err:
        raise ValueError(f"annotation {GPU_TOPOLOGY_ANNOTATION}: {_first_error(err)}") from None
    count = len(detail.gpus)
    pairs: dict[tuple[int, int], Link] = {}
    for link in detail.links:
        i, j = link.gpus
        if not 0 <= i < j < count:
            raise ValueError(f"link between GPUs {i} and {j} of {count}")
        if (i, j) in pairs:
            raise ValueError(f"link between GPUs {i} and {j} given twice")
        pairs[i, j] = Link(LinkLevel[link.level], link.nvlinks, link.bandwidth_gbps)
    if len(pairs) != count * (count - 1) // 2:
        raise ValueError(f"links cover {len(pairs)} of the {count * (count - 1) // 2} GPU pairs")
    own = Link(LinkLevel.SELF)
    links = tuple(
        tuple(own if i == j else pairs[min(i, j), max(i, j)] for j in range(count))
        for i in range(count)
    )
    return NodeTopology(
        model=detail.model,
        gpus=tuple(_device(g) for g in detail.gpus),
        numa_nodes=tuple(
            NumaNode(n.id, n.socket, parse_cpu_list(n.cpus), n.memory_mib)
            for n in detail.numa_nodes
        ),
        links=links,
    )  # NodeTopology checks indices, NUMA references and symmetry (ValueError)


def _device(gpu: GpuDetail) -> GpuDevice:
    return GpuDevice(
        index=gpu.index,
        uuid=gpu.uuid,
        model=gpu.model,
        memory_mib=gpu.memory_mib,
        numa_node=gpu.numa_node,
        pci_bus_id=gpu.pci_bus_id,
        healthy=gpu.healthy,
        mig=tuple(MigPartition(m.profile, m.count) for m in gpu.mig),
    )


def _first_error(err: ValidationError) -> str:
    first = err.errors()[0]
    where = ".".join(str(part) for part in first["loc"]) or "document"
    return f"{where}: {first['msg']} ({err.error_count()} error(s))"
