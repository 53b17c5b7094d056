"""DRA objects (resource.k8s.io/v1) shaped as NVIDIA's DRA driver publishes them, and the
scenarios that any scheduler of them must agree on.

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

The NodeResourceTopology for the DGX-like node is what our node agent publishes (gpu/nrt.py):
the same GPUs, joined to the slice's devices by `uuid` and by bus id (NVML's spelling there,
`nvml_bus_id` <-> `slice_bus_id`), with the NVLink islands the slice cannot express.

`VERDICT_SCENARIOS` is data: the claim each pod's template holds, and the verdict and device
count kube-scheduler v1.34 gives on the `baseline_cluster()` (tests/integration/
test_dra_kube_baseline.py holds kube-scheduler to it; batchsched's DRA allocator is held to
the same table).
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from gpu.machines import DGX_H100, PCIE_SERVER, build
from gpu.nrt import detail_json, nrt_object
from gpu.topology import GpuDevice, Link, LinkLevel, NodeTopology, link_matrix
from tests.builders import NodeBuilder, PodBuilder, make_pod
from tests.integration.kwok import kwok_node

Obj = dict[str, Any]

RESOURCE_API: Final = "resource.k8s.io/v1"
RESOURCE_PATH: Final = "/apis/resource.k8s.io/v1"
NRT_PATH: Final = "/apis/topology.node.k8s.io/v1alpha2/noderesourcetopologies"
DRIVER: Final = "gpu.nvidia.com"
GPU_CLASS: Final = "gpu.nvidia.com"
MIG_CLASS: Final = "mig.nvidia.com"
# Standard attributes (k8s.io/dynamic-resource-allocation/deviceattribute).
PCIE_ROOT: Final = "resource.kubernetes.io/pcieRoot"
PCI_BUS_ID: Final = "resource.kubernetes.io/pciBusID"
# The finalizer kube-scheduler puts on a claim it allocates; the resourceclaim controller
# removes it when it deallocates.
CLAIM_FINALIZER: Final = "resource.kubernetes.io/delete-protection"

# The driver versions NVML reports on the fixture nodes (R570, CUDA 12.8).
DRIVER_VERSION: Final = "570.158.01"
CUDA_DRIVER_VERSION: Final = "12.8"

# Which attributes a GPU device carries, by driver release (git tags of the driver repo):
# v25.3.x: minor and index (ints), pcieBusID (driver domain), pcieRoot;
# v25.8.x: minor and index dropped (commit 50d90da0, 2025-09-30);
# v25.12.0 (and main): the bus id moved to the standard resource.kubernetes.io/pciBusID.
DriverRelease = Literal["v25.3.2", "v25.8.1", "v25.12.0"]
LATEST_RELEASE: Final[DriverRelease] = "v25.12.0"

DGX_NODE: Final = "dgx-0"
PCIE_NODE: Final = "pcie-0"


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
    """One physical GPU of a fixture node: the facts slice, NRT and tests share."""

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


def dgx_gpus(node: str = DGX_NODE) -> tuple[Gpu, ...]:
    return tuple(
        Gpu(i, gpu_uuid(node, i), DGX_H100.gpu_bus[i], _DGX_ROOTS[i // 4], i // 4) for i in range(8)
    )


def pcie_gpus(node: str = PCIE_NODE, gpus: int = 4) -> tuple[Gpu, ...]:
    if not 1 <= gpus <= PCIE_SERVER.gpu_count:
        raise ValueError(f"a PCIe server fixture has 1 to {PCIE_SERVER.gpu_count} GPUs")
    return tuple(
        Gpu(i, gpu_uuid(node, i), PCIE_SERVER.gpu_bus[i], _PCIE_ROOTS[i // 2], i // 4)
        for i in range(gpus)
    )


# DeviceClasses (the driver's Helm chart, rendered for resource.k8s.io/v1)


def gpu_device_class() -> Obj:
    """deviceclass-gpu.yaml. `extendedResourceName` is alpha in 1.34 (DRAExtendedResource,
    off by default): the API server drops it unless that gate is on."""
    return _device_class(GPU_CLASS, "gpu", extended_resource="nvidia.com/gpu")


def mig_device_class() -> Obj:
    """deviceclass-mig.yaml."""
    return _device_class(MIG_CLASS, "mig")


def _device_class(name: str, kind: str, extended_resource: str = "") -> Obj:
    expression = f"device.driver == '{DRIVER}' && device.attributes['{DRIVER}'].type == '{kind}'"
    spec: Obj = {"selectors": [{"cel": {"expression": expression}}]}
    if extended_resource:
        spec["extendedResourceName"] = extended_resource
    return {
        "apiVersion": RESOURCE_API,
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": spec,
    }


# ResourceSlices


def dgx_h100_slice(
    node: str = DGX_NODE, release: DriverRelease = LATEST_RELEASE, node_uid: str = ""
) -> Obj:
    """The slice of a DGX-H100-like node: 8 x "NVIDIA H100 80GB HBM3", 4 per PCIe root."""
    return gpu_slice(node, dgx_gpus(node), H100_SXM, release, node_uid)


def pcie_server_slice(
    node: str = PCIE_NODE,
    gpus: int = 4,
    product: str = L40S.name,
    release: DriverRelease = LATEST_RELEASE,
    node_uid: str = "",
) -> Obj:
    """A PCIe server's slice: `gpus` of `product` (a key of PRODUCTS), two per PCIe root."""
    return gpu_slice(node, pcie_gpus(node, gpus), PRODUCTS[product], release, node_uid)


