"""DRA objects (resource.k8s.io/v1) shaped as NVIDIA's DRA driver publishes them, and the
scenarios that any scheduler of them must agree on.

The driver's DeviceClasses, ResourceSlices and devices, and the reference nodes that publish
them, are batchsched/dra/nvidia.py's, which documents where each shape comes from (the
driver at release v25.12.0 and main 22407113, May 2026); the NodeResourceTopology our node
agent publishes for the DGX-like node, and where the API server takes each object, are the
dra-e2e bench's (batchsched/bench/dra_e2e_objects.py). Here: the fixture cluster (a
DGX-like node and a 4 x L40S PCIe server), claims, templates and pods.

`VERDICT_SCENARIOS` is data: the claim each pod's template holds, and the verdict and device
count kube-scheduler v1.34 gives on the `baseline_cluster()` (tests/integration/
test_dra_kube_baseline.py holds kube-scheduler to it; batchsched's DRA allocator is held to
the same table).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from batchsched.bench.dra_e2e_objects import NRT_PATH as NRT_PATH
from batchsched.bench.dra_e2e_objects import RESOURCE_PATH as RESOURCE_PATH
from batchsched.bench.dra_e2e_objects import claim_devices as claim_devices
from batchsched.bench.dra_e2e_objects import collection_path as collection_path
from batchsched.bench.dra_e2e_objects import dgx_nrt as dgx_nrt
from batchsched.dra.nvidia import DRIVER as DRIVER
from batchsched.dra.nvidia import GPU_CLASS as GPU_CLASS
from batchsched.dra.nvidia import H100_SXM as H100_SXM
from batchsched.dra.nvidia import L40S, MIG_CLASS, RESOURCE_API, device_class, mig_device_class
from batchsched.dra.nvidia import LATEST_RELEASE as LATEST_RELEASE
from batchsched.dra.nvidia import PCI_BUS_ID as PCI_BUS_ID
from batchsched.dra.nvidia import PCIE_ROOT as PCIE_ROOT
from batchsched.dra.nvidia import DriverRelease as DriverRelease
from batchsched.dra.nvidia import dgx_gpus as dgx_gpus
from batchsched.dra.nvidia import dgx_h100_slice as dgx_h100_slice
from batchsched.dra.nvidia import nvml_bus_id as nvml_bus_id
from batchsched.dra.nvidia import pcie_gpus as pcie_gpus
from batchsched.dra.nvidia import pcie_server_slice as pcie_server_slice
from tests.builders import NodeBuilder, PodBuilder, make_pod
from tests.integration.kwok import kwok_node

Obj = dict[str, Any]

# The finalizer kube-scheduler puts on a claim it allocates; the resourceclaim controller
# removes it when it deallocates.
CLAIM_FINALIZER: Final = "resource.kubernetes.io/delete-protection"

DGX_NODE: Final = "dgx-0"
PCIE_NODE: Final = "pcie-0"


def gpu_device_class() -> Obj:
    """deviceclass-gpu.yaml with its `extendedResourceName`, which the API server drops
    unless DRAExtendedResource (alpha in 1.34, off by default) is on."""
    return device_class(extended_resource="nvidia.com/gpu")


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
