"""The PodGroup CRD, status writer and informer against the real API server."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any

import pytest
from kubernetes_asyncio import client

from batchsched.gang.podgroup import POD_GROUP_LABEL, PodGroupView, parse_pod_group
from batchsched.kube.client import ApiError, request_json
from batchsched.kube.informer import Informer
from batchsched.kube.podgroups import POD_GROUPS, PodGroupStatusWriter, pod_group_path
from batchsched.model.errors import InvalidObject
from batchsched.model.resources import Resources
from tests.builders import make_node, make_pod
from tests.integration.control_plane import (
    INSTALL_TIMEOUT_S,
    ControlPlane,
    ControlPlaneUnavailable,
)
from tests.integration.helpers import create_node, pod_body, wait_for

NS = "default"
CRD = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/podgroups.scheduling.x-k8s.io"


def pod_group_body(name: str, **spec: object) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"minMember": 3, **spec},
    }


async def create_group(api: client.ApiClient, name: str, **spec: object) -> dict[str, object]:
    path = f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{NS}/podgroups"
    return await request_json(api, "POST", path, body=pod_group_body(name, **spec))


async def read_group(api: client.ApiClient, name: str) -> dict[str, Any]:
    return await request_json(api, "GET", pod_group_path(NS, name))


async def delete_group(api: client.ApiClient, name: str) -> None:
    await request_json(api, "DELETE", pod_group_path(NS, name))


async def test_the_crd_serves_scheduler_plugins_names(api: client.ApiClient) -> None:
    crd = await request_json(api, "GET", CRD)

    spec: Any = crd["spec"]
    status: Any = crd["status"]
    assert spec["group"] == "scheduling.x-k8s.io"
    assert [v["name"] for v in spec["versions"]] == ["v1alpha1"]
    assert spec["names"]["kind"] == "PodGroup"
    assert spec["names"]["listKind"] == "PodGroupList"
    assert spec["names"]["shortNames"] == ["pg", "pgs"]
    assert spec["versions"][0]["subresources"] == {"status": {}}
    established = [c for c in status["conditions"] if c["type"] == "Established"]
    assert established[0]["status"] == "True"


async def test_a_pod_group_is_created_and_read_back(api: client.ApiClient) -> None:
    await create_group(
        api,
        "train",
        minMember=4,
        minResources={"cpu": "2", "nvidia.com/gpu": 8},
        scheduleTimeoutSeconds=90,
    )

    view = parse_pod_group(await read_group(api, "train"))

    assert (view.key, view.min_member, view.schedule_timeout_seconds) == ("default/train", 4, 90)
    assert view.min_resources == Resources(milli_cpu=2000, scalar={"nvidia.com/gpu": 8})
    assert view.uid and view.uid != "default/train"  # the server's uid
    assert view.creation_time > 0


async def test_min_member_zero_is_accepted_so_the_scheduler_can_report_it(
    api: client.ApiClient,
) -> None:
    await create_group(api, "empty-gang", minMember=0)

    with pytest.raises(InvalidObject) as caught:
        parse_pod_group(await read_group(api, "empty-gang"))

    assert caught.value.field == "spec.minMember"


async def test_a_bad_quantity_is_refused_by_the_schema(api: client.ApiClient) -> None:
    with pytest.raises(ApiError) as caught:
        await create_group(api, "bad-quantity", minResources={"nvidia.com/gpu": "lots"})

    assert caught.value.status == 422
    assert "spec.minResources.nvidia.com/gpu" in caught.value.message


async def test_status_is_written_and_read_back(api: client.ApiClient) -> None:
    group = parse_pod_group(await create_group(api, "status-me"))
    writer = PodGroupStatusWriter(api)
    status = {
        "phase": "Scheduling",
        "scheduled": 2,
        "running": 1,
        "succeeded": 0,
        "failed": 0,
        "occupiedBy": "job-uid-1",
        "scheduleStartTime": "2025-01-02T03:04:05Z",
    }

    await writer.update(group, status)

    raw = await read_group(api, "status-me")
    assert raw["status"] == status
    assert raw["spec"] == {"minMember": 3}  # the status subresource leaves spec alone


async def test_an_unchanged_status_is_not_written_again(api: client.ApiClient) -> None:
    group = parse_pod_group(await create_group(api, "quiet"))
    writer = PodGroupStatusWriter(api)
    status: dict[str, object] = {"phase": "Pending", "scheduled": 0}
    await writer.update(group, status)
    version = (await read_group(api, "quiet"))["metadata"]["resourceVersion"]

    await writer.update(group, dict(status))
    assert (await read_group(api, "quiet"))["metadata"]["resourceVersion"] == version

    status["phase"] = "Scheduled"  # the writer kept its own copy of what it wrote
    await writer.update(group, status)
    raw = await read_group(api, "quiet")
    assert raw["metadata"]["resourceVersion"] != version
    assert raw["status"]["phase"] == "Scheduled"


PENDING_ZERO: dict[str, object] = {
    "phase": "Pending",
    "scheduled": 0,
    "running": 0,
    "succeeded": 0,
    "failed": 0,
}


async def test_a_new_group_already_shows_pending_so_it_is_not_written(
    api: client.ApiClient,
) -> None:
    group = parse_pod_group(await create_group(api, "fresh"))
    version = (await read_group(api, "fresh"))["metadata"]["resourceVersion"]
    writer = PodGroupStatusWriter(api)

    assert await writer.update(group, dict(PENDING_ZERO))

    assert (await read_group(api, "fresh"))["metadata"]["resourceVersion"] == version
    assert writer.skipped == 1


async def test_a_new_leader_does_not_rewrite_the_status_the_group_shows(
    api: client.ApiClient,
) -> None:
    await create_group(api, "shown")
    scheduled = {**PENDING_ZERO, "phase": "Scheduled", "scheduled": 3}
    scheduled["scheduleStartTime"] = "2026-11-27T05:00:00Z"
    await PodGroupStatusWriter(api).update(
        parse_pod_group(await read_group(api, "shown")), scheduled
    )
    raw = await read_group(api, "shown")
    successor = PodGroupStatusWriter(api)  # nothing remembered: the object is the baseline

    await successor.update(parse_pod_group(raw), dict(scheduled))
    assert (await read_group(api, "shown"))["metadata"]["resourceVersion"] == raw["metadata"][
        "resourceVersion"
    ]
    running = {**scheduled, "phase": "Running", "running": 3}
    await successor.update(parse_pod_group(raw), running)
    assert (await read_group(api, "shown"))["status"] == running


async def test_a_status_written_is_not_judged_by_a_stale_view_of_the_group(
    api: client.ApiClient,
) -> None:
    stale = parse_pod_group(await create_group(api, "stale"))  # read before any status
    writer = PodGroupStatusWriter(api)
    await writer.update(stale, {**PENDING_ZERO, "phase": "Scheduled", "scheduled": 3})

    # The members went: Pending again. The stale view shows Pending, but we wrote Scheduled.
    await writer.update(stale, dict(PENDING_ZERO))

    assert (await read_group(api, "stale"))["status"] == PENDING_ZERO


async def test_a_merge_patch_keeps_fields_it_does_not_name(api: client.ApiClient) -> None:
    group = parse_pod_group(await create_group(api, "merge"))
    writer = PodGroupStatusWriter(api)

    await writer.update(group, {"phase": "Running", "occupiedBy": "job-uid-2"})
    await writer.update(group, {"phase": "Finished", "succeeded": 3})

    status = (await read_group(api, "merge"))["status"]
    assert status == {"phase": "Finished", "succeeded": 3, "occupiedBy": "job-uid-2"}


async def test_writing_to_a_deleted_group_does_not_raise(api: client.ApiClient) -> None:
    group = parse_pod_group(await create_group(api, "gone"))
    await delete_group(api, "gone")

    await PodGroupStatusWriter(api).update(group, {"phase": "Pending"})


async def test_a_recreated_group_gets_its_own_status_written(api: client.ApiClient) -> None:
    old = parse_pod_group(await create_group(api, "again"))
    await delete_group(api, "again")
    new = parse_pod_group(await create_group(api, "again"))
    writer = PodGroupStatusWriter(api)

    await writer.update(old, {"phase": "Failed"})  # a stale view: lands on the successor
    await writer.update(new, {"phase": "Failed"})
    version = (await read_group(api, "again"))["metadata"]["resourceVersion"]
    await writer.update(new, {"phase": "Failed"})

    assert (await read_group(api, "again"))["metadata"]["resourceVersion"] == version


class Recorder:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []
        self.latest: dict[str, PodGroupView] = {}
        self.invalid: list[str] = []

    def on_add(self, obj: PodGroupView) -> None:
        self.seen.append(("add", obj.name))
        self.latest[obj.name] = obj

    def on_update(self, old: PodGroupView, new: PodGroupView) -> None:
        self.seen.append(("update", new.name))
        self.latest[new.name] = new

    def on_delete(self, obj: PodGroupView) -> None:
        self.seen.append(("delete", obj.name))
        self.latest.pop(obj.name, None)

    def on_invalid(self, raw: Mapping[str, object], err: Exception) -> None:
        self.invalid.append(str(err))


@contextlib.asynccontextmanager
async def running(informer: Informer[PodGroupView]) -> AsyncIterator[None]:
    task = asyncio.create_task(informer.run())
    try:
        await asyncio.wait_for(informer.wait_synced(), timeout=10)
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_an_informer_lists_and_watches_pod_groups(api: client.ApiClient) -> None:
    await create_group(api, "listed", minMember=2)
    recorder = Recorder()
    informer = Informer(
        api,
        POD_GROUPS,
        parse_pod_group,
        recorder,
        key=lambda g: g.key,
        on_invalid=recorder.on_invalid,
    )

    async with running(informer):
        assert recorder.seen == [("add", "listed")]
        await create_group(api, "watched", minMember=5)
        await wait_for(lambda: ("add", "watched") in recorder.seen, what="watched added")
        listed = recorder.latest["listed"]
        await PodGroupStatusWriter(api).update(listed, {"phase": "Scheduled"})
        await wait_for(lambda: ("update", "listed") in recorder.seen, what="status update")
        await create_group(api, "malformed", minMember=0)
        await wait_for(lambda: bool(recorder.invalid), what="malformed reported")
        await delete_group(api, "watched")
        await wait_for(lambda: ("delete", "watched") in recorder.seen, what="watched deleted")

    assert recorder.seen == [
        ("add", "listed"),
        ("add", "watched"),
        ("update", "listed"),
        ("delete", "watched"),
    ]
    assert recorder.latest["listed"].min_member == 2
    assert recorder.invalid == [
        "PodGroup default/malformed: spec.minMember: must be at least 1, got 0"
    ]


# The gang benchmark's baseline, scheduler-plugins' kube-scheduler with Coscheduling, reads
# these same PodGroups through its own typed client: it must see ours as its own.
SP_SCHEDULER = "scheduler-plugins-scheduler"


@pytest.fixture(scope="module")
def coscheduling(control_plane: ControlPlane) -> Iterator[None]:
    try:
        # Cached after the first build, like the control plane's own binaries.
        control_plane.script("install-coscheduling", timeout=INSTALL_TIMEOUT_S)
        control_plane.script("coscheduling-up")
    except ControlPlaneUnavailable as err:
        if os.environ.get("CI"):
            pytest.fail(f"scheduler-plugins coscheduling unavailable in CI: {err}", pytrace=False)
        pytest.skip(f"scheduler-plugins coscheduling unavailable: {err}")
    try:
        yield
    finally:
        control_plane.script("coscheduling-down")


async def create_gang(api: client.ApiClient, group: str, members: int, gpus: int) -> None:
    await create_group(api, group, minMember=members)
    for i in range(members):
        builder = make_pod(f"{group}-{i}", NS).scheduler(SP_SCHEDULER).label(POD_GROUP_LABEL, group)
        body = pod_body(builder.cpu("100m").gpus(gpus))
        # Extended resources must be limited too, and to the amount requested.
        body["spec"]["containers"][0]["resources"]["limits"] = {"nvidia.com/gpu": gpus}
        await request_json(api, "POST", f"/api/v1/namespaces/{NS}/pods", body=body)


async def gang_pods(api: client.ApiClient, group: str) -> list[dict[str, Any]]:
    listing = await request_json(
        api,
        "GET",
        f"/api/v1/namespaces/{NS}/pods",
        query=[("labelSelector", f"{POD_GROUP_LABEL}={group}")],
    )
    items: list[dict[str, Any]] = listing["items"]  # type: ignore[assignment]
    return items


def unschedulable_message(pod: Mapping[str, Any]) -> str | None:
    """The PodScheduled=False message the scheduler wrote after a failed cycle, if any."""
    for condition in pod.get("status", {}).get("conditions", []):
        if condition["type"] == "PodScheduled" and condition["status"] == "False":
            return str(condition.get("message", ""))
    return None


@pytest.mark.usefixtures("coscheduling")
async def test_coscheduling_binds_a_gang_that_fits(api: client.ApiClient) -> None:
    for name in ("cos-n1", "cos-n2"):
        await create_node(api, make_node(name).cpu("8").memory("32Gi").gpus(8))

    await create_gang(api, "cos-fits", members=3, gpus=2)

    async def all_bound() -> bool:
        return all(p["spec"].get("nodeName") for p in await gang_pods(api, "cos-fits"))

    await wait_for(all_bound, timeout=30, what="the 3 members bound by scheduler-plugins")


@pytest.mark.usefixtures("coscheduling")
async def test_coscheduling_binds_none_of_a_gang_that_cannot_fit(api: client.ApiClient) -> None:
    for name in ("cos-n3", "cos-n4"):
        await create_node(api, make_node(name).cpu("8").memory("32Gi").gpus(8))

    await create_gang(api, "cos-big", members=3, gpus=5)  # two fit, the third never does

    async def all_tried() -> bool:
        pods = await gang_pods(api, "cos-big")
        return len(pods) == 3 and all(unschedulable_message(p) is not None for p in pods)

    # Each member has been through a failed cycle with the whole gang present; since only two
    # can ever fit, none may be bound now or later.
    await wait_for(all_tried, timeout=30, what="every member tried and refused")
    assert [p["spec"].get("nodeName") for p in await gang_pods(api, "cos-big")] == [None] * 3
