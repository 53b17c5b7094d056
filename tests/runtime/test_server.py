"""/healthz, /readyz and /metrics over a real loopback socket (port 0, no sleeps)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping

import aiohttp
import pytest

from batchsched.metrics import SchedulerMetrics
from batchsched.runtime.server import RunningServer, readyz_report, serve


class Probes:
    """Mutable answers the endpoints read on every request."""

    def __init__(self) -> None:
        self.health: tuple[bool, str] = (True, "ok")
        self.checks: dict[str, tuple[bool, str]] = {"informers-synced": (True, "ok")}
        self.leading = False
        self.raise_in_checks = False

    def healthy(self) -> tuple[bool, str]:
        return self.health

    def ready(self) -> Mapping[str, tuple[bool, str]]:
        if self.raise_in_checks:
            raise RuntimeError("cache gone")
        return self.checks

    def leader(self) -> bool:
        return self.leading


@pytest.fixture
def probes() -> Probes:
    return Probes()


@pytest.fixture
def metrics() -> SchedulerMetrics:
    return SchedulerMetrics()


@pytest.fixture
async def server(probes: Probes, metrics: SchedulerMetrics) -> AsyncIterator[RunningServer]:
    running = await serve(
        "127.0.0.1",
        0,
        health=probes.healthy,
        ready=probes.ready,
        metrics=metrics,
        leader=probes.leader,
    )
    async with running:
        yield running


async def get(server: RunningServer, path: str) -> tuple[int, str, str]:
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://127.0.0.1:{server.port}{path}") as response,
    ):
        return response.status, await response.text(), response.headers["Content-Type"]


async def test_serve_returns_once_listening_on_the_bound_port(server: RunningServer) -> None:
    assert server.port > 0
    status, body, _ = await get(server, "/healthz")
    assert (status, body) == (200, "ok")


async def test_healthz_fails_with_the_reason_when_a_loop_died(
    server: RunningServer, probes: Probes
) -> None:
    probes.health = (False, "scheduling loop exited")
    status, body, _ = await get(server, "/healthz")
    assert status == 500
    assert "scheduling loop exited" in body


@pytest.mark.parametrize(
    ("checks", "leading", "status", "lines"),
    [
        (
            {"informers-synced": (True, "ok")},
            True,
            200,
            ["[+]informers-synced ok", "leader: true", "readyz check passed"],
        ),
        (
            {"informers-synced": (True, "ok")},
            False,
            200,
            ["[+]informers-synced ok", "leader: false", "readyz check passed"],
        ),
        (
            {"informers-synced": (False, "pods not synced"), "config": (True, "ok")},
            False,
            503,
            [
                "[-]informers-synced failed: pods not synced",
                "[+]config ok",
                "leader: false",
                "readyz check failed",
            ],
        ),
    ],
    ids=[
        "a leader with synced informers is ready",
        "a standby with synced informers is ready too",
        "unsynced informers make it unready and say why",
    ],
)
async def test_readyz_lists_each_check_and_the_leader_line(
    server: RunningServer,
    probes: Probes,
    checks: dict[str, tuple[bool, str]],
    leading: bool,
    status: int,
    lines: list[str],
) -> None:
    probes.checks, probes.leading = checks, leading
    got_status, body, _ = await get(server, "/readyz")
    assert got_status == status
    assert body.splitlines() == lines


async def test_readyz_reports_a_raising_check_as_unready(
    server: RunningServer, probes: Probes
) -> None:
    probes.raise_in_checks = True
    status, body, _ = await get(server, "/readyz")
    assert status == 503
    assert "cache gone" in body


async def test_metrics_serves_the_scheduler_registry_in_text_format(
    server: RunningServer, metrics: SchedulerMetrics
) -> None:
    metrics.schedule_attempts.labels(result="scheduled", profile="gpu-scheduler").inc(3)
    status, body, content_type = await get(server, "/metrics")
    assert status == 200
    assert content_type.startswith("text/plain")
    sample = 'scheduler_schedule_attempts_total{profile="gpu-scheduler",result="scheduled"} 3.0'
    assert sample in body


async def test_closing_the_server_frees_the_port(probes: Probes, metrics: SchedulerMetrics) -> None:
    running = await serve(
        "127.0.0.1", 0, health=probes.healthy, ready=probes.ready, metrics=metrics
    )
    await running.close()
    with pytest.raises(aiohttp.ClientConnectionError):
        await get(running, "/healthz")


def test_readyz_without_leader_election_has_no_leader_line() -> None:
    ready, body = readyz_report({}, None)
    assert ready
    assert body == "readyz check passed\n"
