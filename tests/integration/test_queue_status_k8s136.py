"""The queue status on Kubernetes' own PodGroup (scheduling.k8s.io/v1alpha2, 1.36): the
condition batchsched.io/Queued beside kube-scheduler's PodGroupScheduled, which keeps its
own meaning. Runs in the 1.36 pass of the test command."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from kubernetes_asyncio import client

from batchsched.runtime.queue_status_writer import QUEUE_STATUS_ANNOTATION, QUEUED_CONDITION
from tests.builders import make_node, make_pod
from tests.integration.control_plane import ControlPlane
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
from tests.integration.live import running_scheduler
from tests.integration.test_queue_status_live import quicken

pytestmark = pytest.mark.k8s136


@pytest.fixture
async def wapi(control_plane: ControlPlane, api: client.ApiClient) -> AsyncIterator[Any]:
    skip_before_1_36(control_plane)
    await delete_workload_objects(api)
    yield api
    await delete_workload_objects(api)


async def test_an_upstream_pending_gang_is_queued_beside_podgroupscheduled_until_it_starts(
    control_plane: ControlPlane, wapi: Any
) -> None:
    await create_node(wapi, make_node("qs-up").gpus(2).cpu("64"))
    await create(wapi, "workloads", workload("qs-up", "workers", 2))
    await create(wapi, "podgroups", pod_group("qs-up", 2, "qs-up", "workers"))
    async with running_scheduler(control_plane) as app:
        quicken(app)
        for i in range(2):
            member = make_pod(f"qs-up-{i}").gpus(2).cpu("1")
            await create_pod(wapi, member.set("spec.schedulingGroup", {"podGroupName": "qs-up"}))

        async def queued() -> bool:
            found = condition(await read(wapi, "podgroups", "qs-up"), QUEUED_CONDITION)
            return found is not None and found["reason"] == "Unschedulable"

        await wait_for(queued, timeout=30, what="the Queued condition")
        group = await read(wapi, "podgroups", "qs-up")
        mine = condition(group, QUEUED_CONDITION)
        assert mine is not None and mine["status"] == "True"
        assert mine["message"].startswith("Unschedulable: position 1 of 1; ")
        assert mine.get("lastTransitionTime")
        theirs = condition(group, SCHEDULED)  # kube-scheduler's condition, as before
        assert theirs is not None and (theirs["status"], theirs["reason"]) == (
            "False",
            "Unschedulable",
        )
        notes = group["metadata"]["annotations"]
        assert notes[QUEUE_STATUS_ANNOTATION] == mine["message"]

        # Room for the second member: the gang starts, the condition turns False, the line goes.
        await create_node(wapi, make_node("qs-up-2").gpus(2).cpu("64"))

        async def left() -> bool:
            found = condition(await read(wapi, "podgroups", "qs-up"), QUEUED_CONDITION)
            return found is not None and found["status"] == "False"

        await wait_for(left, timeout=30, what="Queued=False once the gang started")
        group = await read(wapi, "podgroups", "qs-up")
        assert QUEUE_STATUS_ANNOTATION not in group["metadata"].get("annotations", {})
        mine = condition(group, QUEUED_CONDITION)
        assert mine is not None and mine["reason"] == "NotQueued"
