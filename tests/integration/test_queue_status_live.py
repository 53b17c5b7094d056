"""A pending gang's place in line on its PodGroup, on the real API server: the leader writes
it where `kubectl describe podgroup` shows it, moves it when the queue moves, removes it when
the gang leaves the queue, sends no PATCH while nothing changes, and a standby writes none."""

from __future__ import annotations

import uuid
from typing import Any

from kubernetes_asyncio import client

from batchsched.kube.client import request_json
from batchsched.runtime.app import App
from batchsched.runtime.queue_status_writer import (
    QUEUE_POSITION_ANNOTATION,
    QUEUE_STATUS_ANNOTATION,
)
from tests.builders import make_node
from tests.integration.control_plane import ControlPlane
from tests.integration.gang_encodings import (
    VOLCANO_GROUPS,
    condition,
    create_volcano_group,
    delete_volcano_groups,
    install_volcano_crd,
    volcano_member,
)
from tests.integration.helpers import create_node, create_pod, delete_pod_now, wait_for
from tests.integration.live import running_scheduler, settled
from tests.integration.test_gangs_live import GROUPS, create_group, create_members
from tests.integration.test_standby_writes import managers, replica


async def notes_of(api: client.ApiClient, name: str, where: str = GROUPS) -> dict[str, Any]:
    meta = (await request_json(api, "GET", f"{where}/{name}")).get("metadata")
    found = meta.get("annotations") if isinstance(meta, dict) else None
    return found if isinstance(found, dict) else {}


def quicken(app: App) -> None:
    """Passes every half second and one write a second per group, so the test is short."""
    writer = app.housekeeping.queue_status
    assert writer is not None
    writer.pass_interval, writer.min_interval = 0.5, 1.0


def podgroup_patches(plane: ControlPlane, only: str = "") -> int:
    """PATCH requests the API server answered for PodGroups, from its own metrics: what a
    client sent, whether or not it changed the object. `only`: e.g. 'subresource=""', the
    object's own (annotations), not its status."""
    total = 0
    for line in plane.kubectl("get", "--raw", "/metrics").splitlines():
        ours = 'resource="podgroups"' in line and 'verb="PATCH"' in line and only in line
        if line.startswith("apiserver_request_total{") and ours:
            total += int(float(line.rsplit(" ", 1)[1]))
    return total


async def test_a_pending_gang_shows_its_place_and_it_moves_when_the_queue_does(
    api: client.ApiClient, control_plane: ControlPlane
) -> None:
    await create_node(api, make_node("qs-gpu").gpus(8).cpu("64"))
    async with running_scheduler(control_plane) as app:
        quicken(app)
        # Two gangs of 2 x 8 GPUs on one 8-GPU node: neither can start, the older goes first.
        await create_group(api, "qs-first", 2)
        await create_members(api, "qs-first", range(2))
        await create_group(api, "qs-second", 2)
        await create_members(api, "qs-second", range(2))
        second = "Unschedulable: position 2 of 2; "
        await wait_for(
            lambda: _starts(notes_of(api, "qs-second"), second),
            timeout=30,
            what="the second gang shows position 2 of 2",
        )
        assert (await notes_of(api, "qs-second"))[QUEUE_POSITION_ANNOTATION] == "2"
        assert (await notes_of(api, "qs-first"))[QUEUE_POSITION_ANNOTATION] == "1"
        described = control_plane.kubectl("describe", "podgroups.scheduling.x-k8s.io", "qs-second")
        # describe folds a long annotation onto the next line and cuts it: the place first.
        assert f"{QUEUE_STATUS_ANNOTATION}:" in described
        assert f"\n                {second}" in described

        # Nothing changes: passes go by and no PodGroup is PATCHed by anyone.
        writer = app.housekeeping.queue_status
        assert writer is not None
        writes, patches, passes = writer.writes, podgroup_patches(control_plane), writer.passes
        await wait_for(lambda: writer.passes >= passes + 4, timeout=15, what="4 more passes")
        assert writer.writes == writes
        assert podgroup_patches(control_plane) == patches

        # The first gang's pods go: the second is next, the first's line is removed.
        for i in range(2):
            await delete_pod_now(api, "default", f"qs-first-{i}")
        await wait_for(
            lambda: _starts(notes_of(api, "qs-second"), "Unschedulable: position 1 of 1"),
            timeout=30,
            what="the second gang moved up",
        )
        await wait_for(
            lambda: _lacks(notes_of(api, "qs-first")),
            timeout=30,
            what="the first gang's line removed",
        )