def gpu_slice(
    node: str,
    gpus: Sequence[Gpu],
    product: Product,
    release: DriverRelease = LATEST_RELEASE,
    node_uid: str = "",
) -> Obj:
    """One node's pool, as the kubelet plugin publishes it. With `node_uid` the slice is owned
    by the Node (the plugin's default), so the garbage collector removes it with the Node."""
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
    server's alphabet, so tests can address the slice."""
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
        "cudaComputeCapability": {"version": _semver(product.compute_capability)},
        "driverVersion": {"version": _semver(DRIVER_VERSION)},
        "cudaDriverVersion": {"version": _semver(CUDA_DRIVER_VERSION)},
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


def _semver(text: str) -> str:
    """Masterminds semver's String() of what it parses (it coerces by default): missing parts
    are 0 and leading zeros go, "12.8" -> "12.8.0", "570.158.01" -> "570.158.1"."""
    parts = [str(int(p)) for p in text.split(".")]
    return ".".join([*parts, "0", "0"][:3])


# NodeResourceTopology (our node agent, gpu/nrt.py)

# Two NVLink islands of 4 (an HGX H100 4-GPU board per socket: 6 NVLink4 lanes between each
# pair); the islands reach each other only across the sockets. Not a real DGX H100 (one
# NVSwitch domain of 8): the fixture wants islands for topology-aware choices to matter.
_ISLAND_LINK: Final = Link(LinkLevel.NVLINK, nvlinks=6, bandwidth_gbps=300)
HEARTBEAT: Final = "2026-01-01T00:00:00Z"


def dgx_topology(node: str = DGX_NODE) -> NodeTopology:
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


def dgx_nrt(node: str = DGX_NODE) -> Obj:
    """The NodeResourceTopology the agent publishes for the DGX-like node."""
    topology = dgx_topology(node)
    detail = detail_json(topology, [() for _ in topology.gpus], "nvml", DRIVER_VERSION)
    return nrt_object(node, topology, detail, heartbeat=HEARTBEAT)


# Claims, templates and pods


def cel(expression: str) -> Obj:
    return {"cel": {"expression": expression}}


def attribute(name: str) -> str:
    """A CEL reference to one of the driver's attributes: attribute("productName")."""
    return f"device.attributes['{DRIVER}'].{name}"


def product_is(name: str) -> Obj:
    return cel(f"{attribute('productName')} == '{name}'")


def exactly(
    count: int = 1,
    device_class: str = GPU_CLASS,
    selectors: Sequence[Obj] = (),
    mode: Literal["ExactCount", "All"] = "ExactCount",
) -> Obj:
    """An ExactDeviceRequest body (without its name)."""
    body: Obj = {"deviceClassName": device_class, "allocationMode": mode}
    if mode == "ExactCount":
        body["count"] = count
    if selectors:
        body["selectors"] = list(selectors)
    return body


def request(name: str = "gpus", **kw: Any) -> Obj:
    """A DeviceRequest {name, exactly}; keyword arguments go to `exactly`."""
    return {"name": name, "exactly": exactly(**kw)}


def first_available(name: str, *alternatives: tuple[str, Obj]) -> Obj:
    """A DeviceRequest with a prioritized list (DRAPrioritizedList, beta and on in 1.34)."""
    return {"name": name, "firstAvailable": [{"name": n, **body} for n, body in alternatives]}


