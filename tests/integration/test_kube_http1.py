"""The lean HTTP/1.1 pool (kube/http1.py) against the real API server: TLS with the client
certificate and with bearer tokens, the server's failures as `ApiError`, connections kept
alive, and connections the server closes, idle or as a request arrives (a TCP pass-through
in front of the real server does the closing)."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit

import pytest
import uvloop
from kubernetes_asyncio import client, config

from batchsched.kube.client import ApiError, ApiUnavailable, api_client, request_json
from batchsched.kube.http1 import Pool
from batchsched.kube.transport import lean_pool
from tests.integration.control_plane import ControlPlane
from tests.integration.helpers import wait_for

SA = "/api/v1/namespaces/default/serviceaccounts"
CONFIG_MAPS = "/api/v1/namespaces/default/configmaps"


def pool_of(api: client.ApiClient) -> Pool:
    pool = lean_pool(api)
    assert pool is not None, "the client should take the lean transport"
    return pool


@pytest.fixture
async def admin(control_plane: ControlPlane) -> AsyncIterator[client.ApiClient]:
    api = await api_client(str(control_plane.kubeconfig))
    async with api:
        yield api


async def test_requests_reach_the_server_over_tls_with_the_client_certificate_on_one_connection(
    admin: client.ApiClient,
) -> None:
    for _ in range(20):
        namespace = await request_json(admin, "GET", "/api/v1/namespaces/default")
        assert namespace["metadata"]["name"] == "default"  # type: ignore[index]
    assert pool_of(admin).opened == 1  # kept alive, not one connection per request


async def test_the_server_s_404_and_409_are_api_errors_with_its_status_and_reason(
    admin: client.ApiClient,
) -> None:
    with pytest.raises(ApiError) as missing:
        await request_json(admin, "GET", "/api/v1/namespaces/default/pods/no-such-pod")
    assert (missing.value.status, missing.value.reason) == (404, "NotFound")
    body = {"metadata": {"name": f"http1-{uuid.uuid4().hex[:8]}"}, "data": {"a": "b"}}
    await request_json(admin, "POST", CONFIG_MAPS, body=body)
    with pytest.raises(ApiError) as twice:
        await request_json(admin, "POST", CONFIG_MAPS, body=body)
    assert (twice.value.status, twice.value.reason) == (409, "AlreadyExists")
    await request_json(admin, "DELETE", f"{CONFIG_MAPS}/{body['metadata']['name']}")  # type: ignore[index]


async def test_a_rotated_bearer_token_is_sent_on_the_next_request_over_the_same_connection(
    admin: client.ApiClient,
) -> None:
    tokens = [await service_account_token(admin, f"http1-{who}") for who in ("a", "b")]
    cfg = client.Configuration()
    cfg.host = admin.configuration.host
    cfg.ssl_ca_cert = admin.configuration.ssl_ca_cert  # trust, but no client certificate
    handed = iter(tokens)

    def refresh(configuration: Any) -> None:  # what in-cluster config installs
        configuration.api_key["BearerToken"] = f"Bearer {next(handed)}"

    cfg.api_key["BearerToken"] = "Bearer stale"
    cfg.refresh_api_key_hook = refresh
    async with client.ApiClient(cfg) as api:
        users = []
        for _ in tokens:  # the accounts may not list nodes: the 403 names who asked
            with pytest.raises(ApiError) as refused:
                await request_json(api, "GET", "/api/v1/nodes")
            assert refused.value.status == 403
            users.append(refused.value.message.split('"')[1])
        assert pool_of(api).opened == 1
    assert users == [f"system:serviceaccount:default:http1-{who}" for who in ("a", "b")]


async def service_account_token(api: client.ApiClient, name: str) -> str:
    with contextlib.suppress(ApiError):
        await request_json(api, "POST", SA, body={"metadata": {"name": name}})
    asked = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}}
    answer = await request_json(api, "POST", f"{SA}/{name}/token", body=asked)
    return str(answer["status"]["token"])  # type: ignore[index]


@pytest.mark.parametrize(
    "setting",
    [
        pytest.param({"ssl_ca_cert": None}, id="no trust in the server's CA"),
        pytest.param({"tls_server_name": "not-the-server.example"}, id="a wrong server name"),
    ],
)
async def test_the_server_certificate_is_verified_as_configured(
    control_plane: ControlPlane, setting: dict[str, object]
) -> None:
    cfg = client.Configuration()
    await config.load_kube_config(str(control_plane.kubeconfig), client_configuration=cfg)
    for key, value in setting.items():
        setattr(cfg, key, value)
    async with client.ApiClient(cfg) as api:
        pool_of(api)
        with pytest.raises(ApiUnavailable, match=r"CERTIFICATE_VERIFY_FAILED|mismatch"):
            await request_json(api, "GET", "/api/v1/namespaces/default", timeout=10)


class Cutter:
    """A TCP pass-through in front of the API server that can close its connections: all
    of them now (`cut`), or the next one a request arrives on, before passing it on
    (`close_on_next_request`), as a server closing an idle connection does."""

    def __init__(self, upstream: str) -> None:
        parts = urlsplit(upstream)
        self.upstream = (parts.hostname, parts.port)
        self.open: set[asyncio.StreamWriter] = set()
        self.armed = False
        self.server: asyncio.Server | None = None

    async def start(self) -> int:
        self.server = await asyncio.start_server(self.handle, "127.0.0.1", 0)
        return int(self.server.sockets[0].getsockname()[1])

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        self.open |= {writer, up_writer}
        try:
            await asyncio.gather(
                self.pipe(reader, up_writer, to_server=True),
                self.pipe(up_reader, writer, to_server=False),
            )
        finally:
            for side in (writer, up_writer):
                self.open.discard(side)
                side.transport.abort()

    async def pipe(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *, to_server: bool
    ) -> None:
        with contextlib.suppress(OSError):
            while data := await reader.read(65536):
                if to_server and self.armed:  # the request's bytes never reach the server
                    self.armed = False
                    self.cut()
                    return
                writer.write(data)

    def cut(self) -> None:
        for side in list(self.open):
            side.transport.abort()
        self.open.clear()

    def close_on_next_request(self) -> None:
        self.armed = True

    async def stop(self) -> None:
        self.cut()
        if self.server is not None:
            self.server.close()


@pytest.fixture
async def cut_api(
    control_plane: ControlPlane,
) -> AsyncIterator[tuple[Cutter, client.ApiClient]]:
    cutter = Cutter(control_plane.url)
    port = await cutter.start()
    api = await api_client(str(control_plane.kubeconfig))
    api.configuration.host = f"https://127.0.0.1:{port}"
    try:
        async with api:
            yield cutter, api
    finally:
        await cutter.stop()


async def test_an_idle_connection_the_server_closed_is_replaced_for_any_request(
    cut_api: tuple[Cutter, client.ApiClient],
) -> None:
    cutter, api = cut_api
    await request_json(api, "GET", "/api/v1/namespaces/default")
    cutter.cut()
    await wait_for(lambda: pool_of(api).idle_open() == 0, what="the close seen by the client")
    name = f"http1-{uuid.uuid4().hex[:8]}"
    await request_json(api, "POST", CONFIG_MAPS, body={"metadata": {"name": name}})
    assert pool_of(api).opened == 2
    await request_json(api, "DELETE", f"{CONFIG_MAPS}/{name}")


async def test_a_connection_closed_as_a_request_arrives_is_retried_once_only_if_idempotent(
    cut_api: tuple[Cutter, client.ApiClient],
) -> None:
    cutter, api = cut_api
    await request_json(api, "GET", "/api/v1/namespaces/default")
    cutter.close_on_next_request()
    await request_json(api, "GET", "/api/v1/namespaces/default")  # retried: answered
    assert pool_of(api).opened == 2
    cutter.close_on_next_request()
    name = f"http1-{uuid.uuid4().hex[:8]}"
    with pytest.raises(ApiUnavailable, match="closed the connection before answering"):
        await request_json(api, "POST", CONFIG_MAPS, body={"metadata": {"name": name}})
    assert pool_of(api).opened == 2  # not retried: the caller decides
    with pytest.raises(ApiError) as missing:
        await request_json(api, "GET", f"{CONFIG_MAPS}/{name}")
    assert missing.value.status == 404


def test_the_pool_speaks_tls_to_the_server_on_uvloop_too(control_plane: ControlPlane) -> None:
    """`batchsched run` runs on uvloop (runtime/event_loop.py), whose TLS transport is not
    asyncio's: the pool must make, reuse and read connections through it the same way."""

    async def requests() -> tuple[type, list[str], int]:
        api = await api_client(str(control_plane.kubeconfig))
        async with api:
            names = []
            for _ in range(5):
                got = await request_json(api, "GET", "/api/v1/namespaces/default")
                names.append(str(got["metadata"]["name"]))  # type: ignore[index]
            with pytest.raises(ApiError):
                await request_json(api, "GET", "/api/v1/namespaces/default/pods/no-such-pod")
            return type(asyncio.get_running_loop()), names, pool_of(api).opened

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        loop, names, opened = runner.run(requests())

    assert loop is uvloop.Loop
    assert names == ["default"] * 5
    assert opened == 1
