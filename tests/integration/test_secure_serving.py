"""The secure port on the real API server: TLS, bearer tokens authenticated by TokenReview,
client certificates by --client-ca-file, paths authorized by SubjectAccessReview against
real RBAC objects, /healthz open to anyone, /configz and runtime verbosity."""

from __future__ import annotations

import logging
import ssl
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from kubernetes_asyncio import client

from batchsched.kube.client import request_json
from batchsched.runtime.app import App, RunOptions
from tests.integration.control_plane import ControlPlane
from tests.integration.live import running_scheduler

NS = "default"


@pytest.fixture
async def secure_app(control_plane: ControlPlane) -> AsyncIterator[App]:
    options = RunOptions(
        leader_elect=False,
        bind_address="127.0.0.1",
        secure_port=0,
        client_ca_file=control_plane.state_dir / "pki" / "ca.crt",
    )
    async with running_scheduler(control_plane, options) as app:
        yield app


async def service_account_token(api: client.ApiClient, name: str) -> str:
    """A real token for a new ServiceAccount, signed by the API server (TokenRequest)."""
    body = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}}
    await request_json(api, "POST", f"/api/v1/namespaces/{NS}/serviceaccounts", body=body)
    request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}}
    path = f"/api/v1/namespaces/{NS}/serviceaccounts/{name}/token"
    answer = await request_json(api, "POST", path, body=request)
    status = answer["status"]
    assert isinstance(status, dict)
    return str(status["token"])


async def grant(api: client.ApiClient, account: str, paths: list[str], verbs: list[str]) -> None:
    """A ClusterRole for non-resource paths, bound to the ServiceAccount."""
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": account},
        "rules": [{"nonResourceURLs": paths, "verbs": verbs}],
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": account},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": account,
        },
        "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": NS}],
    }
    await request_json(api, "POST", "/apis/rbac.authorization.k8s.io/v1/clusterroles", body=role)
    await request_json(
        api, "POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", body=binding
    )


def insecure_tls(cert: Path | None = None, key: Path | None = None) -> ssl.SSLContext:
    """The serving certificate is self-signed: skip verification, as Prometheus is told to."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    if cert is not None:
        context.load_cert_chain(cert, key)
    return context


async def call(
    app: App,
    path: str,
    *,
    token: str | None = None,
    method: str = "GET",
    body: str | None = None,
    tls: ssl.SSLContext | None = None,
) -> tuple[int, str]:
    url = f"https://127.0.0.1:{app.servers['https'].port}{path}"
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        aiohttp.ClientSession() as session,
        session.request(method, url, headers=headers, data=body, ssl=tls or insecure_tls()) as r,
    ):
        return r.status, await r.text()


async def test_health_paths_need_no_credentials_and_metrics_refuses_anonymous(
    secure_app: App,
) -> None:
    for path in ("/healthz", "/livez", "/readyz"):
        status, _ = await call(secure_app, path)
        assert status == 200, path
    status, text = await call(secure_app, "/metrics")
    assert status == 403
    assert 'User "system:anonymous" cannot get path "/metrics"' in text


async def test_a_service_account_token_reads_metrics_only_when_rbac_allows_it(
    secure_app: App, api: client.ApiClient
) -> None:
    reader, stranger = f"metrics-reader-{uuid.uuid4().hex[:6]}", f"other-{uuid.uuid4().hex[:6]}"
    reader_token = await service_account_token(api, reader)
    stranger_token = await service_account_token(api, stranger)
    await grant(api, reader, ["/metrics"], ["get"])

    status, text = await call(secure_app, "/metrics", token=reader_token)
    assert status == 200 and "scheduler_schedule_attempts_total" in text
    status, text = await call(secure_app, "/metrics", token=stranger_token)
    assert status == 403 and f"system:serviceaccount:{NS}:{stranger}" in text
    status, _ = await call(secure_app, "/metrics", token="not-a-token")
    assert status == 401


async def test_a_client_certificate_signed_by_the_client_ca_authenticates_as_its_cn(
    secure_app: App, control_plane: ControlPlane
) -> None:
    """The admin certificate is CN=batchsched-admin, O=system:masters: the API server
    allows that group everything, so the SubjectAccessReview answers yes."""
    pki = control_plane.state_dir / "pki"
    tls = insecure_tls(pki / "admin.crt", pki / "admin.key")
    status, text = await call(secure_app, "/metrics", tls=tls)
    assert status == 200 and "scheduler_pending_pods" in text


async def test_configz_shows_the_config_in_force_and_verbosity_changes_at_runtime(
    secure_app: App, api: client.ApiClient
) -> None:
    account = f"debugger-{uuid.uuid4().hex[:6]}"
    token = await service_account_token(api, account)
    await grant(api, account, ["/configz", "/debug/flags/v"], ["get", "put"])

    status, text = await call(secure_app, "/configz", token=token)
    assert status == 200
    assert '"kind": "KubeSchedulerConfiguration"' in text and '"qps": 50.0' in text

    root = logging.getLogger()
    before = root.level
    try:
        status, text = await call(secure_app, "/debug/flags/v", token=token, method="PUT", body="4")
        assert status == 200 and root.level == logging.DEBUG, text
        status, _ = await call(secure_app, "/debug/flags/v", token=token, method="PUT", body="2")
        assert status == 200 and root.level == logging.INFO
        status, _ = await call(secure_app, "/debug/flags/v", token=token, method="PUT", body="x")
        assert status == 400
    finally:
        root.setLevel(before)
