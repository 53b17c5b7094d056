"""DRA objects (resource.k8s.io/v1) shaped as NVIDIA's DRA driver publishes them, with the
NodeResourceTopology our node agent adds: the cluster of the `dra-e2e` bench.

The shapes are those of tests/integration/dra_objects.py, which documents where each comes
from (NVIDIA/k8s-dra-driver-gpu v25.12.0: the `gpu.nvidia.com` DeviceClass of its Helm chart;
one pool per node, named after the node, in one slice; devices "gpu-<minor>" with the
attributes of deviceinfo.go and capacity `memory`; `resource.kubernetes.io/pciBusID` in
go-nvlib's spelling). The node is DGX-H100-like with two NVLink islands of four GPUs (0-3 on
socket 0 under one PCIe root, 4-7 on socket 1 under another), which its NRT publishes and
the slice cannot express; GPUs join by `uuid` (and bus id).
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from batchsched.bench.e2e_cluster import BENCH_LABEL
from gpu.machines import DGX_H100, build
from gpu.nrt import detail_json, nrt_object
from gpu.topology import GpuDevice, Link, LinkLevel, NodeTopology, link_matrix

Obj = dict[str, Any]

RESOURCE_API: Final = "resource.k8s.io/v1"
RESOURCE_PATH: Final = "/apis/resource.k8s.io/v1"
NRT_PATH: Final = "/apis/topology.node.k8s.io/v1alpha2/noderesourcetopologies"
DRIVER: Final = "gpu.nvidia.com"
GPU_CLASS: Final = "gpu.nvidia.com"
PCIE_ROOT: Final = "resource.kubernetes.io/pcieRoot"
PCI_BUS_ID: Final = "resource.kubernetes.io/pciBusID"
DRIVER_VERSION: Final = "570.158.01"  # what NVML reports on the nodes (R570, CUDA 12.8)
CUDA_DRIVER_VERSION: Final = "12.8"
HEARTBEAT: Final = "2026-01-01T00:00:00Z"
KWOK_NODE_ANNOTATION: Final = "kwok.x-k8s.io/node"
# scripts/kwok/: a running pod with this annotation succeeds that long after it started.
COMPLETE_AFTER: Final = "batchsched.test/complete-after"

# Which attributes a GPU carries, by driver release (tests/integration/dra_objects.py).
DriverRelease = Literal["v25.3.2", "v25.8.1", "v25.12.0"]
LATEST_RELEASE: Final[DriverRelease] = "v25.12.0"


@dataclass(frozen=True, slots=True)
class Product:
    """What NVML reports for a GPU model (nvmlDeviceGetName, architecture, capability)."""

    name: str
    architecture: str
    compute_capability: str
    memory_mib: int
    brand: str = "Nvidia"

    @property
    def label(self) -> str:
        """GPU feature discovery's `nvidia.com/gpu.product` spelling, which gpu/ uses."""
        return "-".join(self.name.split())


H100_SXM: Final = Product("NVIDIA H100 80GB HBM3", "Hopper", "9.0", DGX_H100.gpu_memory_mib)


@dataclass(frozen=True, slots=True)
class Gpu:
    """One physical GPU of a node: the facts its slice device and its NRT entry share."""

    index: int  # NVML index; the minor number too
    uuid: str
    nvml_bus_id: str  # "00000000:1B:00.0", as NVML and our NRT spell it
    pcie_root: str  # "pci0000:15"
    numa_node: int

    @property
    def device(self) -> str:
        return f"gpu-{self.index}"

    @property
    def bus_id(self) -> str:
        return slice_bus_id(self.nvml_bus_id)


def gpu_uuid(node: str, index: int) -> str:
    """A deterministic GPU UUID, formatted as NVML formats them."""
    return f"GPU-{uuid.uuid5(uuid.NAMESPACE_URL, f'batchsched.test/{node}/gpu-{index}')}"


def slice_bus_id(nvml_bus_id: str) -> str:
    """go-nvlib's GetPCIBusID: lower case, a 32-bit domain cut to 16 ("0000:1b:00.0")."""
    return nvml_bus_id.lower().removeprefix("0000")


_DGX_ROOTS: Final = ("pci0000:15", "pci0000:97")


def dgx_gpus(node: str) -> tuple[Gpu, ...]:
    return tuple(
        Gpu(i, gpu_uuid(node, i), DGX_H100.gpu_bus[i], _DGX_ROOTS[i // 4], i // 4) for i in range(8)
    )


def gpu_device_class() -> Obj:
    """deviceclass-gpu.yaml (its alpha `extendedResourceName` left out: 1.34 drops it)."""
    expression = f"device.driver == '{DRIVER}' && device.attributes['{DRIVER}'].type == 'gpu'"
    return {
        "apiVersion": RESOURCE_API,
        "kind": "DeviceClass",
        "metadata": {"name": GPU_CLASS},
        "spec": {"selectors": [{"cel": {"expression": expression}}]},
    }


def gpu_slice(
    node: str,
    gpus: Sequence[Gpu],
    product: Product,
    release: DriverRelease = LATEST_RELEASE,
    node_uid: str = "",
) -> Obj:
    """One node's pool, as the kubelet plugin publishes it; with `node_uid` owned by the Node
    (the plugin's default), so the garbage collector removes it with the Node."""
    metadata: Obj = {"name": slice_name(node)}
    if node_uid:
        metadata["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Node", "name": node, "uid": node_uid, "controller": True}
        ]
    return {
        "apiVersion": RESOURCE_API,
        "kind": "ResourceSlice",
        "metadata": metadata,
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": [gpu_device(gpu, product, release) for gpu in gpus],
        },
    }


