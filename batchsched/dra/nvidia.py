"""Purely computational: DRA objects (resource.k8s.io/v1) shaped as NVIDIA's DRA driver publishes
them, and the reference machines that publish them. The bench, the simulator and the tests all
build the driver's objects here.

The driver is NVIDIA/k8s-dra-driver-gpu (driver name `gpu.nvidia.com`; read at release
v25.12.0 and main 22407113, May 2026):

* DeviceClasses: deployments/helm/dra-driver-nvidia-gpu/templates/deviceclass-gpu.yaml and
  deviceclass-mig.yaml.
* ResourceSlices: its kubelet plugin (cmd/gpu-kubelet-plugin) publishes one pool per node,
  named after the node, in one slice (DynamicMIG off, the default; driver.go
  publishResources), through k8s.io/dynamic-resource-allocation's ResourceSlice controller:
  generation 1, resourceSliceCount 1, nodeName set, generateName "<node>-gpu.nvidia.com-"
  (the library at v0.34, which every release vendors), owned by the Node. Devices are
  named "gpu-<minor>" (deviceinfo.go CanonicalName) with the attributes of deviceinfo.go
  GetDevice/Attributes (which changed between releases, see `DriverRelease`) and capacity
  `memory` (bytes, BinarySI: partitions.go fullGpuCapacity).
  `pciBusID` is go-nvlib's GetPCIBusID: NVML's "00000000:1B:00.0" lowercased, the first
  four zeros of the domain dropped ("0000:1b:00.0"). `resource.kubernetes.io/pcieRoot` is
  the root complex "pci<domain>:<bus>" from sysfs (deviceattribute.GetPCIeRootAttribute...).

GPU specs are data (`Product`); whole reference machines are fixtures: the DGX-H100-like node
(`dgx_gpus`, `dgx_topology`: two NVLink islands of four, which the slice cannot express and
the NodeResourceTopology our node agent publishes can) and the PCIe server (`pcie_gpus`).
Slice devices join the agent's GPUs by `uuid` and by bus id (NVML's spelling there,
`nvml_bus_id` <-> `slice_bus_id`). The NodeResourceTopology object itself is built from
`dgx_topology` where it is sent (gpu/nrt.py is an adapter, layers above this one).
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Literal

from batchsched.dra.sets import PCIE_ROOT as PCIE_ROOT
from batchsched.dra.templates import RESOURCE_API as RESOURCE_API
from gpu.machines import DGX_H100, PCIE_SERVER, build
from gpu.topology import GpuDevice, Link, LinkLevel, NodeTopology, link_matrix

Obj = dict[str, object]
Attribute = Mapping[str, object]  # {"string": "gpu"}, {"int": 3}, {"version": "9.0.0"}

DRIVER: Final = "gpu.nvidia.com"
GPU_CLASS: Final = "gpu.nvidia.com"
MIG_CLASS: Final = "mig.nvidia.com"
# Standard attribute (k8s.io/dynamic-resource-allocation/deviceattribute), beside PCIE_ROOT.
PCI_BUS_ID: Final = "resource.kubernetes.io/pciBusID"

# The driver versions NVML reports on the fixture nodes (R570, CUDA 12.8).
DRIVER_VERSION: Final = "570.158.01"
CUDA_DRIVER_VERSION: Final = "12.8"

# Which attributes a GPU device carries, by driver release (git tags of the driver repo):
# v25.3.x: minor and index (ints), pcieBusID (driver domain), pcieRoot;
# v25.8.x: minor and index dropped (commit 50d90da0, 2025-09-30);
# v25.12.0 (and main): the bus id moved to the standard resource.kubernetes.io/pciBusID.
DriverRelease = Literal["v25.3.2", "v25.8.1", "v25.12.0"]
LATEST_RELEASE: Final[DriverRelease] = "v25.12.0"


def type_selector(kind: str) -> str:
    """The CEL selector of the chart's DeviceClasses: the driver's devices of type `kind`."""
    return f"device.driver == '{DRIVER}' && device.attributes['{DRIVER}'].type == '{kind}'"


GPU_SELECTOR: Final = type_selector("gpu")


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
L40S: Final = Product("NVIDIA L40S", "Ada Lovelace", "8.9", PCIE_SERVER.gpu_memory_mib)
L4: Final = Product("NVIDIA L4", "Ada Lovelace", "8.9", 23034)
PRODUCTS: Final = {p.name: p for p in (H100_SXM, L40S, L4)}


@dataclass(frozen=True, slots=True)
class Gpu:
    """One physical GPU of a reference node: the facts its slice device and its NRT entry
    share."""

    index: int  # NVML index; the minor number too on these nodes
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


def nvml_bus_id(bus_id: str) -> str:
    """The NVML spelling of a slice's bus id ("00000000:1B:00.0"), as our NRT holds it."""
    domain, _, rest = bus_id.partition(":")
    return f"{int(domain, 16):08X}:{rest.upper()}"