def claim_spec(*requests: Obj, match_attribute: str = "", among: Sequence[str] = ()) -> Obj:
    """A ResourceClaimSpec; `match_attribute` makes every device of `among` (default: all
    requests) share that attribute's value."""
    devices: Obj = {"requests": list(requests) or [request()]}
    if match_attribute:
        constraint: Obj = {"matchAttribute": match_attribute}
        if among:
            constraint["requests"] = list(among)
        devices["constraints"] = [constraint]
    return {"devices": devices}


def resource_claim(name: str, spec: Obj, namespace: str = "default") -> Obj:
    return {
        "apiVersion": RESOURCE_API,
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def resource_claim_template(name: str, spec: Obj, namespace: str = "default") -> Obj:
    return {
        "apiVersion": RESOURCE_API,
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"spec": spec},
    }


@dataclass(frozen=True, slots=True)
class PodClaim:
    """One entry of a pod's spec.resourceClaims: a template's claim or a shared claim."""

    name: str
    template: str = ""
    claim: str = ""

    def entry(self) -> Obj:
        if bool(self.template) == bool(self.claim):
            raise ValueError("a pod claim names a template or a claim, exactly one")
        key = "resourceClaimTemplateName" if self.template else "resourceClaimName"
        return {"name": self.name, key: self.template or self.claim}


def claim_pod(
    name: str,
    claims: Sequence[PodClaim],
    scheduler_name: str,
    namespace: str = "default",
    cpu: str = "100m",
    builder: PodBuilder | None = None,
) -> PodBuilder:
    """A pod whose one container uses every claim, as a DRA user writes it. `builder` (e.g.
    kwok's succeeding_pod) brings annotations and the like."""
    container = {
        "name": "main",
        "image": "busybox",
        "resources": {"requests": {"cpu": cpu}, "claims": [{"name": c.name} for c in claims]},
    }
    return (
        (builder or make_pod(name, namespace))
        .scheduler(scheduler_name)
        .set("spec.containers", [container])
        .set("spec.resourceClaims", [c.entry() for c in claims])
    )


# The cluster every scenario runs on


def fixture_node(name: str, cpu: str, memory: str) -> NodeBuilder:
    """A KWOK node with no `nvidia.com/gpu` resource: its GPUs are DRA devices only."""
    return kwok_node(name, gpus=0, cpu=cpu, memory=memory)


def baseline_nodes() -> tuple[NodeBuilder, ...]:
    return (fixture_node(DGX_NODE, "224", "2Ti"), fixture_node(PCIE_NODE, "64", "512Gi"))


def baseline_cluster(release: DriverRelease = LATEST_RELEASE) -> tuple[Obj, ...]:
    """What every scenario sees besides the Nodes: the driver's two DeviceClasses, the DGX
    node's and the 4 x L40S server's slices, and the DGX node's NodeResourceTopology."""
    return (
        gpu_device_class(),
        mig_device_class(),
        dgx_h100_slice(DGX_NODE, release),
        pcie_server_slice(PCIE_NODE, 4, L40S.name, release),
        dgx_nrt(DGX_NODE),
    )


# Verdict scenarios


@dataclass(frozen=True, slots=True)
class VerdictScenario:
    """`pods` identical pods, each with a claim from one template holding `claim`.

    Scheduled one by one (kube-scheduler), `bound` of them are bound (all when `feasible`),
    each claim allocated `devices` devices, all on one of `nodes`; the rest stay Pending,
    unschedulable. Scheduled as one gang of `pods`, whole or nothing: `gang_bound`."""

    name: str  # a sentence, the test id
    key: str  # DNS-1123 label, the prefix of its objects' names
    claim: Obj
    feasible: bool
    devices: int = 0
    nodes: frozenset[str] = frozenset()
    pods: int = 1
    bound: int = field(default=-1)

    def __post_init__(self) -> None:
        if self.bound == -1:
            object.__setattr__(self, "bound", self.pods if self.feasible else 0)
        if self.feasible != (self.bound == self.pods):
            raise ValueError(f"{self.key}: feasible means every pod is bound")

    @property
    def gang_bound(self) -> int:
        return self.pods if self.feasible else 0

    def template(self, namespace: str = "default") -> Obj:
        return resource_claim_template(self.key, self.claim, namespace)

    def pod_names(self) -> tuple[str, ...]:
        return tuple(f"{self.key}-{i}" for i in range(self.pods))

    def pod_builders(self, scheduler_name: str, namespace: str = "default") -> list[PodBuilder]:
        claims = [PodClaim("gpus", template=self.key)]
        return [claim_pod(n, claims, scheduler_name, namespace) for n in self.pod_names()]