def slice_name(node: str) -> str:
    """generateName "<node>-gpu.nvidia.com-" plus a fixed 5-character suffix from the API
    server's alphabet, so the slice can be addressed."""
    alphabet = "bcdfghjklmnpqrstvwxz2456789"
    digest = hashlib.sha256(node.encode()).digest()
    return f"{node}-{DRIVER}-" + "".join(alphabet[b % len(alphabet)] for b in digest[:5])


def gpu_device(gpu: Gpu, product: Product, release: DriverRelease = LATEST_RELEASE) -> Obj:
    attributes: Obj = {
        "type": {"string": "gpu"},
        "uuid": {"string": gpu.uuid},
        "productName": {"string": product.name},
        "brand": {"string": product.brand},
        "architecture": {"string": product.architecture},
        "cudaComputeCapability": {"version": semver(product.compute_capability)},
        "driverVersion": {"version": semver(DRIVER_VERSION)},
        "cudaDriverVersion": {"version": semver(CUDA_DRIVER_VERSION)},
        PCIE_ROOT: {"string": gpu.pcie_root},
    }
    if release == "v25.3.2":
        attributes["minor"] = {"int": gpu.index}
        attributes["index"] = {"int": gpu.index}
    if release == "v25.12.0":
        attributes[PCI_BUS_ID] = {"string": gpu.bus_id}
    else:
        attributes["pcieBusID"] = {"string": gpu.bus_id}
    return {
        "name": gpu.device,
        "attributes": attributes,
        "capacity": {"memory": {"value": f"{product.memory_mib}Mi"}},
    }


def semver(text: str) -> str:
    """Masterminds semver's String() of what it parses: "12.8" -> "12.8.0"."""
    parts = [str(int(p)) for p in text.split(".")]
    return ".".join([*parts, "0", "0"][:3])


# Two NVLink islands of 4 (6 NVLink4 lanes between each pair of a socket's GPUs); the islands
# reach each other only across the sockets. Not a real DGX H100 (one NVSwitch domain of 8).
_ISLAND_LINK: Final = Link(LinkLevel.NVLINK, nvlinks=6, bandwidth_gbps=300)


def dgx_topology(node: str) -> NodeTopology:
    gpus = dgx_gpus(node)
    pairs = {
        (a.index, b.index): _ISLAND_LINK
        for a in gpus
        for b in gpus
        if a.index < b.index and a.numa_node == b.numa_node
    }
    return NodeTopology(
        model=H100_SXM.label,
        gpus=tuple(
            GpuDevice(
                index=g.index,
                uuid=g.uuid,
                model=H100_SXM.label,
                memory_mib=H100_SXM.memory_mib,
                numa_node=g.numa_node,
                pci_bus_id=g.nvml_bus_id,
            )
            for g in gpus
        ),
        numa_nodes=build(DGX_H100).numa_nodes,
        links=link_matrix(len(gpus), pairs, Link(LinkLevel.SYS)),
    )


def dgx_nrt(node: str, heartbeat: str = HEARTBEAT) -> Obj:
    """The NodeResourceTopology the agent publishes for a DGX-like node."""
    topology = dgx_topology(node)
    detail = detail_json(topology, [() for _ in topology.gpus], "nvml", DRIVER_VERSION)
    return nrt_object(node, topology, detail, heartbeat=heartbeat)


def dra_node(name: str) -> Obj:
    """A KWOK node with no `nvidia.com/gpu` resource: its GPUs are DRA devices only."""
    resources = {"cpu": "224", "memory": "2Ti", "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/hostname": name, BENCH_LABEL: "true"},
            "annotations": {KWOK_NODE_ANNOTATION: "fake", "node.alpha.kubernetes.io/ttl": "0"},
        },
        "status": {"capacity": resources, "allocatable": resources},
    }


def gpus_template(name: str, namespace: str, count: int) -> Obj:
    """A ResourceClaimTemplate of `count` GPUs of the driver's class, request "gpus"."""
    exactly = {"deviceClassName": GPU_CLASS, "allocationMode": "ExactCount", "count": count}
    return {
        "apiVersion": RESOURCE_API,
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpus", "exactly": exactly}]}}},
    }


def claim_pod(
    name: str, template: str, scheduler_name: str, runtime_s: float, cpu: str = "100m"
) -> Obj:
    """A pod whose container uses one claim from `template`, as a DRA user writes it, and
    that KWOK makes succeed `runtime_s` after it started."""
    container = {
        "name": "main",
        "image": "busybox",
        "resources": {"requests": {"cpu": cpu}, "claims": [{"name": "gpus"}]},
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "annotations": {COMPLETE_AFTER: f"{runtime_s:g}s"}},
        "spec": {
            "schedulerName": scheduler_name,
            "restartPolicy": "Never",
            "containers": [container],
            "resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": template}],
        },
    }


_PLURALS: Final = {
    "DeviceClass": "deviceclasses",
    "ResourceSlice": "resourceslices",
    "ResourceClaim": "resourceclaims",
    "ResourceClaimTemplate": "resourceclaimtemplates",
}


def collection_path(obj: Mapping[str, Any]) -> str:
    """Where to POST one of these objects."""
    if obj["kind"] == "NodeResourceTopology":
        return NRT_PATH
    plural = _PLURALS[obj["kind"]]
    namespace = obj["metadata"].get("namespace")
    return (
        f"{RESOURCE_PATH}/namespaces/{namespace}/{plural}"
        if namespace
        else f"{RESOURCE_PATH}/{plural}"
    )


def claim_devices(claim: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(pool, device) of each allocated device of a claim, [] when unallocated."""
    allocation = (claim.get("status") or {}).get("allocation") or {}
    results = (allocation.get("devices") or {}).get("results") or []
    return [(str(r["pool"]), str(r["device"])) for r in results]
