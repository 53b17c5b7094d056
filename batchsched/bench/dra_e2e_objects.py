"""The `dra-e2e` bench's cluster: KWOK nodes publishing NVIDIA's DRA driver's objects
(batchsched/dra/nvidia.py: v25.12.0's `gpu.nvidia.com` DeviceClass and DGX-H100-like slices)
with the NodeResourceTopology our agent adds, the bench's pods and templates, and where the
API server takes each.

The node is DGX-H100-like with two NVLink islands of four GPUs (0-3 on socket 0 under one
PCIe root, 4-7 on socket 1 under another), which its NRT publishes and the slice cannot
express; GPUs join by `uuid` (and bus id).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from batchsched.bench.e2e_cluster import node_body
from batchsched.dra.nvidia import DRIVER_VERSION, GPU_CLASS, RESOURCE_API, dgx_topology
from gpu.nrt import detail_json, nrt_object

Obj = dict[str, Any]

RESOURCE_PATH: Final = "/apis/resource.k8s.io/v1"
NRT_PATH: Final = "/apis/topology.node.k8s.io/v1alpha2/noderesourcetopologies"
HEARTBEAT: Final = "2026-01-01T00:00:00Z"
KWOK_NODE_ANNOTATION: Final = "kwok.x-k8s.io/node"
# scripts/kwok/: a running pod with this annotation succeeds that long after it started.
COMPLETE_AFTER: Final = "batchsched.test/complete-after"


def dgx_nrt(node: str, heartbeat: str = HEARTBEAT) -> Obj:
    """The NodeResourceTopology the agent publishes for a DGX-like node."""
    topology = dgx_topology(node)
    detail = detail_json(topology, [() for _ in topology.gpus], "nvml", DRIVER_VERSION)
    return nrt_object(node, topology, detail, heartbeat=heartbeat)


def dra_node(name: str) -> Obj:
    """A KWOK node with no `nvidia.com/gpu` resource: its GPUs are DRA devices only."""
    resources = {"cpu": "224", "memory": "2Ti", "pods": "110"}
    annotations = {KWOK_NODE_ANNOTATION: "fake", "node.alpha.kubernetes.io/ttl": "0"}
    return node_body(name, resources, annotations)


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
