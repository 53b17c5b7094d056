"""The control plane the integration tests use is real: it stores Nodes and serves /version."""

from __future__ import annotations

from kubernetes_asyncio import client

from tests.integration.control_plane import ControlPlane


async def test_the_api_server_stores_a_node_object(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    body = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "smoke-node"},
        "status": {"capacity": {"cpu": "4"}, "allocatable": {"cpu": "4"}},
    }
    await core.create_node(body)
    node = await core.read_node("smoke-node")
    assert node.status.allocatable["cpu"] == "4"


def test_kubectl_reports_the_pinned_version(control_plane: ControlPlane) -> None:
    version = control_plane.bin_dir.parents[0].name
    assert version.startswith("v1.")
    assert version in control_plane.kubectl("version", "-o", "json")
