"""Only the replica holding the Lease writes. Two in-process replicas, each with its own
client and User-Agent, so the API server's managedFields say who wrote what: the standby
sees a malformed PodGroup and a gang's whole life, and writes nothing."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from typing import Any

from kubernetes_asyncio import client

from batchsched.config.scheduler_config import config_from_mapping
from batchsched.kube.client import request_json
from batchsched.runtime.app import App, RunOptions
from tests.integration.control_plane import ControlPlane
from tests.integration.helpers import create_pod, wait_for
from tests.integration.kwok import create_kwok_nodes, succeeding_pod
from tests.integration.live import scheduler_api, settled
from tests.integration.test_gangs_live import create_group, group_status

LABEL = "scheduling.x-k8s.io/pod-group"


def config(lease: str, lease_s: str = "4s", renew_s: str = "3s", retry_s: str = "500ms") -> Any:
    return config_from_mapping(
        {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "leaderElection": {
                "leaderElect": True,
                "leaseDuration": lease_s,
                "renewDeadline": renew_s,
                "retryPeriod": retry_s,
                "resourceNamespace": "kube-system",
                "resourceName": lease,
            },
            "profiles": [{"schedulerName": "gpu-scheduler"}],
        }
    )


@contextlib.asynccontextmanager
async def replica(
    plane: ControlPlane,
    name: str,
    lease: str,
    timing: tuple[str, str, str] = ("4s", "3s", "500ms"),
) -> AsyncIterator[App]:
    api = await scheduler_api(plane)
    api.user_agent = f"{name}/test"  # the field manager the API server records: "<name>"
    async with api:
        options = RunOptions(identity=name, http_host="127.0.0.1", http_port=0)
        app = App(options, config(lease, *timing), api)
        task = asyncio.create_task(app.run())
        try:
            yield app
        finally:
            app.stop()
            await asyncio.wait_for(task, timeout=30)


def managers(obj: dict[str, Any]) -> set[str]:
    return {str(m.get("manager")) for m in obj.get("metadata", {}).get("managedFields") or []}


async def written_by(api: client.ApiClient) -> set[str]:
    """Every field manager on the Events, Pods and PodGroups of the default namespace."""
    found: set[str] = set()
    for path in (
        "/apis/events.k8s.io/v1/namespaces/default/events",
        "/api/v1/namespaces/default/pods",
        "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/default/podgroups",
    ):
        listing = await request_json(api, "GET", path)
        for item in listing.get("items") or []:  # type: ignore[union-attr]
            found |= managers(item)
    return found


async def test_the_standby_writes_nothing_while_the_leader_does_everything(
    kwok_plane: ControlPlane, kwok_api: client.ApiClient
) -> None:
    api = kwok_api
    lease = f"standby-{uuid.uuid4().hex[:8]}"
    await create_kwok_nodes(api, 1, gpus=8, prefix="standby")
    async with replica(kwok_plane, "replica-a", lease) as a:
        await wait_for(lambda: a.leading(), timeout=30, what="replica-a leads")
        async with replica(kwok_plane, "replica-b", lease) as b:
            await wait_for(
                lambda: all(settled(i) for i in b.informers), timeout=30, what="b synced"
            )
            # Seen by both: a malformed PodGroup (an Event on it) and a gang's whole life
            # (bindings, status from Scheduled to Finished).
            await create_group(api, "broken", 0)
            await create_group(api, "life", 2)
            for i in range(2):
                pod = succeeding_pod(f"life-{i}", 1).gpus(4).cpu("1").label(LABEL, "life")
                await create_pod(api, pod)

            async def finished() -> bool:
                return (await group_status(api, "life")).get("phase") == "Finished"

            await wait_for(finished, timeout=60, what="the gang Finished")
            await wait_for(
                lambda: b.gangs.phases and set(b.gangs.phases.values()) == {"Succeeded"},
                timeout=10,
                what="the standby saw the gang finish",
            )
            assert "default/broken" in b.gangs.invalid  # the standby did see the bad object
            assert not b.leading()
    writers = await written_by(api)
    assert "replica-a" in writers  # the check can see a replica's writes
    assert "replica-b" not in writers, writers
