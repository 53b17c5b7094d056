"""SIGTERM stops the agent cleanly: its API client session is closed (aiohttp logs
"Unclosed client session" for one that is not) and its refresh task ends."""

from __future__ import annotations

import asyncio
import gc
import os
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from gpu.agent import Agent, AgentConfig
from gpu.agent_cli import KubePublisher, serve_agent
from gpu.fake_nvml import FakeNvml, host_numa
from gpu.machines import PCIE_SERVER
from gpu.nvml import NvmlReader
from tests.integration.helpers import wait_for


@pytest.fixture
async def apply_sink(tmp_path: Path) -> AsyncIterator[tuple[list[str], Path]]:
    """A local HTTP endpoint taking the agent's server-side apply (the shutdown is under
    test, not Kubernetes semantics), and a kubeconfig naming it."""
    seen: list[str] = []

    async def accept(request: web.Request) -> web.Response:
        seen.append(request.method)
        return web.json_response(await request.json())

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", accept)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        f"clusters: [{{name: c, cluster: {{server: 'http://127.0.0.1:{runner.addresses[0][1]}'}}}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\n"
    )
    try:
        yield seen, kubeconfig
    finally:
        await runner.cleanup()


async def test_sigterm_closes_the_agents_api_session_and_nothing_is_left_unclosed(
    apply_sink: tuple[list[str], Path], caplog: pytest.LogCaptureFixture
) -> None:
    seen, kubeconfig = apply_sink
    publisher = KubePublisher(str(kubeconfig))
    reader = NvmlReader(FakeNvml(PCIE_SERVER), host_numa(PCIE_SERVER))
    agent = Agent(reader, publisher, AgentConfig("node-a", "fake:pcie-server"))
    serving = asyncio.create_task(serve_agent(agent, "127.0.0.1:0"))
    await wait_for(lambda: "PATCH" in seen, what="the agent's first apply")
    session = publisher._api.rest_client.pool_manager  # type: ignore[union-attr]
    assert isinstance(session, aiohttp.ClientSession) and not session.closed

    os.kill(os.getpid(), signal.SIGTERM)
    await asyncio.wait_for(serving, timeout=10)

    assert session.closed
    del session, publisher, agent
    gc.collect()
    assert "Unclosed client session" not in caplog.text
