"""PodGroup status on the real API server: the live scheduler writes what `kubectl get
podgroup` should show, and nothing the object shows already (issue 17: API writes per gang)."""

from __future__ import annotations

from kubernetes_asyncio import client

from batchsched.bench.harness_phase import api_writes
from tests.builders import make_node
from tests.integration.control_plane import ControlPlane
from tests.integration.helpers import create_node, wait_for
from tests.integration.live import events_for, running_scheduler
from tests.integration.test_gangs_live import (
    NS,
    bound,
    create_group,
    create_members,
    group_status,
)

STATUS_WRITES = "PATCH podgroups/status"


async def test_a_gang_that_waits_for_room_then_starts_gets_one_status_write(
    api: client.ApiClient, control_plane: ControlPlane
) -> None:
    await create_node(api, make_node("status-gpu-0").gpus(8).cpu("64"))
    before = (await api_writes(api)).get(STATUS_WRITES, 0)
    async with running_scheduler(control_plane) as app:
        await create_group(api, "waits-for-room", 3)
        await create_members(api, "waits-for-room", range(3))  # 8 GPUs each: one node holds one

        async def refused() -> bool:
            events = await events_for(api, NS, "waits-for-room")
            return any(e["reason"] == "FailedScheduling" for e in events)

        await wait_for(refused, timeout=30, what="FailedScheduling on the PodGroup")
        # The round after the refusal computed Pending with nothing counted: what a PodGroup
        # without status shows, so it was not written.
        await wait_for(lambda: app.group_status.skipped >= 1, timeout=10, what="a status skipped")
        assert await group_status(api, "waits-for-room") == {}

        for i in (1, 2):
            await create_node(api, make_node(f"status-gpu-{i}").gpus(8).cpu("64"))

        async def scheduled() -> bool:
            status = await group_status(api, "waits-for-room")
            return status.get("phase") == "Scheduled" and status.get("scheduled") == 3

        await wait_for(scheduled, timeout=30, what="PodGroup status Scheduled, 3 scheduled")
        assert await bound(api, "waits-for-room") == 3
    after = (await api_writes(api)).get(STATUS_WRITES, 0)
    assert after - before == 1  # Scheduled; the Pending it started in was never written
