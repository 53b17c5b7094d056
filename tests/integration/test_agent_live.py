"""The node agent (fake NVML) publishes to the real API server, and the live scheduler places
GPU pods on the GPUs it reports.

The node is an 8-GPU PCIe server by its labels (GPUs 0-3 on socket 0, 4-7 on socket 1); the
agent reports GPU 1 fallen off the bus. By labels alone the best 4 GPUs are 0-3; by what the
agent measured they are 4-7, the only 4 healthy GPUs left on one socket.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from kubernetes_asyncio import client

from batchsched.kube.client import ApiError, request_json
from batchsched.runtime.app import App
from gpu.agent import Agent, AgentConfig
from gpu.agent_cli import FIELD_MANAGER, KubePublisher
from gpu.fake_nvml import FakeNvml, Faults, host_numa
from gpu.machines import PCIE_SERVER
from gpu.nrt import GPU_TOPOLOGY_ANNOTATION, KIND
from gpu.nvml import NvmlReader
from tests.builders import make_node, make_pod
from tests.integration.control_plane import ControlPlane
from tests.integration.helpers import create_node, create_pod, wait_for
from tests.integration.live import node_of, running_scheduler

NS = "default"
NODE = "gpu-1"
NRTS = "/apis/topology.node.k8s.io/v1alpha2/noderesourcetopologies"


@pytest.fixture
async def no_topologies(api: client.ApiClient) -> AsyncIterator[client.ApiClient]:
    await request_json(api, "DELETE", NRTS)
    yield api
    await request_json(api, "DELETE", NRTS)


async def gpu_node(api: client.ApiClient) -> None:
    await create_node(
        api,
        make_node(NODE)
        .cpu("128")
        .memory("1Ti")
        .gpus(8)
        .label("nvidia.com/gpu.product", PCIE_SERVER.product),
    )


def agent(api: client.ApiClient, lost: set[int]) -> Agent:
    reader = NvmlReader(FakeNvml(PCIE_SERVER, Faults(lost=lost)), host_numa(PCIE_SERVER))
    return Agent(reader, KubePublisher(api=api), AgentConfig(NODE, "fake:pcie-server"))


def healthy_gpus(app: App) -> tuple[int, ...]:
    info = app.cache.snapshot.get(NODE)
    return () if info is None or info.gpu is None else info.gpu.topology.healthy_indices()


async def test_the_scheduler_places_a_4_gpu_pod_on_the_best_gpus_the_agent_reports(
    no_topologies: client.ApiClient, control_plane: ControlPlane
) -> None:
    api = no_topologies
    await gpu_node(api)
    async with running_scheduler(control_plane) as app:
        assert healthy_gpus(app) == tuple(range(8))  # labels only, before the agent
        assert await agent(api, lost={1}).refresh()
        stored = await request_json(api, "GET", f"{NRTS}/{NODE}")
        managers = {m["manager"] for m in stored["metadata"]["managedFields"]}  # type: ignore[index]
        assert managers == {FIELD_MANAGER}
        assert stored["kind"] == KIND
        await wait_for(
            lambda: healthy_gpus(app) == (0, 2, 3, 4, 5, 6, 7), timeout=20, what="topology watched"
        )
        created = await create_pod(api, make_pod("train").gpus(4))
        await wait_for(lambda: bound(api, "train"), timeout=20, what="train bound")
        uid = str(created["metadata"]["uid"])  # type: ignore[index]
        grants = app.cache.snapshot.gpu_grants(uid)
        assert tuple(index for index, _ in grants) == (4, 5, 6, 7)


async def test_a_malformed_topology_falls_back_to_labels_with_an_event(
    no_topologies: client.ApiClient, control_plane: ControlPlane
) -> None:
    api = no_topologies
    await gpu_node(api)
    bad: dict[str, Any] = {
        "apiVersion": "topology.node.k8s.io/v1alpha2",
        "kind": KIND,
        "metadata": {"name": NODE, "annotations": {GPU_TOPOLOGY_ANNOTATION: '{"version": 9}'}},
        "zones": [],
    }
    async with running_scheduler(control_plane) as app:
        await agent(api, lost={1}).refresh()
        await wait_for(lambda: healthy_gpus(app) == (0, 2, 3, 4, 5, 6, 7), timeout=20, what="good")
        await request_json(api, "PUT", f"{NRTS}/{NODE}", body=await _with_version(api, bad))
        await wait_for(lambda: healthy_gpus(app) == tuple(range(8)), timeout=20, what="fallback")
        invalid = app.metrics.invalid_objects.labels(kind=KIND)._value.get()
        assert invalid >= 1
        await wait_for(lambda: _invalid_topology_event(api), timeout=20, what="Event")
        created = await create_pod(api, make_pod("train").gpus(4))
        await wait_for(lambda: bound(api, "train"), timeout=20, what="train bound")
        grants = app.cache.snapshot.gpu_grants(str(created["metadata"]["uid"]))  # type: ignore[index]
        assert tuple(index for index, _ in grants) == (0, 1, 2, 3)


async def bound(api: client.ApiClient, name: str) -> bool:
    return bool(await node_of(api, NS, name))


async def _with_version(api: client.ApiClient, body: dict[str, Any]) -> dict[str, Any]:
    current: Any = await request_json(api, "GET", f"{NRTS}/{NODE}")
    meta = {**body["metadata"], "resourceVersion": current["metadata"]["resourceVersion"]}
    return {**body, "metadata": meta}


async def _invalid_topology_event(api: client.ApiClient) -> bool:
    found = await request_json(
        api,
        "GET",
        f"/apis/events.k8s.io/v1/namespaces/{NS}/events",
        query=[("fieldSelector", f"regarding.name={NODE}")],
    )
    items: Any = found.get("items") or []
    return any(e.get("reason") == "InvalidTopology" for e in items)


async def test_the_object_is_refused_by_the_crd_schema_when_zones_are_missing(
    no_topologies: client.ApiClient,
) -> None:
    with pytest.raises(ApiError) as refused:
        await request_json(
            no_topologies,
            "POST",
            NRTS,
            body={
                "apiVersion": "topology.node.k8s.io/v1alpha2",
                "kind": KIND,
                "metadata": {"name": "x"},
            },
        )
    assert refused.value.status == 422
