"""The e2e benches' backlog mode on the real API server: pods made before any scheduler runs
count from the scheduler's start, and the phase ends when the last of them is seen bound.

The scheduler here is a stand-in that binds every pending pod of the namespace through the
Binding subresource when started (what is under test is the bench's timing, not a
scheduler); the API server is the real one."""

from __future__ import annotations

import os
import time
import uuid

from kubernetes_asyncio import client

from batchsched.bench.e2e_cluster import create_namespace, create_pods, delete_pods
from batchsched.bench.e2e_procs import CpuMeter
from batchsched.bench.harness_phase import backlog_phase
from batchsched.kube.client import request_json
from tests.builders import make_node
from tests.integration.helpers import create_node


class BindsAllOnStart:
    """Binds the namespace's pods to one node when started; no process of its own."""

    name = "stand-in"
    scheduler_name = "nobody"
    algorithm_metric = ("", "")

    def __init__(self, api: client.ApiClient, namespace: str, node: str) -> None:
        self.api, self.namespace, self.node = api, namespace, node
        self.started_at = 0.0
        self.seen_at_start = 0

    async def start(self) -> None:
        self.started_at = time.perf_counter()
        path = f"/api/v1/namespaces/{self.namespace}/pods"
        listing = await request_json(self.api, "GET", path)
        items = listing["items"] if isinstance(listing, dict) else []
        self.seen_at_start = len(items)
        for pod in items:
            name = pod["metadata"]["name"]
            binding = {
                "apiVersion": "v1",
                "kind": "Binding",
                "metadata": {"name": name},
                "target": {"apiVersion": "v1", "kind": "Node", "name": self.node},
            }
            await request_json(self.api, "POST", f"{path}/{name}/binding", body=binding)

    async def stop(self) -> None:
        pass

    def pid(self) -> int | None:
        return os.getpid()

    async def metrics(self) -> str:
        return ""

    def pod_watch_retries(self) -> int | None:
        return None


async def test_a_backlog_is_timed_from_the_scheduler_start_to_the_last_pod_bound(
    api: client.ApiClient,
) -> None:
    namespace = f"backlog-{uuid.uuid4().hex[:6]}"
    await create_namespace(api, namespace)
    await create_node(api, make_node("backlog-n1").pods(100))
    stand_in = BindsAllOnStart(api, namespace, "backlog-n1")
    created_before_start: list[float] = []

    async def create() -> None:
        await create_pods(api, namespace, "nobody", 12, 4)
        created_before_start.append(time.perf_counter())

    meter = CpuMeter({})
    try:
        phase = await backlog_phase(api, namespace, 12, create, stand_in, 60, meter=meter)
    finally:
        await delete_pods(api, namespace)

    assert stand_in.seen_at_start == 12  # every pod existed before the scheduler started
    assert phase.bound == 12
    assert created_before_start[0] <= phase.started <= stand_in.started_at
    # `created` is when start() returned: the stand-in binds inside it, so the last binding
    # may be seen before that; a real scheduler says it is ready first.
    assert phase.started <= phase.created and phase.started < phase.ended
    # Each pod counts from when the watch listed it, before the start, not from its binding.
    assert all(at <= phase.started for at in phase.watch.appeared.values())
    assert all(0 < latency < 60 for latency in phase.watch.latencies())
    assert phase.cpu_seconds["scheduler"] > 0  # from the stand-in's (this process's) birth
