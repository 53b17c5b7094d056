"""Run batchsched in-process against the test API server, and read back what it did."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from kubernetes_asyncio import client, config

from batchsched.config import SchedulerConfig, default_config
from batchsched.kube.client import request_json
from batchsched.kube.served import WhenServed
from batchsched.runtime.app import App, RunOptions
from tests.integration.control_plane import ControlPlane
from tests.integration.helpers import wait_for


async def scheduler_api(plane: ControlPlane) -> client.ApiClient:
    cfg = client.Configuration()
    await config.load_kube_config(config_file=str(plane.kubeconfig), client_configuration=cfg)
    return client.ApiClient(cfg)


@contextlib.asynccontextmanager
async def running_scheduler(
    plane: ControlPlane, options: RunOptions | None = None, config: SchedulerConfig | None = None
) -> AsyncIterator[App]:
    """batchsched with the default config, no leader election, informers synced; `options`
    (e.g. a quota file) and `config` (the one loaded from options.config) replace the
    defaults."""
    api = await scheduler_api(plane)
    async with api:
        app = App(
            options or RunOptions(leader_elect=False, http_host="127.0.0.1", http_port=0),
            config if config is not None else default_config(),
            api,
        )
        task = asyncio.create_task(app.run())
        try:
            await wait_for(
                lambda: all(settled(i) for i in app.informers) or task.done(),
                timeout=30,
                what="informers synced",
            )
            assert not task.done(), task
            yield app
        finally:
            app.stop()
            assert await asyncio.wait_for(task, timeout=30) == 0


def settled(informer: object) -> bool:
    """Synced; for an informer of an API the server may not serve (kube/served.py), settled:
    discovery said it is not served, or it is and the informer synced."""
    if isinstance(informer, WhenServed):
        return informer.settled()
    synced = getattr(informer, "synced", None)
    return isinstance(synced, asyncio.Event) and synced.is_set()


async def pod(api: client.ApiClient, namespace: str, name: str) -> dict[str, Any]:
    return await request_json(api, "GET", f"/api/v1/namespaces/{namespace}/pods/{name}")  # type: ignore[return-value]


async def node_of(api: client.ApiClient, namespace: str, name: str) -> str:
    body = await pod(api, namespace, name)
    return str(body.get("spec", {}).get("nodeName") or "")


async def events_for(api: client.ApiClient, namespace: str, name: str) -> list[dict[str, Any]]:
    found = await request_json(
        api,
        "GET",
        f"/apis/events.k8s.io/v1/namespaces/{namespace}/events",
        query=[("fieldSelector", f"regarding.name={name}")],
    )
    return list(found.get("items", []))  # type: ignore[union-attr,arg-type]
