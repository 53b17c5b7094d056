"""A pod with a DRA claim (resource.k8s.io/v1, served by the v1.34 API server) that no node's
devices can satisfy (a DeviceClass and a claim, but no ResourceSlice) is left unbound by the
live scheduler, with PodScheduled=False and a FailedScheduling Event saying why, while a pod
without claims beside it binds; the claim stays unallocated (DynamicResources)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from kubernetes_asyncio import client

from batchsched.kube.client import request_json
from batchsched.plugins.dynamic_resources import NO_DEVICES
from tests.builders import PodBuilder, make_node, make_pod
from tests.integration.conftest import ignore_gone
from tests.integration.control_plane import ControlPlane
from tests.integration.helpers import create_node, create_pod, wait_for
from tests.integration.live import events_for, node_of, pod, running_scheduler

NS = "default"
RESOURCE = "/apis/resource.k8s.io/v1"
DEVICE_CLASS = "gpu.example.com"
CLAIM = "shared-gpu"


def device_class() -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": DEVICE_CLASS},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DEVICE_CLASS}"'}}]},
    }


def resource_claim() -> dict[str, Any]:
    request = {"deviceClassName": DEVICE_CLASS, "allocationMode": "ExactCount", "count": 1}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": CLAIM, "namespace": NS},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": request}]}},
    }


def claiming_pod() -> PodBuilder:
    """A pod whose container uses the claim, as a DRA user writes it."""
    container = {
        "name": "main",
        "image": "busybox",
        "resources": {"requests": {"cpu": "100m"}, "claims": [{"name": "gpu"}]},
    }
    return (
        make_pod("dra")
        .set("spec.containers", [container])
        .set("spec.resourceClaims", [{"name": "gpu", "resourceClaimName": CLAIM}])
    )


@pytest.fixture
async def claim(api: client.ApiClient) -> AsyncIterator[dict[str, Any]]:
    """A DeviceClass and a pre-created ResourceClaim, removed afterwards (the `api` fixture
    empties only Nodes, Pods and PodGroups)."""
    claims = f"{RESOURCE}/namespaces/{NS}/resourceclaims"
    await request_json(api, "POST", f"{RESOURCE}/deviceclasses", body=device_class())
    try:
        created = await request_json(api, "POST", claims, body=resource_claim())
        assert isinstance(created, dict)
        yield created
    finally:
        await ignore_gone(request_json(api, "DELETE", f"{claims}/{CLAIM}"))
        await ignore_gone(request_json(api, "DELETE", f"{RESOURCE}/deviceclasses/{DEVICE_CLASS}"))


def scheduled_condition(body: dict[str, Any]) -> dict[str, Any] | None:
    conditions = body.get("status", {}).get("conditions") or []
    return next((c for c in conditions if c.get("type") == "PodScheduled"), None)


async def test_a_pod_with_a_resource_claim_stays_unbound_with_the_reason(
    api: client.ApiClient, control_plane: ControlPlane, claim: dict[str, Any]
) -> None:
    await create_node(api, make_node("n1").cpu("8"))
    expected = f"0/1 nodes are available: 1 {NO_DEVICES}."
    async with running_scheduler(control_plane) as app:
        await create_pod(api, claiming_pod())
        await create_pod(api, make_pod("plain").cpu("100m"))

        async def refused() -> bool:
            condition = scheduled_condition(await pod(api, NS, "dra"))
            return condition is not None and condition.get("status") == "False"

        await wait_for(refused, timeout=20, what="PodScheduled=False on the claiming pod")

        async def plain_bound() -> bool:
            return bool(await node_of(api, NS, "plain"))

        await wait_for(plain_bound, timeout=20, what="the pod without claims bound")
        condition = scheduled_condition(await pod(api, NS, "dra"))
        assert condition is not None
        assert (condition["reason"], condition["message"]) == ("Unschedulable", expected)

        async def failed_event() -> bool:
            events = await events_for(api, NS, "dra")
            return any(e.get("reason") == "FailedScheduling" for e in events)

        await wait_for(failed_event, timeout=20, what="FailedScheduling event")
        event = next(
            e for e in await events_for(api, NS, "dra") if e["reason"] == "FailedScheduling"
        )
        assert (event["type"], event["note"]) == ("Warning", expected)
        # Still unbound after the pod beside it was bound: the loop ran on and refused it.
        assert await node_of(api, NS, "dra") == ""
        assert app.scheduler.counts.bound == 1
    stored = await request_json(api, "GET", f"{RESOURCE}/namespaces/{NS}/resourceclaims/{CLAIM}")
    assert isinstance(stored, dict)
    status = stored.get("status") or {}
    assert isinstance(status, dict)
    assert not status.get("allocation") and not status.get("reservedFor")  # nobody allocated it
