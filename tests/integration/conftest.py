"""Integration tests run against a real kube-apiserver + etcd on loopback (no fakes).

In CI (the CI variable set) a control plane that cannot be built or started FAILS the tests
with the reason; elsewhere they skip with the reason printed.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path

import pytest
import uvloop
from kubernetes_asyncio import client, config

from batchsched.kube.client import MERGE_PATCH, ApiError, request_json
from tests.integration.control_plane import (
    ROOT,
    ControlPlane,
    ControlPlaneUnavailable,
    start,
    start_kwok,
    stop,
    stop_kwok,
)
from tests.integration.helm import HelmUnavailable, install_helm
from tests.integration.helpers import wait_for

CRDS = ROOT / "deploy" / "crds"
POD_GROUPS = "/apis/scheduling.x-k8s.io/v1alpha1"
JOBS = "/apis/batch/v1"
EMPTY_TIMEOUT_S = 30.0


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/integration/" in str(item.fspath).replace(os.sep, "/"):
            item.add_marker(pytest.mark.integration)
    # Tests of Kubernetes 1.36's APIs are left out (not skipped) on an older control plane:
    # scripts/test.sh runs the integration tests again on 1.36, where they run.
    if _configured_minor() >= K8S136_MINOR:
        return
    older = [item for item in items if item.get_closest_marker("k8s136")]
    if older:
        config.hook.pytest_deselected(items=older)
        items[:] = [item for item in items if not item.get_closest_marker("k8s136")]


# `batchsched run` runs on uvloop where installed (runtime/event_loop.py); the schedulers this
# suite starts in-process run on the test's loop, asyncio's. The KWOK lifecycle tests, where
# pods finish and fail under a live scheduler, run on both. (The failover test's replicas are
# `batchsched run` processes, on uvloop already.)
BOTH_LOOPS = frozenset({"test_lifecycle_kwok.py"})


def pytest_asyncio_loop_factories(
    config: pytest.Config, item: pytest.Item
) -> dict[str, Callable[[], asyncio.AbstractEventLoop]]:
    factories: dict[str, Callable[[], asyncio.AbstractEventLoop]] = {
        "asyncio": asyncio.new_event_loop
    }
    if item.path.name in BOTH_LOOPS:
        factories["uvloop"] = uvloop.new_event_loop
    return factories


K8S136_MINOR = 36


def _configured_minor() -> int:
    """The minor version the control plane will run (as control_plane.py picks it)."""
    version = os.environ.get("BATCHSCHED_K8S_VERSION") or (
        (ROOT / "scripts" / "k8s-build" / "VERSION").read_text().strip()
    )
    return int(version.split(".")[1])


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


@pytest.fixture(scope="session")
def kwok_plane(control_plane: ControlPlane) -> Iterator[ControlPlane]:
    """The session's control plane with kwok and kube-controller-manager running too.

    Started the first time a test asks for it; from then on the rest of the session has
    them: Nodes annotated for kwok get simulated kubelets, and Jobs, PDB status and
    garbage collection work (tests/integration/kwok.py)."""
    try:
        start_kwok(control_plane)
    except ControlPlaneUnavailable as err:
        if os.environ.get("CI"):
            pytest.fail(f"kwok / kube-controller-manager unavailable in CI: {err}", pytrace=False)
        pytest.skip(f"kwok / kube-controller-manager unavailable: {err}")
    try:
        yield control_plane
    finally:
        stop_kwok(control_plane)


def install_crds(plane: ControlPlane) -> None:
    """Every CRD under deploy/crds, established before any test runs.

    A manifest the API server refuses fails every integration test: it would fail in a user's
    cluster too.
    """
    if not any(CRDS.glob("*.yaml")):
        return
    plane.kubectl("apply", "--server-side", "-f", str(CRDS))
    plane.kubectl("wait", "--for=condition=Established", "--timeout=60s", "-f", str(CRDS))


@pytest.fixture(scope="session")
def helm() -> Path:
    """The cached helm (scripts/helm.sh), built first where missing: in CI a helm that cannot
    be built fails the tests that need it, elsewhere they skip with the reason."""
    try:
        return install_helm()
    except HelmUnavailable as err:
        if os.environ.get("CI"):
            pytest.fail(f"helm unavailable in CI: {err}", pytrace=False)
        pytest.skip(f"helm unavailable: {err}")


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


@pytest.fixture
async def kwok_api(kwok_plane: ControlPlane, api: client.ApiClient) -> client.ApiClient:
    """`api`, on a session where kwok and kube-controller-manager run."""
    return api


async def empty_cluster(api_client: client.ApiClient) -> None:
    await delete_jobs(api_client)
    await delete_pods(api_client)
    core = client.CoreV1Api(api_client)
    nodes = await core.list_node()
    for node in nodes.items:
        await core.delete_node(node.metadata.name)


async def delete_jobs(api_client: client.ApiClient) -> None:
    """Jobs first, or their controller would create pods again; the garbage collector (where
    it runs) and delete_pods take care of the pods."""
    listing = await request_json(api_client, "GET", f"{JOBS}/jobs")
    for job in listing.get("items") or []:  # type: ignore[attr-defined]
        meta = job["metadata"]
        path = f"{JOBS}/namespaces/{meta['namespace']}/jobs/{meta['name']}"
        await ignore_gone(
            request_json(api_client, "DELETE", path, query=[("propagationPolicy", "Background")])
        )


async def delete_pods(api_client: client.ApiClient) -> None:
    """Grace period 0 removes a pod at once (kwok's included) unless a finalizer holds it,
    like the Job controller's tracking finalizer: those are dropped. Repeated until no pod
    is left, so that one a controller created meanwhile does not leak into the next test."""

    async def none_left() -> bool:
        listing = await request_json(api_client, "GET", "/api/v1/pods")
        items = listing.get("items") or []
        for pod in items:  # type: ignore[attr-defined]
            meta = pod["metadata"]
            path = f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}"
            if meta.get("finalizers"):
                patch = {"metadata": {"finalizers": None}}
                await ignore_gone(
                    request_json(api_client, "PATCH", path, body=patch, content_type=MERGE_PATCH)
                )
            await ignore_gone(
                request_json(api_client, "DELETE", path, query=[("gracePeriodSeconds", "0")])
            )
        return not items

    await wait_for(none_left, timeout=EMPTY_TIMEOUT_S, what="every pod deleted")


async def ignore_gone(request: Awaitable[object]) -> None:
    try:
        await request
    except ApiError as err:
        if err.status != 404:
            raise


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
    deselected = [
        r
        for r in terminalreporter.stats.get("deselected", [])
        if "tests/integration/" in getattr(r, "nodeid", "")
    ]
    left_out = f", {len(deselected)} left for the 1.36 pass" if deselected else ""
    terminalreporter.write_line(
        "integration tests against the real API server: "
        f"{len(passed)} passed, {len(skipped)} skipped{left_out}"
    )
