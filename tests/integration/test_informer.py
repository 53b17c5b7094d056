"""Informer list+watch against the real API server: order, resume, 410 relist, pagination."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import re
import socket
import subprocess
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Generic, TypeVar

import pytest
from kubernetes_asyncio import client

from batchsched.kube.binder import KubeBinder
from batchsched.kube.client import MERGE_PATCH, ApiError, request_json
from batchsched.kube.informer import (
    NODES,
    PAGE_SIZE,
    PODS,
    PRIORITY_CLASSES,
    Informer,
    ResourceSpec,
)
from batchsched.model.node import NodeView, parse_node
from batchsched.model.pod import PodView, parse_pod
from batchsched.model.priority_class import PriorityClassView, parse_priority_class
from tests.builders import make_node, make_pod
from tests.integration.control_plane import ControlPlane
from tests.integration.helpers import create_node, create_pod, delete_pod_now, wait_for

T = TypeVar("T")


class NoJitter(random.Random):
    def random(self) -> float:
        return 0.0


class Recorder(Generic[T]):
    """Handler that writes down what it is told, as ("add", name) tuples."""

    def __init__(self, name: Callable[[T], str]) -> None:
        self.name = name
        self.seen: list[tuple[str, str]] = []
        self.latest: dict[str, T] = {}

    def on_add(self, obj: T) -> None:
        self.seen.append(("add", self.name(obj)))
        self.latest[self.name(obj)] = obj

    def on_update(self, old: T, new: T) -> None:
        assert self.name(old) == self.name(new)
        self.seen.append(("update", self.name(new)))
        self.latest[self.name(new)] = new

    def on_delete(self, obj: T) -> None:
        self.seen.append(("delete", self.name(obj)))
        self.latest.pop(self.name(obj), None)

    async def wait_seen(self, count: int) -> None:
        await wait_for(lambda: len(self.seen) >= count, what=f"{count} events, have {self.seen}")


def node_informer(
    api: client.ApiClient, page_size: int = PAGE_SIZE
) -> tuple[Informer[NodeView], Recorder[NodeView]]:
    recorder: Recorder[NodeView] = Recorder(lambda n: n.name)
    informer = Informer(api, NODES, parse_node, recorder, key=lambda n: n.name, page_size=page_size)
    return informer, recorder


@contextlib.asynccontextmanager
async def running(informer: Informer[T]) -> AsyncIterator[None]:
    task = asyncio.create_task(informer.run())
    try:
        await asyncio.wait_for(informer.wait_synced(), timeout=10)
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def patch(api: client.ApiClient, path: str, body: Mapping[str, object]) -> None:
    await request_json(api, "PATCH", path, body=body, content_type=MERGE_PATCH)


async def test_lists_existing_nodes_then_sees_adds_updates_deletes_in_order(
    api: client.ApiClient,
) -> None:
    await create_node(api, make_node("inf-a"))
    await create_node(api, make_node("inf-b"))
    informer, seen = node_informer(api)

    async with running(informer):
        assert seen.seen == [("add", "inf-a"), ("add", "inf-b")]
        await create_node(api, make_node("inf-c").gpus(8))
        await patch(api, "/api/v1/nodes/inf-a", {"metadata": {"labels": {"zone": "z1"}}})
        await client.CoreV1Api(api).delete_node("inf-b")
        await seen.wait_seen(5)

    assert seen.seen[2:] == [("add", "inf-c"), ("update", "inf-a"), ("delete", "inf-b")]
    assert seen.latest["inf-a"].labels["zone"] == "z1"
    assert seen.latest["inf-c"].allocatable.get("nvidia.com/gpu") == 8
    assert sorted(n.name for n in informer.store.views()) == ["inf-a", "inf-c"]


async def test_a_paginated_list_delivers_every_node(api: client.ApiClient) -> None:
    for i in range(7):
        await create_node(api, make_node(f"page-{i}"))
    informer, seen = node_informer(api, page_size=3)

    async with running(informer):
        assert sorted(name for _, name in seen.seen) == [f"page-{i}" for i in range(7)]


async def test_changes_while_disconnected_are_delivered_on_resume(api: client.ApiClient) -> None:
    await create_node(api, make_node("gap-a"))
    await create_node(api, make_node("gap-b"))
    informer, seen = node_informer(api)
    async with running(informer):
        pass

    await client.CoreV1Api(api).delete_node("gap-a")
    await create_node(api, make_node("gap-c"))
    async with running(informer):
        await seen.wait_seen(4)

    assert seen.seen[2:] == [("delete", "gap-a"), ("add", "gap-c")]


async def test_pods_are_seen_pending_bound_and_finished(api: client.ApiClient) -> None:
    await create_node(api, make_node("pod-n1"))
    await create_pod(api, make_pod("p-bound").cpu("1"))
    recorder: Recorder[PodView] = Recorder(lambda p: p.key)
    informer = Informer(api, PODS, parse_pod, recorder, key=lambda p: p.uid)

    async with running(informer):
        pending = recorder.latest["default/p-bound"]
        await KubeBinder(api).bind("default", "p-bound", pending.uid, "pod-n1")
        await wait_for(lambda: recorder.latest["default/p-bound"].node_name == "pod-n1")
        status = {"status": {"phase": "Succeeded"}}
        await patch(api, "/api/v1/namespaces/default/pods/p-bound/status", status)
        # Finished pods stay in PODS: the update carries the final phase (a gang counts it).
        await wait_for(
            lambda: recorder.latest["default/p-bound"].phase == "Succeeded", what="finished pod"
        )
        await delete_pod_now(api, "default", "p-bound")
        await wait_for(lambda: "default/p-bound" not in recorder.latest, what="deleted pod")

    assert recorder.seen[0] == ("add", "default/p-bound")
    assert recorder.seen[-1] == ("delete", "default/p-bound")
    assert pending.requests.milli_cpu == 1000


async def test_priority_classes_are_parsed_into_views(api: client.ApiClient) -> None:
    body = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "inf-high"},
        "value": 100000,
        "preemptionPolicy": "Never",
    }
    path = "/apis/scheduling.k8s.io/v1/priorityclasses"
    await request_json(api, "POST", path, body=body)
    recorder: Recorder[PriorityClassView] = Recorder(lambda c: c.name)
    informer = Informer(api, PRIORITY_CLASSES, parse_priority_class, recorder, key=lambda c: c.name)
    try:
        async with running(informer):
            high = recorder.latest["inf-high"]
    finally:
        await request_json(api, "DELETE", f"{path}/inf-high")

    assert high == PriorityClassView("inf-high", 100000, False, "Never")
    assert recorder.latest["system-node-critical"].value == 2000001000


# Events: the one built-in resource the API server serves without a watch cache, so an
# etcd compaction really expires an old resourceVersion (cached resources hide it).
EXPIRY_NS = "informer-expiry"


async def fresh_namespace(api: client.ApiClient, name: str) -> None:
    with contextlib.suppress(ApiError):
        body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        await request_json(api, "POST", "/api/v1/namespaces", body=body)
    await request_json(api, "DELETE", f"/api/v1/namespaces/{name}/events")


async def create_event(api: client.ApiClient, name: str) -> None:
    body = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": EXPIRY_NS},
        "involvedObject": {"kind": "Pod", "name": "x", "namespace": EXPIRY_NS},
        "reason": "Test",
        "message": name,
        "type": "Normal",
    }
    await request_json(api, "POST", f"/api/v1/namespaces/{EXPIRY_NS}/events", body=body)


def compact_etcd(plane: ControlPlane) -> None:
    ports = dict(line.split("=", 1) for line in (plane.state_dir / "ports.env").read_text().split())
    etcdctl = [str(plane.bin_dir / "etcdctl"), f"--endpoints=127.0.0.1:{ports['ETCD_CLIENT_PORT']}"]
    env = {"ETCDCTL_API": "3"}
    status = subprocess.run(
        [*etcdctl, "endpoint", "status", "-w", "json"], env=env, capture_output=True, check=True
    )
    revision = json.loads(status.stdout)[0]["Status"]["header"]["revision"]
    subprocess.run([*etcdctl, "compact", str(revision)], env=env, capture_output=True, check=True)


def event_name(raw: Mapping[str, object]) -> str:
    meta = raw["metadata"]
    assert isinstance(meta, dict)
    return str(meta["name"])


async def test_an_expired_resource_version_relists_and_delivers_what_vanished(
    api: client.ApiClient, control_plane: ControlPlane, caplog: pytest.LogCaptureFixture
) -> None:
    await fresh_namespace(api, EXPIRY_NS)
    await create_event(api, "ev-kept")
    await create_event(api, "ev-gone")
    recorder: Recorder[str] = Recorder(lambda name: name)
    resource = ResourceSpec("Event", f"/api/v1/namespaces/{EXPIRY_NS}/events")
    informer = Informer(api, resource, event_name, recorder, key=lambda name: name)
    async with running(informer):
        pass
    held = informer.store.resource_version

    await request_json(api, "DELETE", f"/api/v1/namespaces/{EXPIRY_NS}/events/ev-gone")
    await create_event(api, "ev-new")
    compact_etcd(control_plane)
    caplog.set_level(logging.INFO, logger="batchsched.kube.informer")
    async with running(informer):
        await recorder.wait_seen(4)

    assert "watch expired kind=Event" in caplog.text
    assert sorted(recorder.seen[:2]) == [("add", "ev-gone"), ("add", "ev-kept")]
    assert recorder.seen[2:] == [("delete", "ev-gone"), ("add", "ev-new")]
    assert sorted(informer.store.views()) == ["ev-kept", "ev-new"]
    assert int(informer.store.resource_version) > int(held)


async def test_an_unreachable_server_is_retried_with_growing_delays(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with socket.socket() as probe:  # a loopback port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    cfg = client.Configuration(host=f"https://127.0.0.1:{port}")
    caplog.set_level(logging.WARNING, logger="batchsched.kube.informer")
    async with client.ApiClient(cfg) as unreachable:
        recorder: Recorder[NodeView] = Recorder(lambda n: n.name)
        informer = Informer(
            unreachable, NODES, parse_node, recorder, key=lambda n: n.name, rng=NoJitter()
        )
        task = asyncio.create_task(informer.run())
        try:
            await wait_for(lambda: caplog.text.count("informer retry kind=Node") >= 3)
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    delays = re.findall(r"informer retry kind=Node delay=([0-9.]+)s", caplog.text)
    assert delays[:3] == ["0.20", "0.40", "0.80"]
    assert "ApiUnavailable" not in caplog.text or "Connect" in caplog.text
    assert not informer.synced.is_set()
