"""Small helpers for integration tests: bounded condition waits and object bodies."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any

from kubernetes_asyncio import client

from batchsched.kube.client import request_json
from tests.builders import NodeBuilder, PodBuilder

POLL_S = 0.05


async def wait_for(
    condition: Callable[[], bool | Awaitable[bool]], timeout: float = 10.0, what: str = ""
) -> None:
    """Poll `condition` until it holds; fail the test after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if inspect.isawaitable(result):
            result = await result
        if result:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what or condition}")
        await asyncio.sleep(POLL_S)


def node_body(builder: NodeBuilder) -> dict[str, Any]:
    """A Node the API server accepts: capacity mirrors allocatable (there is no kubelet)."""
    body = builder.obj()
    body["status"]["capacity"] = dict(body["status"]["allocatable"])
    return body


def pod_body(builder: PodBuilder) -> dict[str, Any]:
    """A Pod for create: the server assigns the uid."""
    body = builder.obj()
    body["metadata"].pop("uid", None)
    return body


async def create_node(api: client.ApiClient, builder: NodeBuilder) -> dict[str, object]:
    return await request_json(api, "POST", "/api/v1/nodes", body=node_body(builder))


async def create_pod(api: client.ApiClient, builder: PodBuilder) -> dict[str, object]:
    body = pod_body(builder)
    path = f"/api/v1/namespaces/{body['metadata']['namespace']}/pods"
    return await request_json(api, "POST", path, body=body)


async def delete_pod_now(api: client.ApiClient, namespace: str, name: str) -> None:
    """Without a kubelet a bound pod is never finalised: delete with grace period 0."""
    await client.CoreV1Api(api).delete_namespaced_pod(name, namespace, grace_period_seconds=0)
