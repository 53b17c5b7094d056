"""Pods that really run, finish and fail (KWOK's simulated kubelets), under batchsched.

What a scheduler is judged on past "bound": a gang member that finishes early leaves its
siblings running and the gang Finished; freed GPUs wake waiting gangs at once; a standby
replica writes nothing."""

from __future__ import annotations

import asyncio
import contextlib
import json
import statistics
import time
from typing import Any

from kubernetes_asyncio import client

from batchsched.kube.client import request_json
from tests.integration.control_plane import ControlPlane
from tests.integration.helpers import create_pod, wait_for
from tests.integration.kwok import create_kwok_nodes, failing_pod, succeeding_pod
from tests.integration.live import running_scheduler
from tests.integration.test_gangs_live import create_group, group_status

LABEL = "scheduling.x-k8s.io/pod-group"


def member(gang: str, index: int, seconds: float, gpus: int) -> Any:
    return succeeding_pod(f"{gang}-{index}", seconds).gpus(gpus).cpu("1").label(LABEL, gang)


async def phases(api: client.ApiClient, gang: str) -> dict[str, tuple[str, str]]:
    """name -> (phase, uid) of the gang's pods."""
    pods = await request_json(
        api, "GET", "/api/v1/namespaces/default/pods", query=[("labelSelector", f"{LABEL}={gang}")]
    )
    return {
        p["metadata"]["name"]: (p["status"].get("phase", ""), p["metadata"]["uid"])
        for p in pods.get("items") or []  # type: ignore[union-attr]
    }


async def test_a_member_finishing_early_leaves_its_siblings_running_and_the_gang_finishes(
    kwok_plane: ControlPlane, kwok_api: client.ApiClient
) -> None:
    """Before: the finished member vanished from the informer, the gang counted 2 of 3, and
    its running siblings were deleted after scheduleTimeoutSeconds."""
    api = kwok_api
    await create_kwok_nodes(api, 1, gpus=8, prefix="early")
    await create_group(api, "early", 3, scheduleTimeoutSeconds=2)
    async with running_scheduler(kwok_plane):
        await create_pod(api, member("early", 0, 1, gpus=2))
        await create_pod(api, member("early", 1, 10, gpus=2))
        await create_pod(api, member("early", 2, 10, gpus=2))
        await wait_for(lambda: _all_running(api), timeout=30, what="the gang running")
        created = {name: uid for name, (_, uid) in (await phases(api, "early")).items()}

        async def first_done_others_run() -> bool:
            status = await group_status(api, "early")
            return (status.get("succeeded"), status.get("running")) == (1, 2)

        await wait_for(first_done_others_run, timeout=30, what="1 succeeded, 2 running")
        assert (await group_status(api, "early"))["phase"] == "Running"

        async def finished() -> bool:
            return (await group_status(api, "early")).get("phase") == "Finished"

        await wait_for(finished, timeout=60, what="the gang Finished")
        final = await phases(api, "early")
        assert {name: uid for name, (_, uid) in final.items()} == created  # none replaced
        assert {phase for phase, _ in final.values()} == {"Succeeded"}
        assert (await group_status(api, "early"))["succeeded"] == 3


async def _all_running(api: client.ApiClient) -> bool:
    return {p for p, _ in (await phases(api, "early")).values()} == {"Running"}


async def test_a_failed_member_makes_the_gang_failed_and_its_gpus_free(
    kwok_plane: ControlPlane, kwok_api: client.ApiClient
) -> None:
    api = kwok_api
    await create_kwok_nodes(api, 1, gpus=8, prefix="failnode")
    await create_group(api, "fails", 2)
    async with running_scheduler(kwok_plane) as app:
        await create_pod(api, failing_pod("fails-0", 1).gpus(4).cpu("1").label(LABEL, "fails"))
        await create_pod(api, member("fails", 1, 30, gpus=4))

        async def failed() -> bool:
            return (await group_status(api, "fails")).get("phase") == "Failed"

        await wait_for(failed, timeout=30, what="the gang Failed")
        info = app.cache.snapshot.get("failnode-0")
        assert info is not None
        gpus = sum(p.requests.get("nvidia.com/gpu") for p in info.pods.values())
        assert gpus == 4  # the failed member's GPUs are free, the running one's are not


async def test_freed_gpus_wake_waiting_gangs_at_once(
    kwok_plane: ControlPlane, kwok_api: client.ApiClient
) -> None:
    """4 nodes x 8 GPUs, 12 gangs of 2 x 4-GPU pods running 4-9 s (4 gangs at a time): every
    gang runs to the end, each one placed soon after the pods whose end made its room."""
    api = kwok_api
    await create_kwok_nodes(api, 4, gpus=8, prefix="wake")
    watch = _PodTimes(api)
    watcher = asyncio.create_task(watch.run())
    try:
        async with running_scheduler(kwok_plane):
            for g in range(12):
                await create_group(api, f"w{g}", 2)
                for i in range(2):
                    await create_pod(api, member(f"w{g}", i, 4 + (g + i) % 6, gpus=4))

            async def all_done() -> bool:
                return len(watch.finished) == 24

            await wait_for(all_done, timeout=120, what="all 24 pods Succeeded")
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher
    waits = watch.wake_latencies()
    print(
        f"wake latency over {len(waits)} gangs placed after a completion: "
        f"p50 {statistics.median(waits):.2f}s max {max(waits):.2f}s"
    )
    # Not a performance bound: a wake-up by the event takes well under a second here; one
    # left to backoff or the periodic flush takes 10 s to 5 min.
    assert max(waits) < 8.0, waits


class _PodTimes:
    """Our own watch: when each pod was bound and when it finished (monotonic)."""

    def __init__(self, api: client.ApiClient) -> None:
        self.api = api
        self.bound: dict[str, float] = {}
        self.finished: dict[str, float] = {}

    async def run(self) -> None:
        w = client.CoreV1Api(self.api)
        while True:
            stream = await w.list_namespaced_pod("default", watch=True, _preload_content=False)
            async with stream:
                async for line in stream.content:
                    self._see(line)

    def _see(self, line: bytes) -> None:
        obj = json.loads(line).get("object", {})
        name = obj.get("metadata", {}).get("name", "")
        now = time.monotonic()
        if obj.get("spec", {}).get("nodeName"):
            self.bound.setdefault(name, now)
        if obj.get("status", {}).get("phase") == "Succeeded":
            self.finished.setdefault(name, now)

    def wake_latencies(self) -> list[float]:
        """For each gang bound after some pod had finished: its bind time minus the latest
        completion before it (the event that made its room, at the latest)."""
        gangs: dict[str, float] = {}
        for name, at in self.bound.items():
            gang = name.rsplit("-", 1)[0]
            gangs[gang] = max(gangs.get(gang, 0.0), at)
        out = []
        for at in gangs.values():
            before = [f for f in self.finished.values() if f <= at]
            if before:
                out.append(at - max(before))
        return out
