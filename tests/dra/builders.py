"""Small builders for DRA objects as the API serves them (resource.k8s.io/v1), for unit tests."""

from __future__ import annotations

from typing import Any

from batchsched.dra.nvidia import DRIVER as DRIVER
from batchsched.dra.nvidia import RESOURCE_API, basic_gpu, resource_slice
from batchsched.dra.nvidia import device_class as device_class
from batchsched.dra.parse import parse_device_class, parse_resource_claim, parse_resource_slice
from batchsched.snapshot import Snapshot
from tests.builders import NodeBuilder, PodBuilder, snapshot_of


def gpu(
    node: str,
    index: int,
    product: str = "NVIDIA H100 80GB HBM3",
    root: str | None = None,
    memory: str = "80Gi",
) -> dict[str, Any]:
    """A GPU as NVIDIA's driver publishes it; uuid GPU-<node>-<index> joins the agent's view."""
    more = {"index": {"int": index}, "cudaComputeCapability": {"version": "9.0.0"}}
    return basic_gpu(index, gpu_uuid(node, index), product, root, memory, more)


def gpu_uuid(node: str, index: int) -> str:
    return f"GPU-{node}-{index}"


def node_slice(
    node: str,
    devices: list[dict[str, Any]],
    generation: int = 1,
    slices: int = 1,
    name: str | None = None,
) -> dict[str, Any]:
    return resource_slice(
        node, devices, name or f"{node}-gpu", generation=generation, slices=slices
    )


def dgx_slice(node: str) -> dict[str, Any]:
    """8 H100s, GPUs 0-3 under one PCIe root and 4-7 under another."""
    return node_slice(node, [gpu(node, i, root=f"pci0000:{i // 4:02x}") for i in range(8)])


def exact(
    name: str, count: int = 1, cls: str = "gpu.nvidia.com", *selectors: str
) -> dict[str, Any]:
    body: dict[str, Any] = {"deviceClassName": cls, "count": count}
    if selectors:
        body["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    return {"name": name, "exactly": body}


def claim(
    name: str,
    *requests: dict[str, Any],
    constraints: list[dict[str, Any]] | None = None,
    namespace: str = "default",
    uid: str | None = None,
) -> dict[str, Any]:
    """A ResourceClaim with uid `uid` (None: uid-<name>; "": none, as a user writes one)."""
    metadata = {"name": name, "namespace": namespace}
    if uid != "":
        metadata["uid"] = uid or f"uid-{name}"
    return {
        "apiVersion": RESOURCE_API,
        "kind": "ResourceClaim",
        "metadata": metadata,
        "spec": claim_spec(*requests, constraints=constraints),
    }


def claim_template(
    name: str, *requests: dict[str, Any], namespace: str = "default"
) -> dict[str, Any]:
    return {
        "apiVersion": RESOURCE_API,
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"spec": claim_spec(*requests)},
    }


def claim_spec(
    *requests: dict[str, Any], constraints: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """A ResourceClaimSpec of `requests` (one GPU when none)."""
    devices: dict[str, Any] = {"requests": list(requests) or [exact("gpu")]}
    if constraints:
        devices["constraints"] = constraints
    return {"devices": devices}


def claiming(pod: PodBuilder, *claim_names: str) -> PodBuilder:
    """The pod uses existing claims (resourceClaimName)."""
    return pod.set(
        "spec.resourceClaims",
        [{"name": f"c{i}", "resourceClaimName": n} for i, n in enumerate(claim_names)],
    )


def dra_snapshot(
    nodes: list[NodeBuilder],
    slices: list[dict[str, Any]],
    claims: list[dict[str, Any]] = (),  # type: ignore[assignment]
    classes: list[dict[str, Any]] | None = None,
    pods: list[PodBuilder] = (),  # type: ignore[assignment]
) -> Snapshot:
    snapshot = snapshot_of(nodes, pods)
    for cls in classes if classes is not None else [device_class()]:
        snapshot.dra.set_class(parse_device_class(cls))
    for raw in slices:
        snapshot.dra.set_slice(parse_resource_slice(raw))
    for raw in claims:
        snapshot.dra.set_claim(parse_resource_claim(raw))
    return snapshot
