"""What `request_json` puts on the wire, and how many requests it keeps in flight, against a
tiny local HTTP server: the request path, not Kubernetes semantics, is under test here (the
real API server, with client certificates and tokens, is in tests/integration)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Mapping
from typing import Any

import pytest
from aiohttp import web
from kubernetes_asyncio import client

from batchsched.kube.client import ApiUnavailable, limit_in_flight, request_json
from tests.kube.stub_server import stub_api


class Server:
    """Answers 200 {"ok": true}; each answer waits for `gate` (set: no wait)."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, Mapping[str, str], bytes]] = []
        self.peers: set[object] = set()
        self.gate = asyncio.Event()
        self.gate.set()
        self.in_flight = 0
        self.most_in_flight = 0

    async def handle(self, request: web.Request) -> web.Response:
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        transport = request.transport
        self.peers.add(None if transport is None else transport.get_extra_info("peername"))
        body = await request.read()
        self.requests.append((request.method, request.path_qs, request.headers.copy(), body))
        try:
            await self.gate.wait()
        finally:
            self.in_flight -= 1
        return web.json_response({"ok": True})


@pytest.fixture
async def served() -> AsyncIterator[tuple[Server, client.ApiClient]]:
    server = Server()
    async with stub_api(server.handle, before_cleanup=server.gate.set) as api:
        yield server, api


async def test_a_request_carries_its_json_query_content_type_and_the_client_s_headers(
    served: tuple[Server, client.ApiClient],
) -> None:
    server, api = served
    api.user_agent = "batchsched-test/1"
    body = {"target": {"kind": "Node", "name": "n1"}, "note": "ü"}
    answer = await request_json(
        api,
        "POST",
        "/api/v1/namespaces/default/pods/p/binding",
        query=[("dryRun", "All"), ("fieldManager", "a b")],
        body=body,
        content_type="application/merge-patch+json",
    )
    assert answer == {"ok": True}
    method, path_qs, headers, sent = server.requests[0]
    assert method == "POST"
    assert path_qs == "/api/v1/namespaces/default/pods/p/binding?dryRun=All&fieldManager=a+b"
    assert json.loads(sent) == body
    assert headers["Content-Type"] == "application/merge-patch+json"
    assert headers["Accept"] == "application/json"
    assert headers["User-Agent"] == "batchsched-test/1"


async def test_each_request_asks_for_the_bearer_token_afresh_so_a_rotated_one_is_used(
    served: tuple[Server, client.ApiClient],
) -> None:
    server, api = served
    cfg = api.configuration
    tokens = iter(["Bearer first", "Bearer rotated"])

    def refresh(configuration: Any) -> None:  # what in-cluster config installs
        configuration.api_key["BearerToken"] = next(tokens)

    cfg.api_key["BearerToken"] = "Bearer stale"
    cfg.refresh_api_key_hook = refresh
    await request_json(api, "GET", "/api/v1/nodes")
    await request_json(api, "GET", "/api/v1/nodes")
    sent = [headers.get("authorization") for _, _, headers, _ in server.requests]
    assert sent == ["Bearer first", "Bearer rotated"]


async def test_a_limited_client_keeps_at_most_its_limit_in_flight_on_as_many_connections(
    served: tuple[Server, client.ApiClient],
) -> None:
    server, api = served
    limit_in_flight(api, 3)
    server.gate.clear()
    requests = [
        asyncio.create_task(request_json(api, "POST", "/apis/events.k8s.io/v1/x", body={}))
        for _ in range(20)
    ]
    while server.in_flight < 3:
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.05)  # room for a fourth, were it let through
    assert server.in_flight == 3
    server.gate.set()
    await asyncio.gather(*requests)
    assert server.most_in_flight == 3 and len(server.requests) == 20
    assert len(server.peers) <= 3  # the connections were reused, not one per request


async def test_the_wait_for_a_turn_counts_against_the_request_s_timeout(
    served: tuple[Server, client.ApiClient],
) -> None:
    server, api = served
    limit_in_flight(api, 1)
    server.gate.clear()
    first = asyncio.create_task(request_json(api, "GET", "/api/v1/nodes", timeout=5.0))
    while server.in_flight < 1:
        await asyncio.sleep(0.01)
    with pytest.raises(ApiUnavailable):
        await request_json(api, "GET", "/api/v1/pods", timeout=0.2)
    server.gate.set()
    assert await first == {"ok": True}
    assert [path for _, path, _, _ in server.requests] == ["/api/v1/nodes"]
