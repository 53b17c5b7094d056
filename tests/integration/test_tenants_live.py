"""Tenant queues on a live scheduler against a real kube-apiserver: a tenant over its max waits
with an Event that says so and starts when its usage drops; a gang that does not fit gets a
reservation written to its PodGroup, a pod that would delay it waits, one that ends in time
backfills."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client

from batchsched.kube.client import request_json
from batchsched.model.fields import timestamp
from batchsched.runtime.app import RunOptions
from batchsched.runtime.tenant_wiring import ESTIMATED_START_ANNOTATION
from tests.builders import make_node, make_pod
from tests.integration.control_plane import ControlPlane
from tests.integration.helpers import create_node, create_pod, delete_pod_now, wait_for
from tests.integration.live import events_for, node_of, running_scheduler

NS = "default"
GROUPS = f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{NS}/podgroups"
RUNTIME = "batchsched.io/expected-runtime"
QUOTA = """apiVersion: batchsched.io/v1alpha1
kind: QuotaConfig
tenants:
- name: team-a
  namespaces: [default]
  max: {nvidia.com/gpu: 8}
"""
OPEN = """apiVersion: batchsched.io/v1alpha1
kind: QuotaConfig
backfill: {reservations: 2}
tenants:
- {name: team-a, namespaces: [default]}
"""


def options(path: Path, text: str) -> RunOptions:
    staging = path.with_suffix(".tmp")
    staging.write_text(text)
    os.replace(staging, path)
    return RunOptions(leader_elect=False, http_host="127.0.0.1", http_port=0, quota=path)


async def failures(api: client.ApiClient, name: str) -> list[str]:
    events = await events_for(api, NS, name)
    return [str(e.get("note", "")) for e in events if e.get("reason") == "FailedScheduling"]


async def test_a_pod_of_a_tenant_at_its_max_waits_with_an_event_and_starts_when_usage_drops(
    api: client.ApiClient, control_plane: ControlPlane, tmp_path: Path
) -> None:
    await create_node(api, make_node("gpu-0").gpus(16).cpu("64"))
    async with running_scheduler(control_plane, options(tmp_path / "q.yaml", QUOTA)) as app:
        await create_pod(api, make_pod("first").gpus(8).cpu("1"))
        await wait_for(lambda: node_of(api, NS, "first"), what="first pod bound")
        await create_pod(api, make_pod("second").gpus(4).cpu("1"))

        async def refused() -> bool:
            return any("would exceed its max" in n for n in await failures(api, "second"))

        await wait_for(refused, what="a FailedScheduling Event naming the max")
        notes = await failures(api, "second")
        assert any(n.startswith("quota: tenant team-a would exceed its max 8") for n in notes)
        assert await node_of(api, NS, "second") == ""  # 8 GPUs free on the node, still waits
        rejections = app.metrics.quota_rejections.labels(tenant="team-a")._value.get()
        assert rejections >= 1

        await delete_pod_now(api, NS, "first")
        await wait_for(lambda: node_of(api, NS, "second"), what="second bound once usage drops")


async def create_gang(api: client.ApiClient, name: str, members: int, gpus: int) -> None:
    body = {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": NS, "annotations": {RUNTIME: "30m"}},
        "spec": {"minMember": members},
    }
    await request_json(api, "POST", GROUPS, body=body)
    for i in range(members):
        member = make_pod(f"{name}-{i}").gpus(gpus).cpu("1")
        await create_pod(api, member.label("scheduling.x-k8s.io/pod-group", name))


async def annotations_of(api: client.ApiClient, name: str) -> dict[str, Any]:
    body = await request_json(api, "GET", f"{GROUPS}/{name}")
    meta = body.get("metadata")
    return dict(meta.get("annotations") or {}) if isinstance(meta, dict) else {}


async def test_a_reserved_gang_is_not_delayed_by_backfill_and_its_estimated_start_is_written(
    api: client.ApiClient, control_plane: ControlPlane, tmp_path: Path
) -> None:
    for i in range(2):
        await create_node(api, make_node(f"gpu-{i}").gpus(8).cpu("64"))
    async with running_scheduler(control_plane, options(tmp_path / "q.yaml", OPEN)):
        # gpu-0 busy for an hour, half of gpu-1 for ten minutes.
        await create_pod(api, make_pod("long").gpus(8).cpu("1").annotation(RUNTIME, "1h"))
        await wait_for(lambda: node_of(api, NS, "long"), what="long bound")
        await create_pod(api, make_pod("short").gpus(4).cpu("1").annotation(RUNTIME, "10m"))
        await wait_for(lambda: node_of(api, NS, "short"), what="short bound")

        # Two whole nodes: only when "long" ends, in about an hour.
        await create_gang(api, "big", 2, 8)

        async def estimated() -> bool:
            return ESTIMATED_START_ANNOTATION in await annotations_of(api, "big")

        await wait_for(estimated, timeout=15, what="estimated start on the PodGroup")
        at = timestamp((await annotations_of(api, "big"))[ESTIMATED_START_ANNOTATION], "")
        long_pod = await request_json(api, "GET", f"/api/v1/namespaces/{NS}/pods/long")
        created = timestamp(long_pod["metadata"]["creationTimestamp"], "")  # type: ignore[index]
        assert 3500 <= at - created <= 3700  # when "long" is expected to end

        # Fits on gpu-1 now, but would still run when "big" is due there: it waits (the
        # BackfillReservations filter keeps it off gpu-1, and gpu-0 is full).
        await create_pod(api, make_pod("slow").gpus(4).cpu("1").annotation(RUNTIME, "2h"))
        # Fits and ends long before "big" is due: it backfills.
        await create_pod(api, make_pod("quick").gpus(4).cpu("1").annotation(RUNTIME, "5m"))
        await wait_for(lambda: node_of(api, NS, "quick"), what="quick backfilled")

        async def held() -> bool:
            notes = await failures(api, "slow")
            return any("reserved for default/big (backfill)" in n for n in notes)

        await wait_for(held, what="slow held back by the reservation")
        assert await node_of(api, NS, "slow") == ""
