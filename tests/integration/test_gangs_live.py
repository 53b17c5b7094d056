"""Gangs on the real API server: whole or nothing, waiting for late members, timeouts,
no deadlock between two 60 % gangs, and a PodGroup deleted mid-wait."""

from __future__ import annotations

from typing import Any

from kubernetes_asyncio import client

from batchsched.kube.client import request_json
from batchsched.runtime.app import App
from tests.builders import make_node, make_pod
from tests.integration.control_plane import ControlPlane
from tests.integration.helpers import create_node, create_pod, wait_for
from tests.integration.live import events_for, running_scheduler

NS = "default"
GROUPS = f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{NS}/podgroups"


async def create_group(api: client.ApiClient, name: str, min_member: int, **spec: Any) -> None:
    body = {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"minMember": min_member, **spec},
    }
    await request_json(api, "POST", GROUPS, body=body)


async def create_members(api: client.ApiClient, gang: str, names: range, gpus: int = 8) -> None:
    # As a Job controller would create them: same template, the pod-group label.
    for i in names:
        await create_pod(
            api,
            make_pod(f"{gang}-{i}")
            .gpus(gpus)
            .cpu("1")
            .label("scheduling.x-k8s.io/pod-group", gang),
        )


async def bound(api: client.ApiClient, gang: str) -> int:
    pods = await client.CoreV1Api(api).list_namespaced_pod(
        NS, label_selector=f"scheduling.x-k8s.io/pod-group={gang}"
    )
    return sum(1 for p in pods.items if p.spec.node_name)


def held(app: App, gang: str) -> int:
    """Members the scheduler counts on nodes (bound, binding or reserved)."""
    return app.gangs.counted(f"{NS}/{gang}", app.cache.snapshot)


async def gpu_nodes(api: client.ApiClient, count: int) -> None:
    for i in range(count):
        await create_node(api, make_node(f"gpu-{i}").gpus(8).cpu("64"))


async def group_status(api: client.ApiClient, name: str) -> dict[str, Any]:
    body = await request_json(api, "GET", f"{GROUPS}/{name}")
    status = body.get("status")
    return status if isinstance(status, dict) else {}


async def test_a_podgroup_with_its_job_pods_binds_all_of_them_and_reports_scheduled(
    api: client.ApiClient, control_plane: ControlPlane
) -> None:
    await gpu_nodes(api, 4)
    async with running_scheduler(control_plane):
        await create_group(api, "train", 4)
        await create_members(api, "train", range(4))
        await wait_for(lambda: _equals(bound(api, "train"), 4), timeout=30, what="4 bound")

        async def scheduled() -> bool:
            status = await group_status(api, "train")
            return status.get("phase") == "Scheduled" and status.get("scheduled") == 4

        await wait_for(scheduled, timeout=20, what="PodGroup status Scheduled")


async def test_a_gang_that_cannot_fit_binds_none_and_gets_an_event(
    api: client.ApiClient, control_plane: ControlPlane
) -> None:
    await gpu_nodes(api, 2)
    async with running_scheduler(control_plane) as app:
        await create_group(api, "toobig", 3)
        await create_members(api, "toobig", range(3))

        expected = (
            "gang default/toobig needs 3 more pod(s) placed together (minMember 3, "
            "24 nvidia.com/gpu); 16 nvidia.com/gpu free on 2 node(s) that pass its filters"
        )

        async def explained() -> bool:
            events = await events_for(api, NS, "toobig")
            return any(
                e["reason"] == "FailedScheduling" and e["note"].startswith(expected) for e in events
            )

        await wait_for(explained, timeout=30, what="FailedScheduling on the PodGroup")
        assert await bound(api, "toobig") == 0 and held(app, "toobig") == 0


async def test_late_members_arrive_within_the_timeout_and_the_gang_completes(
    api: client.ApiClient, control_plane: ControlPlane
) -> None:
    await gpu_nodes(api, 3)
    async with running_scheduler(control_plane) as app:
        await create_group(api, "late", 3, scheduleTimeoutSeconds=60)
        await create_members(api, "late", range(2))
        await wait_for(lambda: held(app, "late") == 2, timeout=30, what="2 reserved")
        assert await bound(api, "late") == 0, "nothing binds before the quorum"
        await create_members(api, "late", range(2, 3))
        await wait_for(lambda: _equals(bound(api, "late"), 3), timeout=30, what="3 bound")


async def test_members_that_never_arrive_release_their_reservations_at_the_timeout(
    api: client.ApiClient, control_plane: ControlPlane
) -> None:
    await gpu_nodes(api, 2)
    async with running_scheduler(control_plane) as app:
        await create_group(api, "never", 3, scheduleTimeoutSeconds=2)
        await create_members(api, "never", range(2))
        await wait_for(lambda: held(app, "never") == 2, timeout=30, what="2 reserved")

        async def released() -> bool:
            events = await events_for(api, NS, "never")
            return any(e["reason"] == "ReservationReleased" for e in events)

        await wait_for(released, timeout=30, what="reservations released at the timeout")
        assert await bound(api, "never") == 0
        # the capacity the reservations held is free: a plain pod needing a whole node binds
        await create_pod(api, make_pod("solo").gpus(8))
        await wait_for(lambda: _bound_pod(api, "solo"), timeout=30, what="solo bound")


async def test_two_gangs_needing_60_percent_one_completes_the_other_holds_nothing(
    api: client.ApiClient, control_plane: ControlPlane
) -> None:
    await gpu_nodes(api, 10)
    async with running_scheduler(control_plane) as app:
        await create_group(api, "a", 6)
        await create_group(api, "b", 6)
        await create_members(api, "a", range(6))
        await create_members(api, "b", range(6))

        async def one_whole() -> bool:
            counts = sorted([await bound(api, "a"), await bound(api, "b")])
            return counts == [0, 6]

        await wait_for(one_whole, timeout=60, what="one gang bound whole")
        loser = "a" if await bound(api, "a") == 0 else "b"
        assert held(app, loser) == 0, "the gang that waits holds nothing"


async def test_a_waiting_gang_gives_way_to_a_complete_one(
    api: client.ApiClient, control_plane: ControlPlane
) -> None:
    await gpu_nodes(api, 10)
    async with running_scheduler(control_plane) as app:
        await create_group(api, "partial", 6, scheduleTimeoutSeconds=300)
        await create_members(api, "partial", range(5))
        await wait_for(lambda: held(app, "partial") == 5, timeout=30, what="5 reserved")
        await create_group(api, "whole", 6)
        await create_members(api, "whole", range(6))
        await wait_for(
            lambda: _equals(bound(api, "whole"), 6), timeout=60, what="complete gang bound"
        )
        assert await bound(api, "partial") == 0


async def test_deleting_the_podgroup_mid_wait_releases_everything(
    api: client.ApiClient, control_plane: ControlPlane
) -> None:
    await gpu_nodes(api, 2)
    async with running_scheduler(control_plane) as app:
        await create_group(api, "doomed", 3, scheduleTimeoutSeconds=300)
        await create_members(api, "doomed", range(2))
        await wait_for(lambda: held(app, "doomed") == 2, timeout=30, what="2 reserved")
        await request_json(api, "DELETE", f"{GROUPS}/doomed")
        await wait_for(lambda: held(app, "doomed") == 0, timeout=30, what="reservations released")
        assert await bound(api, "doomed") == 0


async def _equals(value: Any, expected: int) -> bool:
    return await value == expected


async def _bound_pod(api: client.ApiClient, name: str) -> bool:
    pod = await client.CoreV1Api(api).read_namespaced_pod(name, NS)
    return bool(pod.spec.node_name)
