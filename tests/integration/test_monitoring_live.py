"""The gauges the dashboard and the alerts read (deploy/monitoring), from a scheduler
running against the real API server: GPUs per node, pending gangs and their age."""

from __future__ import annotations

from kubernetes_asyncio import client

from batchsched.runtime.app import App
from tests.builders import make_pod
from tests.integration.control_plane import ControlPlane
from tests.integration.helpers import create_pod, wait_for
from tests.integration.live import running_scheduler
from tests.integration.test_gangs_live import bound, create_group, create_members, gpu_nodes


def sample(app: App, name: str, **labels: str) -> float | None:
    return app.metrics.registry.get_sample_value(name, labels)


async def test_a_running_scheduler_reports_gpus_per_node_and_the_gang_that_waits(
    api: client.ApiClient, control_plane: ControlPlane
) -> None:
    await gpu_nodes(api, 2)
    async with running_scheduler(control_plane) as app:
        await create_pod(api, make_pod("lone").gpus(2).cpu("1"))
        await create_group(api, "toobig", 3)
        await create_members(api, "toobig", range(3))  # 24 GPUs on 16: never fits

        def allocated() -> float:
            labels = {"model": "unknown", "state": "allocated"}
            return sum(
                sample(app, "batchsched_node_gpus", node=f"gpu-{i}", **labels) or 0.0
                for i in range(2)
            )

        async def reported() -> bool:
            return allocated() == 2 and sample(app, "batchsched_gangs_pending") == 1

        await wait_for(reported, timeout=30, what="2 GPUs allocated and 1 gang pending")
        assert await bound(api, "toobig") == 0
        for i in range(2):
            labels = {"node": f"gpu-{i}", "model": "unknown", "state": "allocatable"}
            assert sample(app, "batchsched_node_gpus", **labels) == 8
        age = sample(app, "batchsched_gang_oldest_pending_seconds")
        assert age is not None and 0 <= age < 300
        text = app.metrics.render().decode()
        assert "batchsched_gangs_pending 1.0" in text


async def test_a_gang_placed_whole_is_timed_once_and_a_lone_pod_is_not_a_gang(
    api: client.ApiClient, control_plane: ControlPlane
) -> None:
    await gpu_nodes(api, 2)
    async with running_scheduler(control_plane) as app:
        await create_pod(api, make_pod("solo").gpus(1).cpu("1"))
        await create_group(api, "pair", 2)
        await create_members(api, "pair", range(2), gpus=4)
        await wait_for(lambda: _bound_is(api, "pair", 2), timeout=30, what="the pair bound")

        count = sample(app, "batchsched_gang_time_to_whole_seconds_count")
        total = sample(app, "batchsched_gang_time_to_whole_seconds_sum")
        assert count == 1
        assert total is not None and 0 <= total < 300
        await wait_for(lambda: sample(app, "batchsched_gangs_pending") == 0, what="no gang left")


async def _bound_is(api: client.ApiClient, gang: str, count: int) -> bool:
    return await bound(api, gang) == count
