"""A tiny local HTTP server behind a kubernetes_asyncio client, for the tests of the request
path (what goes on the wire, retries, pooling): not Kubernetes semantics, which the real API
server in tests/integration covers."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

from aiohttp import web
from kubernetes_asyncio import client

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@asynccontextmanager
async def stub_api(
    handle: Handler, before_cleanup: Callable[[], None] | None = None
) -> AsyncIterator[client.ApiClient]:
    """A client of a server on a free loopback port that answers every method and path with
    `handle`; `before_cleanup` runs before the server stops (e.g. to release held answers)."""
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    cfg = client.Configuration()
    cfg.host = f"http://127.0.0.1:{runner.addresses[0][1]}"
    try:
        async with client.ApiClient(cfg) as api:
            yield api
    finally:
        if before_cleanup is not None:
            before_cleanup()
        await runner.cleanup()
