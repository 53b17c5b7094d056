"""Integration tests run against a real kube-apiserver + etcd on loopback (no fakes).

In CI (the CI variable set) a control plane that cannot be built or started FAILS the tests
with the reason; elsewhere they skip with the reason printed.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from kubernetes_asyncio import client, config

from batchsched.kube.client import request_json
from tests.integration.control_plane import (
    ROOT,
    ControlPlane,
    ControlPlaneUnavailable,
    start,
    stop,
)

CRDS = ROOT / "deploy" / "crds"
POD_GROUPS = "/apis/scheduling.x-k8s.io/v1alpha1"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/integration/" in str(item.fspath).replace(os.sep, "/"):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    state = Path(tmp_path_factory.mktemp("control-plane"))
    try:
        plane = start(state)
    except ControlPlaneUnavailable as err:
        if os.environ.get("CI"):
            pytest.fail(f"real control plane unavailable in CI: {err}", pytrace=False)
        pytest.skip(f"real control plane unavailable: {err}")
    try:
        install_crds(plane)
        yield plane
    finally:
        stop(plane)


def install_crds(plane: ControlPlane) -> None:
    """Every CRD under deploy/crds, established before any test runs.

    A manifest the API server refuses fails every integration test: it would fail in a user's
    cluster too.
    """
    if not any(CRDS.glob("*.yaml")):
        return
    plane.kubectl("apply", "--server-side", "-f", str(CRDS))
    plane.kubectl("wait", "--for=condition=Established", "--timeout=60s", "-f", str(CRDS))


@pytest.fixture
async def api(control_plane: ControlPlane) -> AsyncIterator[client.ApiClient]:
    """An API client as admin, with the cluster emptied of Nodes, Pods and PodGroups first."""
    cfg = client.Configuration()
    await config.load_kube_config(
        config_file=str(control_plane.kubeconfig), client_configuration=cfg
    )
    async with client.ApiClient(cfg) as api_client:
        await empty_cluster(api_client)
        await delete_pod_groups(api_client)
        yield api_client


async def empty_cluster(api_client: client.ApiClient) -> None:
    core = client.CoreV1Api(api_client)
    pods = await core.list_pod_for_all_namespaces()
    for pod in pods.items:
        await core.delete_namespaced_pod(
            pod.metadata.name, pod.metadata.namespace, grace_period_seconds=0
        )
    nodes = await core.list_node()
    for node in nodes.items:
        await core.delete_node(node.metadata.name)


async def delete_pod_groups(api_client: client.ApiClient) -> None:
    """Namespace by namespace: a namespaced collection has no cluster-wide DELETE."""
    listing = await request_json(api_client, "GET", f"{POD_GROUPS}/podgroups")
    items = listing.get("items")
    namespaces = {item["metadata"]["namespace"] for item in items or []}  # type: ignore[attr-defined]
    for namespace in sorted(namespaces):
        await request_json(api_client, "DELETE", f"{POD_GROUPS}/namespaces/{namespace}/podgroups")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    passed = [
        r for r in terminalreporter.stats.get("passed", []) if "tests/integration/" in r.nodeid
    ]
    skipped = [
        r for r in terminalreporter.stats.get("skipped", []) if "tests/integration/" in r.nodeid
    ]
    terminalreporter.write_line(
        "integration tests against the real API server: "
        f"{len(passed)} passed, {len(skipped)} skipped"
    )