async def test_a_new_leader_rewrites_nothing_the_last_one_wrote_that_still_holds(
    api: client.ApiClient, control_plane: ControlPlane
) -> None:
    await create_node(api, make_node("qs-restart-gpu").gpus(8).cpu("64"))
    await create_group(api, "qs-stays", 2)
    await create_members(api, "qs-stays", range(2))
    async with running_scheduler(control_plane) as first:
        quicken(first)
        await wait_for(
            lambda: _starts(notes_of(api, "qs-stays"), "Unschedulable: position 1 of 1"),
            timeout=30,
            what="the first leader's line",
        )
    line = (await notes_of(api, "qs-stays"))[QUEUE_STATUS_ANNOTATION]
    # The object's own PATCHes: a new process writes the gang status (its subresource) once.
    patches = podgroup_patches(control_plane, 'subresource=""')
    async with running_scheduler(control_plane) as second:
        quicken(second)
        writer = second.housekeeping.queue_status
        assert writer is not None
        await wait_for(
            lambda: "default/qs-stays" in second.gangs.rejections and writer.passes >= 4,
            timeout=30,
            what="the new leader tried the gang, and 4 passes",
        )
        assert writer.writes == 0
    assert (await notes_of(api, "qs-stays"))[QUEUE_STATUS_ANNOTATION] == line
    assert podgroup_patches(control_plane, 'subresource=""') == patches


async def test_a_standby_writes_no_queue_status(
    api: client.ApiClient, control_plane: ControlPlane
) -> None:
    lease = f"qs-{uuid.uuid4().hex[:8]}"
    await create_node(api, make_node("qs-standby-gpu").gpus(8).cpu("64"))
    async with replica(control_plane, "qs-leader", lease) as a:
        await wait_for(lambda: a.leading(), timeout=30, what="qs-leader leads")
        quicken(a)
        async with replica(control_plane, "qs-standby", lease) as b:
            await wait_for(lambda: all(settled(i) for i in b.informers), timeout=30, what="sync")
            quicken(b)
            await create_group(api, "qs-waiting", 2)
            await create_members(api, "qs-waiting", range(2), gpus=16)
            await wait_for(
                lambda: _starts(notes_of(api, "qs-waiting"), "Unschedulable: position 1"),
                timeout=30,
                what="the leader wrote the line",
            )
            await wait_for(lambda: bool(b.queue.waiting()), timeout=10, what="the standby sees it")
            body = await request_json(api, "GET", f"{GROUPS}/qs-waiting")
            assert "qs-leader" in managers(body)
            assert "qs-standby" not in managers(body)
            standby = b.housekeeping.queue_status
            assert standby is not None and standby.passes == 0 and standby.writes == 0
            assert not b.leading()


async def test_a_volcano_gang_gets_the_line_and_keeps_its_own_status(
    api: client.ApiClient, control_plane: ControlPlane
) -> None:
    install_volcano_crd(control_plane)
    await delete_volcano_groups(api)
    await create_node(api, make_node("qs-vc-gpu").gpus(8).cpu("64"))
    async with running_scheduler(control_plane) as app:
        quicken(app)
        await create_volcano_group(api, "qs-vc", 2)
        for i in range(2):
            await create_pod(api, volcano_member("qs-vc", i, gpus=8 + i))  # 17 GPUs in all
        await wait_for(
            lambda: _starts(notes_of(api, "qs-vc", VOLCANO_GROUPS), "Unschedulable: position 1"),
            timeout=30,
            what="the Volcano group's line",
        )
        body = await request_json(api, "GET", f"{VOLCANO_GROUPS}/qs-vc")
        status = body.get("status")
        assert isinstance(status, dict) and status.get("phase") == "Inqueue"
        found = condition(status, "Unschedulable")  # the gang status writer's, as before
        assert found is not None and found["reason"] == "NotEnoughResources"
    await delete_volcano_groups(api)


async def _starts(found: Any, prefix: str) -> bool:
    return str((await found).get(QUEUE_STATUS_ANNOTATION, "")).startswith(prefix)


async def _lacks(found: Any) -> bool:
    return QUEUE_STATUS_ANNOTATION not in await found
