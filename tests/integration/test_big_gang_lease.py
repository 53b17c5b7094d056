"""A 1000-member gang on 500 nodes: its cycle holds the event loop for seconds (1.4-3 s on
this 2-core machine, printed), then 1000 bindings load the API server; the leader keeps its
Lease (renewDeadline 3 s) and binds the gang whole. The renewal thread itself is tested
against a loop held past the deadline in test_leader_blocked_loop.py."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Awaitable, Callable

from kubernetes_asyncio import client

from batchsched.kube.client import request_json
from tests.builders import make_node, make_pod
from tests.integration.control_plane import ControlPlane
from tests.integration.helpers import create_node, create_pod, wait_for
from tests.integration.test_gangs_live import create_group
from tests.integration.test_standby_writes import replica

NODES, MEMBERS = 500, 1000
LABEL = "scheduling.x-k8s.io/pod-group"


async def bounded(count: int, work: Callable[[int], Awaitable[object]], limit: int = 32) -> None:
    slots = asyncio.Semaphore(limit)

    async def one(i: int) -> None:
        async with slots:
            await work(i)

    await asyncio.gather(*(one(i) for i in range(count)))


async def bound_members(api: client.ApiClient) -> int:
    pods = await request_json(
        api, "GET", "/api/v1/namespaces/default/pods", query=[("labelSelector", f"{LABEL}=big")]
    )
    return sum(1 for p in pods.get("items") or [] if p["spec"].get("nodeName"))  # type: ignore[union-attr,index]


async def test_a_1000_member_gang_binds_whole_and_the_leader_keeps_its_lease(
    control_plane: ControlPlane, api: client.ApiClient
) -> None:
    lease = f"big-{uuid.uuid4().hex[:8]}"
    await bounded(NODES, lambda i: create_node(api, make_node(f"big-{i}").gpus(8).cpu("64")))
    async with replica(control_plane, "big-leader", lease, ("4s", "3s", "500ms")) as app:
        await wait_for(app.leading, timeout=30, what="leading")
        assert app.elector is not None
        # Members first: they wait for their PodGroup, so one cycle takes all 1000 at once.
        await bounded(
            MEMBERS,
            lambda i: create_pod(api, make_pod(f"big-{i}").gpus(4).cpu("1").label(LABEL, "big")),
        )
        await wait_for(
            lambda: len(app.gangs.members.get("default/big", ())) == MEMBERS,
            timeout=60,
            what="every member seen",
        )
        lag = asyncio.create_task(_longest_stall())
        started = time.monotonic()
        await create_group(api, "big", MEMBERS)

        async def all_bound() -> bool:
            assert app.leading(), "leadership lost during the gang's cycle"
            return await bound_members(api) == MEMBERS

        await wait_for(all_bound, timeout=300, what="all 1000 members bound")
        lag.cancel()
        stall = await _result(lag)
        print(
            f"1000-member gang bound in {time.monotonic() - started:.1f}s; "
            f"the event loop stalled up to {stall:.1f}s"
        )
        assert app.leading() and app.elector.holds_lease()
        holder = await request_json(
            api, "GET", f"/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/{lease}"
        )
        assert holder["spec"]["holderIdentity"] == "big-leader"  # type: ignore[index]


_STALLS: list[float] = []


async def _longest_stall() -> None:
    """How long the loop went without running us: the longest synchronous cycle."""
    _STALLS.clear()
    _STALLS.append(0.0)
    while True:
        before = time.monotonic()
        await asyncio.sleep(0.05)
        _STALLS[0] = max(_STALLS[0], time.monotonic() - before - 0.05)


async def _result(task: asyncio.Task[None]) -> float:
    with contextlib.suppress(asyncio.CancelledError):
        await task
    return _STALLS[0]
