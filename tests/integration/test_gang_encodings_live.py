"""Gangs described by Volcano and Kueue, under batchsched on the real API server with KWOK
nodes: whole or nothing, late members, gangs that cannot fit or never fill, the status written
back in Volcano's terms, Kueue plain-pod groups, a pod naming two gangs, and a Volcano queue
naming the tenant.

Volcano's PodGroup comes from a stand-in CRD (fixtures/volcano-podgroups-crd.yaml), installed
before any scheduler starts: the Volcano informer starts only once discovery serves it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client

from batchsched.kube.client import request_json
from batchsched.runtime.app import App, RunOptions
from tests.builders import make_pod
from tests.integration.control_plane import ControlPlane
from tests.integration.gang_encodings import (
    NS,
    bound_count,
    condition,
    create_volcano_group,
    delete_volcano_groups,
    install_volcano_crd,
    kueue_member,
    notes,
    phases_of,
    pod_scheduled,
    pods_named,
    volcano_member,
    volcano_status,
)
from tests.integration.helpers import create_pod, wait_for
from tests.integration.kwok import create_kwok_nodes
from tests.integration.live import running_scheduler

PLUGINS_GROUPS = f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{NS}/podgroups"


@pytest.fixture(scope="session")
def volcano_plane(kwok_plane: ControlPlane) -> ControlPlane:
    """The kwok session's control plane, serving Volcano's PodGroup."""
    install_volcano_crd(kwok_plane)
    return kwok_plane


@pytest.fixture
async def gang_api(volcano_plane: ControlPlane, kwok_api: client.ApiClient) -> client.ApiClient:
    """`kwok_api`, with the Volcano PodGroups of earlier tests deleted too."""
    await delete_volcano_groups(kwok_api)
    return kwok_api


def names(gang: str, count: int) -> list[str]:
    return [f"{gang}-{i}" for i in range(count)]


def held(app: App, key: str) -> int:
    """Members the scheduler counts on nodes (bound, binding, or reserved while waiting)."""
    return app.gangs.counted(key, app.cache.snapshot)


# a. A Volcano gang bound whole, its status in Volcano's terms through to Completed


async def test_a_volcano_group_without_pods_is_admitted_inqueue_so_its_controller_creates_them(
    volcano_plane: ControlPlane, gang_api: client.ApiClient
) -> None:
    """Volcano's job controller (and the training operator's Volcano mode) create a job's
    pods only once its PodGroup has left Pending; without Volcano's scheduler, batchsched is
    the one to move it."""
    api = gang_api
    await create_volcano_group(api, "vadmit", 4)
    async with running_scheduler(volcano_plane):

        async def admitted() -> bool:
            return (await volcano_status(api, "vadmit")).get("phase") == "Inqueue"

        await wait_for(admitted, timeout=30, what="the empty Volcano PodGroup Inqueue")


async def test_a_volcano_gang_is_bound_whole_and_its_status_goes_running_then_completed(
    volcano_plane: ControlPlane, gang_api: client.ApiClient
) -> None:
    api = gang_api
    await create_kwok_nodes(api, 2, gpus=2, prefix="vrun")
    await create_volcano_group(api, "vrun", 3)
    members = names("vrun", 3)
    async with running_scheduler(volcano_plane):
        for i in range(3):
            await create_pod(api, volcano_member("vrun", i, gpus=1, seconds=8))

        async def running() -> bool:
            status = await volcano_status(api, "vrun")
            scheduled = condition(status, "Scheduled") or {}
            return (
                status.get("phase") == "Running"
                and status.get("running") == 3
                and scheduled.get("status") == "True"
            )

        await wait_for(running, timeout=30, what="PodGroup phase Running, running 3, Scheduled")
        assert await bound_count(api, members) == 3
        assert set((await phases_of(api, members)).values()) == {"Running"}

        async def completed() -> bool:
            status = await volcano_status(api, "vrun")
            return status.get("phase") == "Completed" and status.get("succeeded") == 3

        await wait_for(completed, timeout=40, what="PodGroup phase Completed, succeeded 3")
        status = await volcano_status(api, "vrun")
        assert (status.get("running"), status.get("failed")) == (0, 0)
        assert [c["type"] for c in status.get("conditions") or []] == ["Scheduled"]
        assert set((await phases_of(api, members)).values()) == {"Succeeded"}


# b. Members that arrive over time


async def test_a_volcano_gang_whose_members_arrive_over_time_binds_whole_once_the_last_arrives(
    volcano_plane: ControlPlane, gang_api: client.ApiClient
) -> None:
    api = gang_api
    await create_kwok_nodes(api, 1, gpus=8, prefix="vlate")
    await create_volcano_group(api, "vlate", 3)
    members = names("vlate", 3)
    async with running_scheduler(volcano_plane) as app:
        await create_pod(api, volcano_member("vlate", 0))

        # The first cycle settled: the gang reserved its one member and said it waits.
        async def waiting() -> bool:
            told = await notes(api, "vlate", "Waiting")
            return any("waits for members: 1 of minMember 3 exist" in n for n in told)

        await wait_for(waiting, timeout=30, what="a Waiting Event on the Volcano PodGroup")
        assert held(app, "volcano:default/vlate") == 1
        first = (await pods_named(api, members[:1]))[members[0]]
        assert not first["spec"].get("nodeName")
        assert first["status"].get("phase") == "Pending"
        assert (pod_scheduled(first) or {}).get("status") != "True"

        await create_pod(api, volcano_member("vlate", 1))
        await wait_for(
            lambda: held(app, "volcano:default/vlate") == 2, timeout=30, what="2 reserved"
        )
        assert await bound_count(api, members) == 0, "nothing binds before the quorum"

        await create_pod(api, volcano_member("vlate", 2))

        async def all_running() -> bool:
            return set((await phases_of(api, members)).values()) == {"Running"}

        await wait_for(all_running, timeout=30, what="all 3 bound and Running")
        assert await bound_count(api, members) == 3


# c. A gang that cannot fit, and one whose quorum never comes


async def test_a_volcano_gang_that_cannot_fit_binds_nothing_and_is_unschedulable(
    volcano_plane: ControlPlane, gang_api: client.ApiClient
) -> None:
    api = gang_api
    await create_kwok_nodes(api, 2, gpus=2, prefix="vbig")
    await create_volcano_group(api, "vbig", 4)
    async with running_scheduler(volcano_plane) as app:
        for i in range(4):
            await create_pod(api, volcano_member("vbig", i, gpus=2))

        # The gang is named "default/vbig", without the "volcano:" of its key: see
        # test_a_volcano_gang_whose_late_member_fits_only_in_its_own_reservations_binds_nothing.
        expected = (
            "/vbig needs 4 more pod(s) placed together (minMember 4, 8 nvidia.com/gpu); "
            "4 nvidia.com/gpu free on 2 node(s) that pass its filters; 2 of 4 fit."
        )

        async def unschedulable() -> bool:
            found = condition(await volcano_status(api, "vbig"), "Unschedulable") or {}
            return found.get("reason") == "NotEnoughResources"

        await wait_for(unschedulable, timeout=30, what="Unschedulable NotEnoughResources")
        status = await volcano_status(api, "vbig")
        found = condition(status, "Unschedulable")
        assert found is not None and found["status"] == "True"
        assert expected in str(found.get("message", "")), found
        assert found.get("lastTransitionTime")
        assert status.get("phase") == "Inqueue"
        assert (status.get("running"), status.get("succeeded"), status.get("failed")) == (0, 0, 0)
        assert any(expected in n for n in await notes(api, "vbig", "FailedScheduling", "Warning"))
        assert await bound_count(api, names("vbig", 4)) == 0
        assert held(app, "volcano:default/vbig") == 0


async def test_a_volcano_gang_whose_quorum_never_comes_binds_nothing_and_waits_for_members(
    volcano_plane: ControlPlane, gang_api: client.ApiClient
) -> None:
    api = gang_api
    await create_kwok_nodes(api, 1, gpus=8, prefix="vshort")
    await create_volcano_group(api, "vshort", 3)
    async with running_scheduler(volcano_plane) as app:
        for i in range(2):
            await create_pod(api, volcano_member("vshort", i))

        async def waiting() -> bool:
            told = await notes(api, "vshort", "Waiting", "Normal")
            return any("waits for members" in n and "of minMember 3" in n for n in told)

        await wait_for(waiting, timeout=30, what="a Waiting Event on the Volcano PodGroup")

        async def pending_written() -> bool:
            return (await volcano_status(api, "vshort")).get("phase") == "Inqueue"

        await wait_for(pending_written, timeout=30, what="PodGroup status Inqueue")
        assert held(app, "volcano:default/vshort") == 2  # reserved, not bound
        assert await bound_count(api, names("vshort", 2)) == 0
        assert condition(await volcano_status(api, "vshort"), "Scheduled") is None


async def test_a_volcano_gang_whose_quorum_never_comes_says_not_enough_tasks_in_its_status(
    volcano_plane: ControlPlane, gang_api: client.ApiClient
) -> None:
    api = gang_api
    await create_kwok_nodes(api, 1, gpus=8, prefix="vtasks")
    await create_volcano_group(api, "vtasks", 3)
    async with running_scheduler(volcano_plane):
        for i in range(2):
            await create_pod(api, volcano_member("vtasks", i))

        async def pending_written() -> bool:
            return (await volcano_status(api, "vtasks")).get("phase") == "Inqueue"

        # Written once the gang has waited STATUS_GRACE_S (2 s); the housekeeping round that
        # writes it computes the condition in the same write.
        await wait_for(pending_written, timeout=30, what="PodGroup status Inqueue")
        status = await volcano_status(api, "vtasks")
        found = condition(status, "Unschedulable")
        assert found is not None, status
        assert found["reason"] == "NotEnoughTasks"
        assert "waits for members" in str(found.get("message", ""))
        assert await bound_count(api, names("vtasks", 2)) == 0


async def test_a_volcano_gang_whose_late_member_fits_only_in_its_own_reservations_binds_nothing(
    volcano_plane: ControlPlane, gang_api: client.ApiClient
) -> None:
    """2 GPUs; member 0 (1 GPU) is reserved while the gang waits; member 1 needs 2: the gang
    needs 3 and cannot fit. A scheduler-plugins gang in the same spot binds nothing."""
    api = gang_api
    await create_kwok_nodes(api, 1, gpus=2, prefix="vgreedy")
    await create_volcano_group(api, "vgreedy", 2)
    members = names("vgreedy", 2)
    async with running_scheduler(volcano_plane) as app:
        await create_pod(api, volcano_member("vgreedy", 0, gpus=1))
        await wait_for(
            lambda: held(app, "volcano:default/vgreedy") == 1, timeout=30, what="1 reserved"
        )
        await create_pod(api, volcano_member("vgreedy", 1, gpus=2))

        async def rejected() -> bool:
            found = condition(await volcano_status(api, "vgreedy"), "Unschedulable") or {}
            return found.get("reason") == "NotEnoughResources"

        await wait_for(rejected, timeout=30, what="Unschedulable NotEnoughResources")
        assert await bound_count(api, members) == 0
        message = condition(await volcano_status(api, "vgreedy"), "Unschedulable") or {}
        assert str(message.get("message", "")).startswith("gang volcano:default/vgreedy "), message


# d. Kueue plain-pod groups


async def test_a_kueue_plain_pod_group_is_bound_whole(
    volcano_plane: ControlPlane, gang_api: client.ApiClient
) -> None:
    api = gang_api
    await create_kwok_nodes(api, 2, gpus=2, prefix="kwhole")
    members = names("kwhole", 3)
    async with running_scheduler(volcano_plane):
        for i in range(3):
            await create_pod(api, kueue_member("kwhole", i, "3"))

        async def all_running() -> bool:
            return set((await phases_of(api, members)).values()) == {"Running"}

        await wait_for(all_running, timeout=30, what="the Kueue group bound and Running")
        assert await bound_count(api, members) == 3


async def test_a_kueue_group_short_of_its_total_count_binds_nothing(
    volcano_plane: ControlPlane, gang_api: client.ApiClient
) -> None:
    api = gang_api
    await create_kwok_nodes(api, 1, gpus=8, prefix="kshort")
    members = names("kshort", 2)
    async with running_scheduler(volcano_plane) as app:
        for i in range(2):
            await create_pod(api, kueue_member("kshort", i, "3"))

        async def waiting() -> bool:
            # No object: the group's Events go on its first member pod.
            for name in members:
                told = await notes(api, name, "Waiting", "Normal")
                if any("waits for members" in n and "of minMember 3" in n for n in told):
                    return True
            return False

        await wait_for(waiting, timeout=30, what="a Waiting Event on a member pod")
        assert held(app, "kueue:default/kshort") == 2
        assert await bound_count(api, members) == 0
        # A plain pod created after them is placed: cycles ran, the group still waits.
        await create_pod(api, make_pod("kshort-control").gpus(1).cpu("1"))
        await wait_for(
            lambda: _equals(bound_count(api, ["kshort-control"]), 1), timeout=30, what="control"
        )
        assert await bound_count(api, members) == 0


async def test_a_kueue_pod_with_a_total_count_that_is_no_number_is_never_bound_and_says_why(
    volcano_plane: ControlPlane, gang_api: client.ApiClient
) -> None:
    api = gang_api
    await create_kwok_nodes(api, 1, gpus=8, prefix="kbad")
    async with running_scheduler(volcano_plane):
        await create_pod(api, kueue_member("kbad", 0, "abc"))

        async def refused() -> bool:
            pod = (await pods_named(api, ["kbad-0"]))["kbad-0"]
            found = pod_scheduled(pod) or {}
            return found.get("status") == "False" and "abc" in str(found.get("message", ""))

        await wait_for(refused, timeout=30, what="PodScheduled False naming the bad count")
        pod = (await pods_named(api, ["kbad-0"]))["kbad-0"]
        message = str((pod_scheduled(pod) or {}).get("message", ""))
        assert message.startswith("Kueue pod group kueue:default/kbad is not scheduled")
        assert "kueue.x-k8s.io/pod-group-total-count" in message
        assert "must be a positive integer" in message
        assert any("'abc'" in n for n in await notes(api, "kbad-0", "FailedScheduling"))

        await create_pod(api, make_pod("kbad-control").gpus(1).cpu("1"))
        await wait_for(
            lambda: _equals(bound_count(api, ["kbad-control"]), 1), timeout=30, what="control"
        )
        assert await bound_count(api, ["kbad-0"]) == 0


# e. A pod naming two gangs


async def test_a_pod_naming_a_plugins_podgroup_and_a_volcano_one_is_never_bound(
    volcano_plane: ControlPlane, gang_api: client.ApiClient
) -> None:
    api = gang_api
    await create_kwok_nodes(api, 1, gpus=8, prefix="mixed")
    plugins = {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": "mix-a", "namespace": NS},
        "spec": {"minMember": 1},
    }
    await request_json(api, "POST", PLUGINS_GROUPS, body=plugins)
    await create_volcano_group(api, "mix-b", 1)
    async with running_scheduler(volcano_plane):
        pod = (
            make_pod("mixed-0")
            .gpus(1)
            .cpu("1")
            .label("scheduling.x-k8s.io/pod-group", "mix-a")
            .annotation("scheduling.k8s.io/group-name", "mix-b")
        )
        await create_pod(api, pod)

        async def refused() -> bool:
            return bool(await notes(api, "mixed-0", "InvalidObject", "Warning"))

        await wait_for(refused, timeout=30, what="an InvalidObject Warning on the pod")
        note = (await notes(api, "mixed-0", "InvalidObject", "Warning"))[0]
        assert "scheduler-plugins PodGroup 'mix-a'" in note, note
        assert "Volcano PodGroup 'mix-b'" in note, note

        await create_pod(api, make_pod("mixed-control").gpus(1).cpu("1"))
        await wait_for(
            lambda: _equals(bound_count(api, ["mixed-control"]), 1), timeout=30, what="control"
        )
        assert await bound_count(api, ["mixed-0"]) == 0


# f. A Volcano queue names the tenant

QUOTA = """apiVersion: batchsched.io/v1alpha1
kind: QuotaConfig
tenants:
- name: team-a
  namespaces: [default]
