"""The scheduler as deploy/ runs it, probed and scraped as the kubelet and Prometheus do: the
Deployment's own flags and probes, the ServiceMonitor's port and scheme, the scheduler's
ServiceAccount (its TokenReview and SubjectAccessReview rights) and ClusterRole
batchsched-metrics-reader, on a real API server.

- The probes' paths answer 200 over HTTPS without any credential (always-allowed paths).
- /metrics answers 403 to an anonymous caller and 401 to a token the API server rejects.
- /metrics answers 200 to a ServiceAccount bound to batchsched-metrics-reader, and 403 to the
  same ServiceAccount before the binding.
"""

from __future__ import annotations

import signal
import ssl
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from kubernetes_asyncio import client

from batchsched.kube.client import ApiError, request_json
from tests.integration.conftest import ignore_gone
from tests.integration.control_plane import ControlPlane
from tests.integration.helpers import wait_for
from tests.integration.test_deploy import (
    DEPLOY,
    SYSTEM,
    container,
    deployed_args,
    find,
    free_port,
    token_kubeconfig,
    wait_rbac,
)
from tests.integration.test_rbac import request_token

MANIFESTS = (
    "namespace.yaml",
    "scheduler/rbac.yaml",
    "scheduler/viewer-rbac.yaml",
    "scheduler/config.yaml",
    "scheduler/quotas.yaml",
)
SCRAPER = "prometheus-test"  # stands in for Prometheus's ServiceAccount
RBAC = "/apis/rbac.authorization.k8s.io/v1"


def rendered(plane: ControlPlane, directory: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(plane.kubectl("kustomize", str(directory))) if doc]


def insecure() -> ssl.SSLContext:
    """The ServiceMonitor's tlsConfig (insecureSkipVerify: the certificate is self-signed)."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


async def get(port: int, path: str, token: str | None = None) -> tuple[int, str]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"https://127.0.0.1:{port}{path}", headers=headers, ssl=insecure()) as r,
    ):
        return r.status, await r.text()


async def scraper_token(api: client.ApiClient) -> str:
    body = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": SCRAPER}}
    try:
        await request_json(api, "POST", f"/api/v1/namespaces/{SYSTEM}/serviceaccounts", body=body)
    except ApiError as err:
        if err.status != 409:  # 409: made by an earlier test of the session
            raise
    return await request_token(api, SCRAPER)


async def bind_metrics_reader(api: client.ApiClient) -> None:
    """What docs/operating.md tells the operator to do for Prometheus's ServiceAccount."""
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": f"{SCRAPER}-metrics"},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": "batchsched-metrics-reader",
        },
        "subjects": [{"kind": "ServiceAccount", "name": SCRAPER, "namespace": SYSTEM}],
    }
    await request_json(api, "POST", f"{RBAC}/clusterrolebindings", body=binding)


@pytest.fixture
async def deployed(
    control_plane: ControlPlane, api: client.ApiClient, tmp_path: Path
) -> AsyncIterator[tuple[int, list[dict[str, Any]]]]:
    """The scheduler process with the Deployment's args (secure port moved to a free one) and
    the scheduler ServiceAccount's token only; (its secure port, deploy/'s objects)."""
    control_plane.kubectl("apply", "--server-side", *(f"-f={DEPLOY / m}" for m in MANIFESTS))
    core = rendered(control_plane, DEPLOY)
    token = await request_token(api, "batchsched-scheduler")
    await wait_rbac(control_plane, token)
    port = free_port()
    args = deployed_args(core, tmp_path, port)
    kubeconfig = token_kubeconfig(control_plane, token, tmp_path / "kubeconfig")
    log = tmp_path / "scheduler.log"
    with log.open("w") as sink:
        proc = subprocess.Popen(
            [sys.executable, "-m", "batchsched.cli", *args, f"--kubeconfig={kubeconfig}"],
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    try:

        async def serving() -> bool:
            if proc.poll() is not None:
                return True
            try:
                return (await get(port, "/readyz"))[0] == 200
            except aiohttp.ClientError:
                return False

        await wait_for(serving, timeout=60, what="the secure port ready")
        assert proc.poll() is None, log.read_text()
        yield port, core
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=30)
        await ignore_gone(
            request_json(api, "DELETE", f"{RBAC}/clusterrolebindings/{SCRAPER}-metrics")
        )
    assert code == 0, log.read_text()


async def test_the_probes_answer_without_credentials_and_metrics_refuses_strangers(
    deployed: tuple[int, list[dict[str, Any]]],
) -> None:
    port, core = deployed
    scheduler = container(core, "Deployment", "batchsched-scheduler")
    probes = [scheduler[p]["httpGet"] for p in ("livenessProbe", "readinessProbe")]

    for probe in probes:  # as the kubelet sends them: HTTPS, no token, no client certificate
        assert probe["scheme"] == "HTTPS"
        status, text = await get(port, probe["path"])
        assert status == 200, f"{probe['path']}: {status} {text}"
    status, text = await get(port, "/livez")
    assert status == 200, text
    status, text = await get(port, "/metrics")
    assert status == 403, text
    assert 'User "system:anonymous" cannot get path "/metrics"' in text
    status, _ = await get(port, "/metrics", token="not-a-token")
    assert status == 401


async def test_prometheus_scrapes_metrics_once_bound_to_the_metrics_reader_role(
    deployed: tuple[int, list[dict[str, Any]]], api: client.ApiClient
) -> None:
    port, _ = deployed
    token = await scraper_token(api)
    status, text = await get(port, "/metrics", token=token)
    assert status == 403, text  # authenticated, not yet authorized

    await bind_metrics_reader(api)

    async def scraped() -> bool:
        # The SubjectAccessReview answer is cached for 10 s, and the authorizer sees the new
        # binding through its informer: poll until both have moved on.
        return (await get(port, "/metrics", token=token))[0] == 200

    await wait_for(scraped, timeout=30, what="/metrics readable by the bound ServiceAccount")
    status, text = await get(port, "/metrics", token=token)
    assert "scheduler_schedule_attempts_total" in text
    status, text = await get(port, "/configz", token=token)
    assert status == 403, text  # the role grants /metrics only


def test_the_service_monitor_scrapes_the_services_secure_port_with_a_token() -> None:
    monitors = yaml.safe_load_all((DEPLOY / "monitoring/servicemonitor.yaml").read_text())
    monitor = next(m for m in monitors if m["metadata"]["name"] == "batchsched-scheduler")
    deployment = yaml.safe_load_all((DEPLOY / "scheduler/deployment.yaml").read_text())
    service = find(list(deployment), "Service", "batchsched-scheduler")

    [endpoint] = monitor["spec"]["endpoints"]

    assert endpoint["port"] in {p["name"] for p in service["spec"]["ports"]}
    assert endpoint["scheme"] == "https"
    assert endpoint["path"] == "/metrics"
    assert endpoint["bearerTokenFile"] == "/var/run/secrets/kubernetes.io/serviceaccount/token"
    assert endpoint["tlsConfig"] == {"insecureSkipVerify": True}
