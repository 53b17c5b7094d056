"""The lean pool's connection handling (kube/http1.py, kube/transport.py) through
`request_json`, against a tiny local HTTP server that answers as told: the transport, not
Kubernetes semantics, is under test (the real API server is in
tests/integration/test_kube_http1.py)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from kubernetes_asyncio import client

from batchsched.kube import http1
from batchsched.kube.client import ApiUnavailable, request_json
from batchsched.kube.http1 import Pool
from batchsched.kube.transport import TRANSPORT_VARIABLE, lean_pool
from tests.kube.stub_server import stub_api


class Server:
    """Answers {"n": k} for the k-th request, closing or chunking as `mode` says; an answer
    waits for `gate` (set: no wait)."""

    def __init__(self) -> None:
        self.mode = "plain"
        self.count = 0
        self.gate = asyncio.Event()
        self.gate.set()

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.count += 1
        await self.gate.wait()
        body = b'{"n": %d}' % self.count
        if self.mode == "chunked":
            answer = web.StreamResponse(headers={"Content-Type": "application/json"})
            answer.enable_chunked_encoding()
            await answer.prepare(request)
            for i in range(0, len(body), 3):
                await answer.write(body[i : i + 3])
            await answer.write_eof()
            return answer
        headers = {"Connection": "close"} if self.mode == "close" else {}
        return web.Response(body=body, content_type="application/json", headers=headers)


@pytest.fixture
async def served() -> AsyncIterator[tuple[Server, client.ApiClient]]:
    server = Server()
    async with stub_api(server.handle, before_cleanup=server.gate.set) as api:
        yield server, api


def pool_of(api: client.ApiClient) -> Pool:
    pool = lean_pool(api)
    assert pool is not None
    return pool


async def test_an_answer_saying_connection_close_is_not_followed_on_that_connection(
    served: tuple[Server, client.ApiClient],
) -> None:
    server, api = served
    server.mode = "close"
    assert await request_json(api, "GET", "/a") == {"n": 1}
    # A POST is not retried on a closed connection: it needs the fresh one from the start.
    assert await request_json(api, "POST", "/b", body={}) == {"n": 2}
    assert pool_of(api).opened == 2
    server.mode = "plain"
    await request_json(api, "GET", "/c")
    await request_json(api, "GET", "/d")
    assert pool_of(api).opened == 3


async def test_a_chunked_answer_split_across_writes_is_read_whole(
    served: tuple[Server, client.ApiClient],
) -> None:
    server, api = served
    server.mode = "chunked"
    assert await request_json(api, "GET", "/a") == {"n": 1}
    assert await request_json(api, "GET", "/b") == {"n": 2}
    assert pool_of(api).opened == 1


async def test_a_request_past_its_timeout_is_unavailable_and_its_connection_not_reused(
    served: tuple[Server, client.ApiClient],
) -> None:
    server, api = served
    await request_json(api, "GET", "/warm")
    server.gate.clear()
    with pytest.raises(ApiUnavailable, match="TimeoutError"):
        await request_json(api, "GET", "/slow", timeout=0.2)
    server.gate.set()
    assert await request_json(api, "GET", "/next") == {"n": 3}
    assert pool_of(api).opened == 2  # the late answer to /slow can't be taken for /next's


async def test_closing_the_client_closes_its_idle_connections(
    served: tuple[Server, client.ApiClient],
) -> None:
    _, api = served
    await request_json(api, "GET", "/a")
    pool = pool_of(api)
    assert pool.idle_open() == 1
    await api.close()
    assert pool.idle_open() == 0


async def test_a_client_behind_a_proxy_or_told_so_keeps_the_aiohttp_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cfg = client.Configuration()
    cfg.host = "http://127.0.0.1:1"
    cfg.proxy = "http://proxy.example:3128"
    async with client.ApiClient(cfg) as proxied:
        assert lean_pool(proxied) is None
    monkeypatch.setenv(TRANSPORT_VARIABLE, "aiohttp")
    cfg.proxy = None
    async with client.ApiClient(cfg) as told:
        assert lean_pool(told) is None
    monkeypatch.setenv(TRANSPORT_VARIABLE, "http1")
    async with client.ApiClient(cfg) as lean:
        assert lean_pool(lean) is not None


async def test_a_connection_idle_past_the_keep_alive_time_is_closed_not_reused(
    served: tuple[Server, client.ApiClient], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, api = served
    await request_json(api, "GET", "/a")
    await request_json(api, "GET", "/b")
    assert pool_of(api).opened == 1
    monkeypatch.setattr(http1, "IDLE_S", 0.0)  # every idle connection is now too old
    await request_json(api, "GET", "/c")
    assert pool_of(api).opened == 2
    assert pool_of(api).idle_open() == 1


async def test_a_client_pointed_at_another_host_stops_using_the_old_connections(
    served: tuple[Server, client.ApiClient],
) -> None:
    _, api = served
    await request_json(api, "GET", "/a")
    api.configuration.host = "http://127.0.0.1:9"  # nothing listens there
    with pytest.raises(ApiUnavailable):
        await request_json(api, "GET", "/b", timeout=5)


async def test_a_garbled_answer_is_unavailable_with_what_was_wrong_in_the_message() -> None:
    async def garble(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 OK 200\r\nContent-Length: 0\r\n\r\n")
        await writer.drain()

    server = await asyncio.start_server(garble, "127.0.0.1", 0)
    cfg = client.Configuration()
    cfg.host = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    try:
        async with client.ApiClient(cfg) as api:
            with pytest.raises(ApiUnavailable, match="malformed status line b'HTTP/1\\.1 OK 200'"):
                await request_json(api, "GET", "/a", timeout=5)
    finally:
        server.close()