# GPUs 0-3 of the DGX-like node sit on socket 0 under one PCIe root complex, 4-7 on socket 1
# under another. Bus ids are a DGX H100's (gpu/machines.py).
_DGX_ROOTS: Final = ("pci0000:15", "pci0000:97")
# The PCIe server: GPUs in pairs under PCIe switches (gpu/machines.py PCIE_SERVER), each
# pair on its own root complex.
_PCIE_ROOTS: Final = ("pci0000:16", "pci0000:38", "pci0000:98", "pci0000:b8")


def dgx_gpus(node: str) -> tuple[Gpu, ...]:
    return tuple(
        Gpu(i, gpu_uuid(node, i), DGX_H100.gpu_bus[i], _DGX_ROOTS[i // 4], i // 4) for i in range(8)
    )


def pcie_gpus(node: str, gpus: int = 4) -> tuple[Gpu, ...]:
    if not 1 <= gpus <= PCIE_SERVER.gpu_count:
        raise ValueError(f"a PCIe server fixture has 1 to {PCIE_SERVER.gpu_count} GPUs")
    return tuple(
        Gpu(i, gpu_uuid(node, i), PCIE_SERVER.gpu_bus[i], _PCIE_ROOTS[i // 2], i // 4)
        for i in range(gpus)
    )


# DeviceClasses (the driver's Helm chart, rendered for resource.k8s.io/v1)


def device_class(name: str = GPU_CLASS, *selectors: str, extended_resource: str = "") -> Obj:
    """A DeviceClass; by default deviceclass-gpu.yaml without its `extendedResourceName`
    (alpha in 1.34, DRAExtendedResource: the API server drops it unless that gate is on)."""
    spec: Obj = {"selectors": [{"cel": {"expression": e}} for e in selectors or (GPU_SELECTOR,)]}
    if extended_resource:
        spec["extendedResourceName"] = extended_resource
    return {
        "apiVersion": RESOURCE_API,
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": spec,
    }


def mig_device_class() -> Obj:
    """deviceclass-mig.yaml."""
    return device_class(MIG_CLASS, type_selector("mig"))


# ResourceSlices


def resource_slice(
    node: str,
    devices: Sequence[Obj],
    name: str,
    *,
    node_uid: str = "",
    generation: int = 1,
    slices: int = 1,
) -> Obj:
    """One node's pool of the driver, named after the node, as the kubelet plugin publishes it.
    With `node_uid` the slice is owned by the Node (the plugin's default), so the garbage
    collector removes it with the Node."""
    metadata: Obj = {"name": name}
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
            "pool": {"name": node, "generation": generation, "resourceSliceCount": slices},
            "devices": list(devices),
        },
    }


def gpu_slice(
    node: str,
    gpus: Sequence[Gpu],
    product: Product,
    release: DriverRelease = LATEST_RELEASE,
    node_uid: str = "",
) -> Obj:
    """One node's pool of `gpus`, every device as `release` publishes it."""
    devices = [gpu_device(gpu, product, release) for gpu in gpus]
    return resource_slice(node, devices, slice_name(node), node_uid=node_uid)


def dgx_h100_slice(node: str, release: DriverRelease = LATEST_RELEASE, node_uid: str = "") -> Obj:
    """The slice of a DGX-H100-like node: 8 x "NVIDIA H100 80GB HBM3", 4 per PCIe root."""
    return gpu_slice(node, dgx_gpus(node), H100_SXM, release, node_uid)


def pcie_server_slice(
    node: str,
    gpus: int = 4,
    product: str = L40S.name,
    release: DriverRelease = LATEST_RELEASE,
    node_uid: str = "",
) -> Obj:
    """A PCIe server's slice: `gpus` of `product` (a key of PRODUCTS), two per PCIe root."""
    return gpu_slice(node, pcie_gpus(node, gpus), PRODUCTS[product], release, node_uid)


def slice_name(node: str) -> str:
    """generateName "<node>-gpu.nvidia.com-" plus a fixed 5-character suffix from the API
    server's alphabet, so the slice can be addressed."""
    alphabet = "bcdfghjklmnpqrstvwxz2456789"
    digest = hashlib.sha256(node.encode()).digest()
    return f"{node}-{DRIVER}-" + "".join(alphabet[b % len(alphabet)] for b in digest[:5])


# Devices


def gpu_device(gpu: Gpu, product: Product, release: DriverRelease = LATEST_RELEASE) -> Obj:
    """A GPU with every attribute `release` publishes."""
    more: dict[str, Attribute] = {
        "brand": {"string": product.brand},
        "architecture": {"string": product.architecture},
        "cudaComputeCapability": {"version": semver(product.compute_capability)},
        "driverVersion": {"version": semver(DRIVER_VERSION)},
        "cudaDriverVersion": {"version": semver(CUDA_DRIVER_VERSION)},
    }
    if release == "v25.3.2":
        more["minor"] = {"int": gpu.index}
        more["index"] = {"int": gpu.index}
    if release == "v25.12.0":
        more[PCI_BUS_ID] = {"string": gpu.bus_id}
    else:
        more["pcieBusID"] = {"string": gpu.bus_id}
    return basic_gpu(
        gpu.index, gpu.uuid, product.name, gpu.pcie_root, f"{product.memory_mib}Mi", more
    )


def basic_gpu(
    index: int,
    device_uuid: str,
    product: str | None = None,
    pcie_root: str | None = None,
    memory: str | None = None,
    more: Mapping[str, Attribute] | None = None,
) -> Obj:
    """Device "gpu-<index>" of type gpu with the attributes the scheduler reads: `uuid`, and
    `productName`, `more` and the standard pcieRoot where given (None: left out); capacity
    `memory` (a quantity) where given. `gpu_device` is one release's whole device; unit tests
    and the simulator publish less."""
    attributes: dict[str, Attribute] = {"type": {"string": "gpu"}, "uuid": {"string": device_uuid}}
    if product is not None:
        attributes["productName"] = {"string": product}
    attributes.update(more or {})
    if pcie_root is not None:
        attributes[PCIE_ROOT] = {"string": pcie_root}
    device: Obj = {"name": f"gpu-{index}", "attributes": attributes}
    if memory is not None:
        device["capacity"] = {"memory": {"value": memory}}
    return device


def semver(text: str) -> str:
    """Masterminds semver's String() of what it parses (it coerces by default): missing parts
    are 0 and leading zeros go, "12.8" -> "12.8.0", "570.158.01" -> "570.158.1"."""
    parts = [str(int(p)) for p in text.split(".")]
    return ".".join([*parts, "0", "0"][:3])


# The GPU topology our node agent reports for the DGX-like node

# Two NVLink islands of 4 (an HGX H100 4-GPU board per socket: 6 NVLink4 lanes between each
# pair); the islands reach each other only across the sockets. Not a real DGX H100 (one
# NVSwitch domain of 8): the fixture wants islands for topology-aware choices to matter.
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
        numa_nodes=build(DGX_H100).numa_nodes,  # a DGX H100's NUMA nodes and CPUs
        links=link_matrix(len(gpus), pairs, Link(LinkLevel.SYS)),
    )
