"""The tenant quota file on a live scheduler against a real kube-apiserver: loaded at start-up,
hot-reloaded on a good edit, kept on a bad one (with a Warning Event on the ConfigMap), and a
bad file at start-up refused."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client

from batchsched.config import default_config
from batchsched.kube.client import request_json
from batchsched.runtime.app import App, RunOptions
from batchsched.runtime.quota_reload import INVALID, RELOADED
from queues.config import QuotaConfigError
from queues.model import QuotaPolicy
from tests.builders import make_node, make_pod
from tests.integration.control_plane import ControlPlane
from tests.integration.helpers import create_node, create_pod, wait_for
from tests.integration.live import events_for, node_of, running_scheduler, scheduler_api

NS = "default"
CONFIGMAP = "tenant-quotas"
HEADER = "apiVersion: batchsched.io/v1alpha1\nkind: QuotaConfig\n"
FIRST = HEADER + "defaultTenant: shared\ntenants:\n- {name: shared, max: {nvidia.com/gpu: 8}}\n"
SECOND = (
    HEADER
    + "defaultTenant: shared\ntenants:\n- {name: shared, max: {nvidia.com/gpu: 16}}\n"
    + "- {name: ml, namespaces: [ml], guaranteed: {nvidia.com/gpu: 4}}\n"
)
BAD = HEADER + "tenants:\n- {name: shared, max: {nvidia.com/gpu: plenty}}\n"


def write(path: Path, text: str) -> None:
    """Replace the file in one rename, as the kubelet's ConfigMap writer does."""
    staging = path.with_suffix(".tmp")
    staging.write_text(text)
    os.replace(staging, path)


def options(path: Path) -> RunOptions:
    return RunOptions(
        leader_elect=False,
        http_host="127.0.0.1",
        http_port=0,
        quota=path,
        quota_configmap=f"{NS}/{CONFIGMAP}",
        quota_poll_interval=0.05,
    )


async def create_configmap(api: client.ApiClient, text: str) -> str:
    """The ConfigMap the file stands for (its uid is what the Events should carry)."""
    path = f"/api/v1/namespaces/{NS}/configmaps"
    body = {"metadata": {"name": CONFIGMAP}, "data": {"quotas.yaml": text}}
    created = await request_json(api, "POST", path, body=body)
    return str(created["metadata"]["uid"])  # type: ignore[index]


async def events(api: client.ApiClient, reason: str) -> list[dict[str, Any]]:
    return [e for e in await events_for(api, NS, CONFIGMAP) if e.get("reason") == reason]


def gpu_max(policy: QuotaPolicy) -> int:
    return policy.tenants["shared"].max["nvidia.com/gpu"]


async def test_quota_file_is_loaded_reloaded_and_a_bad_edit_keeps_the_last_good(
    api: client.ApiClient, control_plane: ControlPlane, tmp_path: Path
) -> None:
    quota = tmp_path / "quotas.yaml"
    write(quota, FIRST)
    uid = await create_configmap(api, FIRST)
    try:
        async with running_scheduler(control_plane, options(quota)) as app:
            assert gpu_max(app.quota_policy) == 8_000
            seen: list[QuotaPolicy] = []
            app.on_quota_change.append(seen.append)

            # A good edit is put in force, and said so on the ConfigMap.
            write(quota, SECOND)
            await wait_for(lambda: len(seen) == 1, timeout=20, what="quota reload")
            assert app.quota_policy is seen[0]
            assert gpu_max(app.quota_policy) == 16_000
            assert app.quota_policy.tenant_of("ml", {}) == "ml"
            await wait_for(lambda: _has(api, RELOADED), timeout=20, what="reload Event")
            (reloaded,) = await events(api, RELOADED)
            assert reloaded["type"] == "Normal"
            assert reloaded["regarding"]["kind"] == "ConfigMap"
            assert reloaded["regarding"]["uid"] == uid

            # A bad edit changes nothing but says why, with the path of the mistake.
            write(quota, BAD)
            await wait_for(lambda: _has(api, INVALID), timeout=20, what="invalid Event")
            (invalid,) = await events(api, INVALID)
            assert invalid["type"] == "Warning"
            assert "tenants[0].max.nvidia.com/gpu: not a quantity" in invalid["note"]
            assert str(quota) in invalid["note"]
            assert len(seen) == 1 and gpu_max(app.quota_policy) == 16_000
            errors = app.metrics.registry.get_sample_value(
                "batchsched_quota_config_reloads_total", {"result": "error"}
            )
            assert errors == 1

            # ... and the scheduler keeps scheduling.
            await create_node(api, make_node("n1").cpu("4"))
            await create_pod(api, make_pod("after-bad-quota").cpu("1"))
            await wait_for(lambda: _bound(api, "after-bad-quota"), timeout=20, what="pod bound")
    finally:
        await request_json(api, "DELETE", f"/api/v1/namespaces/{NS}/configmaps/{CONFIGMAP}")


async def _bound(api: client.ApiClient, name: str) -> bool:
    return bool(await node_of(api, NS, name))


async def _has(api: client.ApiClient, reason: str) -> bool:
    return bool(await events(api, reason))


async def test_a_bad_quota_file_at_start_up_is_refused(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    quota = tmp_path / "quotas.yaml"
    write(quota, BAD)
    api = await scheduler_api(control_plane)
    async with api:
        with pytest.raises(QuotaConfigError, match=r"tenants\[0\]\.max\.nvidia\.com/gpu"):
            App(options(quota), default_config(), api)
