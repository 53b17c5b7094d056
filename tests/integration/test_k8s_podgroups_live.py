"""batchsched with Kubernetes' own gang API (scheduling.k8s.io/v1alpha2, 1.36): Workload,
PodGroup and pods that name it in spec.schedulingGroup, on KWOK nodes. Status is the
PodGroupScheduled condition kube-scheduler 1.36 writes; a required topology constraint keeps
the gang in one domain. Runs in the 1.36 pass of the test command (skipped below 1.36)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from kubernetes_asyncio import client

from tests.builders import PodBuilder
from tests.integration.control_plane import ControlPlane
from tests.integration.gang_encodings import bound_count, pods_named
from tests.integration.helpers import create_node, create_pod, wait_for
from tests.integration.k8s136_workload import (
    SCHEDULED,
    condition,
    create,
    delete_workload_objects,
    pod_group,
    read,
    skip_before_1_36,
    workload,
)
from tests.integration.kwok import create_kwok_nodes, kwok_node, succeeding_pod
from tests.integration.live import running_scheduler

pytestmark = pytest.mark.k8s136

RACK = "topology.batchsched.io/rack"


@pytest.fixture
async def wapi(kwok_plane: ControlPlane, kwok_api: client.ApiClient) -> AsyncIterator[Any]:
    skip_before_1_36(kwok_plane)
    await delete_workload_objects(kwok_api)
    yield kwok_api
    await delete_workload_objects(kwok_api)


def member(group: str, index: int, gpus: int = 1, seconds: float = 600) -> PodBuilder:
    pod = succeeding_pod(f"{group}-{index}", seconds).gpus(gpus).cpu("1")
    return pod.set("spec.schedulingGroup", {"podGroupName": group})


async def gang_objects(api: Any, name: str, min_count: int, **template: Any) -> None:
    """A Workload with one template and a PodGroup made from it (the Workload first: the API
    server's PodGroupWorkloadExists admission wants it)."""
    await create(api, "workloads", workload(name, "workers", min_count, **template))
    await create(api, "podgroups", pod_group(name, min_count, name, "workers", **template))


async def scheduled(api: Any, name: str) -> dict[str, Any] | None:
    return condition(await read(api, "podgroups", name), SCHEDULED)


def names(group: str, count: int) -> list[str]:
    return [f"{group}-{i}" for i in range(count)]


async def test_an_upstream_gang_is_bound_whole_and_podgroupscheduled_turns_true(
    kwok_plane: ControlPlane, wapi: Any
) -> None:
    await create_kwok_nodes(wapi, 2, gpus=2, prefix="up")
    await gang_objects(wapi, "up", 3)
    async with running_scheduler(kwok_plane):
        for i in range(3):
            await create_pod(wapi, member("up", i))

        async def whole() -> bool:
            found = await scheduled(wapi, "up")
            bound = await bound_count(wapi, names("up", 3))
            return bound == 3 and found is not None and found["status"] == "True"

        await wait_for(whole, timeout=30, what="3 bound and PodGroupScheduled=True")
        found = await scheduled(wapi, "up")
        assert found is not None and found["reason"] == "Scheduled"
        assert found.get("lastTransitionTime")


async def test_an_upstream_gang_short_of_members_binds_none_and_says_it_waits(
    kwok_plane: ControlPlane, wapi: Any
) -> None:
    await create_kwok_nodes(wapi, 1, gpus=8, prefix="upshort")
    await gang_objects(wapi, "upshort", 3)
    async with running_scheduler(kwok_plane):
        for i in range(2):
            await create_pod(wapi, member("upshort", i))

        async def told() -> bool:
            found = await scheduled(wapi, "upshort")
            return found is not None and found["status"] == "False"

        await wait_for(told, timeout=30, what="PodGroupScheduled=False")
        found = await scheduled(wapi, "upshort")
        assert found is not None and found["reason"] == "Unschedulable"
        assert "waits for members: 2 of minMember 3" in found["message"]
        pods = await pods_named(wapi, names("upshort", 2))
        assert all(not p["spec"].get("nodeName") for p in pods.values())


async def test_an_upstream_gang_that_cannot_fit_binds_none_and_says_why(
    kwok_plane: ControlPlane, wapi: Any
) -> None:
    await create_kwok_nodes(wapi, 1, gpus=2, prefix="upbig")
    await gang_objects(wapi, "upbig", 2)
    async with running_scheduler(kwok_plane):
        for i in range(2):
            await create_pod(wapi, member("upbig", i, gpus=2))

        async def told() -> bool:
            found = await scheduled(wapi, "upbig")
            return found is not None and found["status"] == "False"

        await wait_for(told, timeout=30, what="PodGroupScheduled=False")
        found = await scheduled(wapi, "upbig")
        assert found is not None and found["reason"] == "Unschedulable"
        assert "needs" in found["message"] and "placed together" in found["message"]
        assert await bound_count(wapi, names("upbig", 2)) == 0


async def test_a_required_rack_constraint_keeps_the_gang_in_one_rack(
    kwok_plane: ControlPlane, wapi: Any
) -> None:
    """Racks r0 (3 nodes) and r1 (2 nodes), one 8-GPU member per node. r0 has a node in use:
    both racks have 2 free nodes, so spreading by score would be free to mix them; the
    constraint says one rack, for all 2 members."""
    layout = {"rk-a0": "r0", "rk-a1": "r0", "rk-a2": "r0", "rk-b0": "r1", "rk-b1": "r1"}
    for node, rack in layout.items():
        await create_node(wapi, kwok_node(node, gpus=8).label(RACK, rack))
    await create_pod(wapi, succeeding_pod("busy", 600).gpus(8).cpu("1").node("rk-a0"))
    constraint = {"schedulingConstraints": {"topology": [{"key": RACK}]}}
    await gang_objects(wapi, "uprack", 2, **constraint)
    async with running_scheduler(kwok_plane):
        for i in range(2):
            await create_pod(wapi, member("uprack", i, gpus=8))

        async def bound() -> bool:
            return await bound_count(wapi, names("uprack", 2)) == 2

        await wait_for(bound, timeout=30, what="the rack-bound gang bound")
        pods = await pods_named(wapi, names("uprack", 2))
        racks = {layout[p["spec"]["nodeName"]] for p in pods.values()}
        assert len(racks) == 1, pods
