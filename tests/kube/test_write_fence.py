"""The write fence: only the replica holding the Lease writes, checked at the one place every
request passes (`request_json`)."""

from __future__ import annotations

import pytest
from kubernetes_asyncio import client

from batchsched.kube.client import ApiUnavailable, NotLeading, fence_writes, request_json


@pytest.fixture
async def api() -> client.ApiClient:
    cfg = client.Configuration()
    cfg.host = "http://127.0.0.1:9"  # discard port: nothing answers, nothing is written
    async with client.ApiClient(cfg) as api_client:
        yield api_client


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "DELETE"])
async def test_a_fenced_client_refuses_every_write_before_it_leaves(
    api: client.ApiClient, method: str
) -> None:
    fence_writes(api, lambda: 0.0)
    with pytest.raises(NotLeading, match="not the leader"):
        await request_json(api, method, "/api/v1/namespaces/default/pods", body={})


async def test_reads_and_the_lease_s_own_writes_pass_the_fence(api: client.ApiClient) -> None:
    fence_writes(api, lambda: 0.0)
    for method, fenced in (("GET", True), ("PUT", False)):
        with pytest.raises(ApiUnavailable) as caught:
            await request_json(api, method, "/apis/x", body=None, fenced=fenced, timeout=2)
        assert not isinstance(caught.value, NotLeading)


async def test_the_fence_is_asked_at_every_write(api: client.ApiClient) -> None:
    leading = [True]
    fence_writes(api, lambda: 30.0 if leading[0] else 0.0)
    with pytest.raises(ApiUnavailable) as caught:
        await request_json(api, "POST", "/api/v1/x", body={}, timeout=2)
    assert not isinstance(caught.value, NotLeading)
    leading[0] = False
    with pytest.raises(NotLeading):
        await request_json(api, "POST", "/api/v1/x", body={}, timeout=2)


async def test_a_write_must_be_done_within_the_window_the_fence_gives() -> None:
    """A request stuck (here: a server that accepts and never answers) is dropped when the
    window ends, not sent late after a standby may have taken over."""
    import asyncio
    import time

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(30)

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    cfg = client.Configuration()
    cfg.host = f"http://127.0.0.1:{port}"
    async with server, client.ApiClient(cfg) as api_client:
        fence_writes(api_client, lambda: 0.5)
        started = time.monotonic()
        with pytest.raises(ApiUnavailable):
            await request_json(api_client, "POST", "/api/v1/x", body={}, timeout=30)
        assert time.monotonic() - started < 5


async def test_a_write_asks_the_fence_after_its_turn_in_the_rate_limit_not_before(
    api: client.ApiClient,
) -> None:
    """A write that waited in the token bucket must not use a window taken before the wait:
    leadership may have been lost meanwhile."""
    from batchsched.kube.client import Throttle, limit_requests
    from batchsched.kube.throttle import TokenBucket

    order: list[str] = []

    class Recording(TokenBucket):
        def reserve(self) -> float:
            order.append("token")
            return super().reserve()

    def window() -> float:
        order.append("fence")
        return 0.0

    limit_requests(api, Throttle(Recording(1000.0, 1, now=lambda: 0.0)))
    fence_writes(api, window)
    with pytest.raises(NotLeading):
        await request_json(api, "POST", "/api/v1/x", body={})
    assert order == ["token", "fence"]
