"""Upstream workload-aware scheduling objects (scheduling.k8s.io/v1alpha2, Kubernetes 1.36) as
raw API dicts, and the waits and clean-up the tests around them share.

scripts/control-plane.sh serves the API (GenericWorkload, runtime-config) from v1.36 on; on an
older control plane `skip_before_1_36` skips the test that asks for it, and only there."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from kubernetes_asyncio import client

from batchsched.kube.client import MERGE_PATCH, ApiError, request_json
from tests.integration.control_plane import ControlPlane

GROUP_VERSION = "scheduling.k8s.io/v1alpha2"
API = f"/apis/{GROUP_VERSION}"
NS = "default"
FIRST_MINOR = 36
# Stamped on every PodGroup by the PodGroupProtection admission plugin; kube-controller-
# manager's podgroup-protection-controller removes it once no pod uses the group.
PROTECTION_FINALIZER = "scheduling.k8s.io/podgroup-protection"
SCHEDULED = "PodGroupScheduled"


def skip_before_1_36(plane: ControlPlane) -> None:
    if plane.minor < FIRST_MINOR:
        pytest.skip(
            f"the control plane is Kubernetes {plane.version}; the v1alpha2 Workload API is "
            f"served from 1.{FIRST_MINOR} on (BATCHSCHED_K8S_VERSION=v1.36.3)"
        )


def workload(name: str, template: str, min_count: int, **extra: Any) -> dict[str, Any]:
    """A Workload with one gang template; `extra` goes into the template as it is."""
    pod_group_template: dict[str, Any] = {
        "name": template,
        "schedulingPolicy": {"gang": {"minCount": min_count}},
        **extra,
    }
    return {
        "apiVersion": GROUP_VERSION,
        "kind": "Workload",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"podGroupTemplates": [pod_group_template]},
    }


def pod_group(
    name: str, min_count: int, workload_name: str = "", template: str = "", **extra: Any
) -> dict[str, Any]:
    """A gang PodGroup, made from a Workload's template when `workload_name` is given."""
    spec: dict[str, Any] = {"schedulingPolicy": {"gang": {"minCount": min_count}}, **extra}
    if workload_name:
        spec["podGroupTemplateRef"] = {
            "workload": {"workloadName": workload_name, "podGroupTemplateName": template}
        }
    return {
        "apiVersion": GROUP_VERSION,
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": NS},
        "spec": spec,
    }


async def create(api: client.ApiClient, resource: str, body: Mapping[str, Any]) -> dict[str, Any]:
    return await request_json(api, "POST", f"{API}/namespaces/{NS}/{resource}", body=body)


async def read(api: client.ApiClient, resource: str, name: str) -> dict[str, Any]:
    return await request_json(api, "GET", f"{API}/namespaces/{NS}/{resource}/{name}")


def condition(obj: Mapping[str, Any], kind: str) -> dict[str, Any] | None:
    for entry in obj.get("status", {}).get("conditions", []):
        if entry["type"] == kind:
            return dict(entry)
    return None


async def delete_workload_objects(api: client.ApiClient) -> None:
    """Every PodGroup (its protection finalizer dropped: no controller may run to drop it) and
    every Workload in NS."""
    listing = await request_json(api, "GET", f"{API}/namespaces/{NS}/podgroups")
    for group in listing.get("items") or []:  # type: ignore[attr-defined]
        path = f"{API}/namespaces/{NS}/podgroups/{group['metadata']['name']}"
        if group["metadata"].get("finalizers"):
            patch = {"metadata": {"finalizers": None}}
            await _ignore_gone(api, "PATCH", path, body=patch, content_type=MERGE_PATCH)
        await _ignore_gone(api, "DELETE", path)
    await request_json(api, "DELETE", f"{API}/namespaces/{NS}/workloads")


async def _ignore_gone(api: client.ApiClient, method: str, path: str, **kwargs: Any) -> None:
    try:
        await request_json(api, method, path, **kwargs)
    except ApiError as err:
        if err.status != 404:
            raise
