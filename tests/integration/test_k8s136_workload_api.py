"""Upstream workload-aware scheduling on the real Kubernetes 1.36 control plane
(`BATCHSCHED_K8S_VERSION=v1.36.3`; skipped on an older one, and only there).

What batchsched's parser of the v1alpha2 API will read, as the API server stores it (raw JSON
only): Workload pod-group templates, PodGroups, and pod `spec.schedulingGroup`. And the
baseline: kube-scheduler v1.36.3 with GangScheduling binds a gang whole or not at all, and says
so in the PodGroup's PodGroupScheduled condition.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from kubernetes_asyncio import client

from batchsched.kube.client import MERGE_PATCH, request_json
from tests.builders import make_node, make_pod
from tests.integration.control_plane import ControlPlane
from tests.integration.helpers import create_node, create_pod, wait_for
from tests.integration.k8s136_workload import (
    API,
    NS,
    PROTECTION_FINALIZER,
    SCHEDULED,
    condition,
    create,
    delete_workload_objects,
    pod_group,
    read,
    skip_before_1_36,
    workload,
)

pytestmark = pytest.mark.k8s136

KUBE_SCHEDULER = "default-scheduler"
ZONE = "topology.kubernetes.io/zone"


@pytest.fixture(scope="module")
def plane_1_36(control_plane: ControlPlane) -> ControlPlane:
    skip_before_1_36(control_plane)
    return control_plane


@pytest.fixture
async def wapi(plane_1_36: ControlPlane, api: client.ApiClient) -> AsyncIterator[client.ApiClient]:
    """`api` on a 1.36 control plane, without Workloads or PodGroups before and after."""
    await delete_workload_objects(api)
    yield api
    await delete_workload_objects(api)


@pytest.fixture(scope="module")
def kube_scheduler(plane_1_36: ControlPlane) -> Iterator[ControlPlane]:
    """kube-scheduler v1.36.3 (scripts/control-plane.sh scheduler-up, gang scheduling on) for
    this module only: it binds every pod whose schedulerName is default-scheduler."""
    plane_1_36.script("scheduler-up")
    try:
        yield plane_1_36
    finally:
        plane_1_36.script("scheduler-down")


# The API as served


async def test_discovery_serves_workloads_and_pod_groups(wapi: client.ApiClient) -> None:
    listing = await request_json(wapi, "GET", API)
    kinds = {r["name"]: r["kind"] for r in listing["resources"]}  # type: ignore[attr-defined]
    assert kinds == {
        "workloads": "Workload",
        "podgroups": "PodGroup",
        "podgroups/status": "PodGroup",
    }


async def test_a_workload_round_trips_its_templates(wapi: client.ApiClient) -> None:
    """Priority fields are kept as sent: no admission checks or fills them on a Workload."""
    sent = workload(
        "train",
        "workers",
        4,
        schedulingConstraints={"topology": [{"key": ZONE}]},
        priorityClassName="no-such-class",
        priority=1000,
        disruptionMode="PodGroup",
    )
    sent["spec"]["controllerRef"] = {"apiGroup": "batch", "kind": "Job", "name": "train"}
    sent["spec"]["podGroupTemplates"].append({"name": "driver", "schedulingPolicy": {"basic": {}}})
    await create(wapi, "workloads", sent)
    stored = await read(wapi, "workloads", "train")
    # A template without constraints comes back with them null: the field has no omitempty.
    driver: dict[str, Any] = {
        "name": "driver",
        "schedulingPolicy": {"basic": {}},
        "schedulingConstraints": None,
    }
    assert stored["spec"] == {
        "controllerRef": {"apiGroup": "batch", "kind": "Job", "name": "train"},
        "podGroupTemplates": [sent["spec"]["podGroupTemplates"][0], driver],
    }
    assert "status" not in stored


async def test_a_pod_group_round_trips_and_gets_the_protection_finalizer(
    wapi: client.ApiClient,
) -> None:
    await create(wapi, "workloads", workload("train", "workers", 3))
    sent = pod_group(
        "train-workers-0",
        3,
        workload_name="train",
        template="workers",
        schedulingConstraints={"topology": [{"key": ZONE}]},
        disruptionMode="PodGroup",
    )
    await create(wapi, "podgroups", sent)
    bare = await create(wapi, "podgroups", pod_group("bare", 2))
    stored = await read(wapi, "podgroups", "train-workers-0")
    # Priority admission fills priority (0: no class, no global default).
    assert stored["spec"] == {**sent["spec"], "priority": 0}
    assert stored["metadata"]["finalizers"] == [PROTECTION_FINALIZER]
    assert stored.get("status") in ({}, None)
    # Without a template: the reference is null, disruptionMode defaults to Pod.
    assert bare["spec"] == {
        "podGroupTemplateRef": None,
        "schedulingPolicy": {"gang": {"minCount": 2}},
        "disruptionMode": "Pod",
        "priority": 0,
    }


@pytest.fixture
async def priority_class(wapi: client.ApiClient) -> AsyncIterator[str]:
    path = "/apis/scheduling.k8s.io/v1/priorityclasses"
    body = {"metadata": {"name": "k8s136-gang-high"}, "value": 1000}
    await request_json(wapi, "POST", path, body=body)
    try:
        yield "k8s136-gang-high"
    finally:
        await request_json(wapi, "DELETE", f"{path}/k8s136-gang-high")


async def test_a_pod_group_gets_the_priority_of_its_class(
    wapi: client.ApiClient, priority_class: str
) -> None:
    created = await create(wapi, "podgroups", pod_group("g", 2, priorityClassName=priority_class))
    assert created["spec"]["priorityClassName"] == priority_class
    assert created["spec"]["priority"] == 1000


async def test_a_pod_group_status_condition_round_trips(wapi: client.ApiClient) -> None:
    await create(wapi, "podgroups", pod_group("g", 2))
    written = {
        "type": SCHEDULED,
        "status": "False",
        "reason": "Unschedulable",
        "message": "0/2 nodes are available: 2 Insufficient nvidia.com/gpu.",
        "lastTransitionTime": "2026-01-02T03:04:05Z",
    }
    path = f"{API}/namespaces/{NS}/podgroups/g/status"
    body = {"status": {"conditions": [written]}}
    await request_json(wapi, "PATCH", path, body=body, content_type=MERGE_PATCH)
    assert (await read(wapi, "podgroups", "g"))["status"] == {"conditions": [written]}


async def test_a_pod_keeps_its_scheduling_group(wapi: client.ApiClient) -> None:
    """The group need not exist when the pod is created."""
    builder = make_pod("member", NS).scheduler("gpu-scheduler").cpu("100m")
    builder.set("spec.schedulingGroup", {"podGroupName": "not-yet"})
    created = await create_pod(wapi, builder)
    stored = await request_json(wapi, "GET", f"/api/v1/namespaces/{NS}/pods/member")
    assert created["spec"]["schedulingGroup"] == {"podGroupName": "not-yet"}  # type: ignore[index]
    assert stored["spec"]["schedulingGroup"] == {"podGroupName": "not-yet"}  # type: ignore[index]


# kube-scheduler v1.36.3 with GangScheduling: the baseline


async def create_gang(api: client.ApiClient, name: str, members: int, gpus: int) -> None:
    await create(api, "workloads", workload(name, "workers", members))
    await create(api, "podgroups", pod_group(name, members, workload_name=name, template="workers"))
    for i in range(members):
        builder = make_pod(f"{name}-{i}", NS).scheduler(KUBE_SCHEDULER).cpu("100m").gpus(gpus)
        builder.set("spec.schedulingGroup", {"podGroupName": name})
        await create_pod(api, builder)


async def members(api: client.ApiClient, name: str, count: int) -> list[dict[str, Any]]:
    return [
        await request_json(api, "GET", f"/api/v1/namespaces/{NS}/pods/{name}-{i}")
        for i in range(count)
    ]


def refused(pod: dict[str, Any]) -> bool:
    """PodScheduled=False: the scheduler has been through a failed cycle for it."""
    return any(
        c["type"] == "PodScheduled" and c["status"] == "False"
        for c in pod.get("status", {}).get("conditions", [])
    )


@pytest.mark.usefixtures("kube_scheduler")
async def test_kube_scheduler_binds_a_gang_that_fits_whole(wapi: client.ApiClient) -> None:
    for node in ("g1", "g2"):
        await create_node(wapi, make_node(node).cpu("8").gpus(8).zone("z1"))
    await create_gang(wapi, "fits", 3, gpus=2)

    async def scheduled() -> bool:
        # kube-scheduler sets the condition when the gang is placed; the members' bindings
        # complete after it (asynchronously), so both are waited for.
        found = condition(await read(wapi, "podgroups", "fits"), SCHEDULED)
        bound = all(p["spec"].get("nodeName") for p in await members(wapi, "fits", 3))
        return found is not None and found["status"] == "True" and bound

    await wait_for(scheduled, timeout=30, what="PodGroupScheduled=True and every member bound")
    pods = await members(wapi, "fits", 3)
    assert all(p["spec"].get("nodeName") in ("g1", "g2") for p in pods)
    found = condition(await read(wapi, "podgroups", "fits"), SCHEDULED)
    assert found is not None and found["reason"] == "Scheduled"


@pytest.mark.usefixtures("kube_scheduler")
async def test_kube_scheduler_binds_nothing_of_a_gang_that_cannot_fit(
    wapi: client.ApiClient,
) -> None:
    for node in ("g3", "g4"):
        await create_node(wapi, make_node(node).cpu("8").gpus(8).zone("z1"))
    await create_gang(wapi, "big", 3, gpus=5)  # one per node: two fit, the third never does

    async def all_refused() -> bool:
        group = condition(await read(wapi, "podgroups", "big"), SCHEDULED)
        pods = await members(wapi, "big", 3)
        return group is not None and group["status"] == "False" and all(map(refused, pods))

    # The whole gang has been through a failed cycle; since only two can ever fit, none may
    # be bound now or later.
    await wait_for(all_refused, timeout=30, what="the gang refused, and every member")
    assert [p["spec"].get("nodeName") for p in await members(wapi, "big", 3)] == [None] * 3
    group = condition(await read(wapi, "podgroups", "big"), SCHEDULED)
    assert group is not None and group["reason"] == "Unschedulable"
