"""clientConnection qps/burst bound the requests the real API server receives."""

from __future__ import annotations

import asyncio
import time

from batchsched.kube.client import Throttle, api_client, limit_requests, request_json
from batchsched.kube.throttle import TokenBucket
from tests.integration.control_plane import ControlPlane


async def test_n_requests_at_qps_q_burst_b_reach_the_api_server_no_faster_than_n_minus_b_over_q(
    control_plane: ControlPlane,
) -> None:
    qps, burst, count = 20.0, 5, 45
    api = await api_client(str(control_plane.kubeconfig))
    async with api:
        limit_requests(api, Throttle(TokenBucket(qps, burst, time.monotonic)))
        answered_at: list[float] = []

        async def one() -> None:
            await request_json(api, "GET", "/api/v1/namespaces/default")
            answered_at.append(time.monotonic())

        started = time.monotonic()
        await asyncio.gather(*(one() for _ in range(count)))
    # The bucket starts full: `burst` go at once, the rest one per 1/qps. Only a lower bound
    # is asserted (a slow machine may take longer, never shorter).
    assert len(answered_at) == count
    assert max(answered_at) - started >= (count - burst) / qps - 0.01
