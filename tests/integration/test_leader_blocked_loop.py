"""A scheduling cycle that holds the event loop for longer than the renew deadline (a
1000-member gang takes seconds) must not cost the lease: renewals run on their own thread."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator

import pytest
from kubernetes_asyncio import client

from batchsched.kube.leader import LeaderElectionConfig, LeaderElector, LeadershipLost

NAMESPACE = "kube-system"
LEASE_S, RENEW_S, RETRY_S = 3.0, 2.0, 0.5
BLOCK_S = 5.0  # the main loop is held this long: over twice the renew deadline


@pytest.fixture
async def lease(api: client.ApiClient) -> AsyncIterator[str]:
    name = f"blocked-{uuid.uuid4().hex[:10]}"
    yield name
    with contextlib.suppress(client.ApiException):
        await client.CoordinationV1Api(api).delete_namespaced_lease(name, NAMESPACE)


def elector(api: client.ApiClient, lease: str, on_thread: bool) -> LeaderElector:
    cfg = LeaderElectionConfig(
        namespace=NAMESPACE,
        name=lease,
        identity=f"replica-{uuid.uuid4().hex[:6]}",
        lease_duration=LEASE_S,
        renew_deadline=RENEW_S,
        retry_period=RETRY_S,
    )
    factory = (lambda: client.ApiClient(api.configuration)) if on_thread else None
    return LeaderElector(api, cfg, renew_client=factory)


async def lead_through_a_blocked_loop(candidate: LeaderElector) -> tuple[bool, bool]:
    """Lead, hold the loop BLOCK_S with a synchronous computation, then look: (still the
    leader, may still write)."""
    blocked = asyncio.Event()

    async def lead() -> None:
        await asyncio.sleep(RETRY_S)  # one renewal first
        _compute_for(BLOCK_S)  # a long, synchronous scheduling cycle, as the core's are
        blocked.set()
        await asyncio.sleep(RETRY_S * 3)  # what the loop does next sees the result

    task = asyncio.create_task(candidate.run(lead))
    try:
        async with asyncio.timeout(30):
            await blocked.wait()
        leading_after = candidate.is_leader and candidate.holds_lease()
        result: object = None
        with contextlib.suppress(LeadershipLost):
            result = await asyncio.wait_for(task, timeout=30)
        return leading_after, result is None and not task.cancelled() and task.exception() is None
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, LeadershipLost):
            await task


def _compute_for(seconds: float) -> None:
    """Pure Python holding the GIL, as a scheduling cycle does (not a sleep, which lets
    other threads run freely)."""
    until = time.monotonic() + seconds
    total = 0
    while time.monotonic() < until:
        total += sum(i * i for i in range(1000))


async def test_renewals_on_their_own_thread_survive_a_blocked_loop(
    api: client.ApiClient, lease: str
) -> None:
    candidate = elector(api, lease, on_thread=True)
    leading, ended_cleanly = await lead_through_a_blocked_loop(candidate)
    assert leading and ended_cleanly
    spec = (await client.CoordinationV1Api(api).read_namespaced_lease(lease, NAMESPACE)).spec
    assert spec.holder_identity == candidate.identity


async def test_renewals_on_the_blocked_loop_itself_lose_the_lease(
    api: client.ApiClient, lease: str
) -> None:
    """The same run without the thread: the blocked loop misses the deadline. Shows the test
    above can fail, and why the live scheduler renews on a thread."""
    candidate = elector(api, lease, on_thread=False)
    leading, ended_cleanly = await lead_through_a_blocked_loop(candidate)
    assert not leading and not ended_cleanly
    assert not candidate.holds_lease()