- name: research
  queues: [research]
  max: {nvidia.com/gpu: 4}
"""


def quota_options(path: Path) -> RunOptions:
    staging = path.with_suffix(".tmp")
    staging.write_text(QUOTA)
    os.replace(staging, path)
    return RunOptions(leader_elect=False, http_host="127.0.0.1", http_port=0, quota=path)


def tenant_gpus(app: App, tenant: str) -> float:
    value: float = app.metrics.tenant_gpus.labels(tenant=tenant)._value.get()
    return value


async def test_a_volcano_gang_in_a_queue_the_quota_file_names_counts_under_that_tenant(
    volcano_plane: ControlPlane, gang_api: client.ApiClient, tmp_path: Path
) -> None:
    api = gang_api
    await create_kwok_nodes(api, 1, gpus=8, prefix="vquota")
    await create_volcano_group(api, "vq1", 2, queue="research")
    await create_volcano_group(api, "vq2", 1, queue="research")
    async with running_scheduler(volcano_plane, quota_options(tmp_path / "q.yaml")) as app:
        for i in range(2):
            await create_pod(api, volcano_member("vq1", i, gpus=2))
        await wait_for(
            lambda: _equals(bound_count(api, names("vq1", 2)), 2), timeout=30, what="vq1 bound"
        )

        def counted() -> float:
            return tenant_gpus(app, "research") + tenant_gpus(app, "team-a")

        await wait_for(lambda: counted() == 4, timeout=10, what="4 GPUs counted")
        assert (tenant_gpus(app, "research"), tenant_gpus(app, "team-a")) == (4, 0)

        # research is at its max of 4 GPUs: one more waits, though the node has 4 free.
        await create_pod(api, volcano_member("vq2", 0, gpus=1))

        async def refused() -> bool:
            told = await notes(api, "vq2-0", "FailedScheduling")
            return any("tenant research would exceed its max" in n for n in told)

        await wait_for(refused, timeout=30, what="vq2 refused by research's max")
        assert await bound_count(api, ["vq2-0"]) == 0


async def _equals(value: Any, expected: int) -> bool:
    return bool(await value == expected)