def _h100(**kw: Any) -> Obj:
    return request(selectors=[product_is(H100_SXM.name)], **kw)


BOTH: Final = frozenset({DGX_NODE, PCIE_NODE})
DGX: Final = frozenset({DGX_NODE})
PCIE: Final = frozenset({PCIE_NODE})

VERDICT_SCENARIOS: Final[tuple[VerdictScenario, ...]] = (
    VerdictScenario(
        "two GPUs of the driver's class fit on either node",
        "two-gpus",
        claim_spec(request(count=2)),
        feasible=True,
        devices=2,
        nodes=BOTH,
    ),
    VerdictScenario(
        "nine GPUs fit on no node: the largest has eight",
        "nine-gpus",
        claim_spec(request(count=9)),
        feasible=False,
    ),
    VerdictScenario(
        "a product no node has fits nowhere",
        "b200",
        claim_spec(request(count=1, selectors=[product_is("NVIDIA B200")])),
        feasible=False,
    ),
    VerdictScenario(
        "eight H100s fit only on the DGX node",
        "eight-h100",
        claim_spec(_h100(count=8)),
        feasible=True,
        devices=8,
        nodes=DGX,
    ),
    VerdictScenario(
        "allocation mode All takes every H100 of the DGX node",
        "all-h100",
        claim_spec(_h100(mode="All")),
        feasible=True,
        devices=8,
        nodes=DGX,
    ),
    VerdictScenario(
        "two GPUs of compute capability 8.9 or lower land on the L40S server",
        "ada",
        claim_spec(
            request(
                count=2,
                selectors=[
                    cel(f"{attribute('cudaComputeCapability')}.compareTo(semver('8.9.0')) <= 0")
                ],
            )
        ),
        feasible=True,
        devices=2,
        nodes=PCIE,
    ),
    VerdictScenario(
        "a GPU with at least 70Gi of memory is an H100",
        "big-memory",
        claim_spec(
            request(
                count=1,
                selectors=[
                    cel(f"device.capacity['{DRIVER}'].memory.compareTo(quantity('70Gi')) >= 0")
                ],
            )
        ),
        feasible=True,
        devices=1,
        nodes=DGX,
    ),
    VerdictScenario(
        "four GPUs under one PCIe root fit only on the DGX node",
        "four-one-root",
        claim_spec(request(count=4), match_attribute=PCIE_ROOT),
        feasible=True,
        devices=4,
        nodes=DGX,
    ),
    VerdictScenario(
        "five GPUs under one PCIe root fit nowhere: no root has more than four",
        "five-one-root",
        claim_spec(request(count=5), match_attribute=PCIE_ROOT),
        feasible=False,
    ),
    VerdictScenario(
        "two requests held to one PCIe root by a constraint across them",
        "two-requests-one-root",
        claim_spec(
            request("trainer", count=2),
            request("evaluator", count=2),
            match_attribute=PCIE_ROOT,
        ),
        feasible=True,
        devices=4,
        nodes=DGX,
    ),
    VerdictScenario(
        "a MIG device fits nowhere: no GPU is partitioned",
        "mig",
        claim_spec(request(count=1, device_class=MIG_CLASS)),
        feasible=False,
    ),
    VerdictScenario(
        "a prioritized list falls back from B200s to two H100s",
        "first-available",
        claim_spec(
            first_available(
                "gpus",
                ("b200", exactly(8, selectors=[product_is("NVIDIA B200")])),
                ("h100", exactly(2, selectors=[product_is(H100_SXM.name)])),
            )
        ),
        feasible=True,
        devices=2,
        nodes=DGX,
    ),
    VerdictScenario(
        "three pods of four GPUs under one root: two fit, one per root of the DGX node",
        "three-by-four",
        claim_spec(request(count=4), match_attribute=PCIE_ROOT),
        feasible=False,
        devices=4,
        nodes=DGX,
        pods=3,
        bound=2,
    ),
    VerdictScenario(
        "two pods of eight GPUs: one fits, the DGX node has eight",
        "two-by-eight",
        claim_spec(request(count=8)),
        feasible=False,
        devices=8,
        nodes=DGX,
        pods=2,
        bound=1,
    ),
)


def scenario(key: str) -> VerdictScenario:
    return next(s for s in VERDICT_SCENARIOS if s.key == key)


def claim_devices(claim: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(pool, device) of each allocated device of a claim, [] when unallocated."""
    allocation = (claim.get("status") or {}).get("allocation") or {}
    results = (allocation.get("devices") or {}).get("results") or []
    return [(r["pool"], r["device"]) for r in results]


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
