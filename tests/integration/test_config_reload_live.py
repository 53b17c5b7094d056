"""Live reload of the KubeSchedulerConfiguration on a real kube-apiserver: the file is edited
while pods are being created and scheduled; no pod is lost, the placements after the reload
follow the new weights, and a bad edit keeps the config in force (metric, Event on the Lease)
while scheduling goes on.

Two node groups: pool "a" (4.00 per GPU-hour) and pool "b" (1.00). NodeAffinity's
addedAffinity prefers pool a, CostAware prefers pool b; which one wins is set by their
weights (10 against 1), so swapping the weights sends the pods to the other group.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client

from batchsched.config import load_config
from batchsched.kube.client import request_json
from batchsched.runtime.app import App, RunOptions
from batchsched.runtime.config_reload import INVALID, RELOADED
from tests.builders import make_node, make_pod
from tests.integration.control_plane import ControlPlane
from tests.integration.helpers import create_node, create_pod, wait_for
from tests.integration.live import events_for, node_of, running_scheduler

NS = "default"
PRICE = "batchsched.io/price-per-gpu-hour"
LEASE = "gpu-scheduler"  # the config's leaderElection resourceName


def config(affinity_weight: int, cost_weight: int) -> str:
    return f"""apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  resourceNamespace: {NS}
  resourceName: {LEASE}
profiles:
- schedulerName: gpu-scheduler
  plugins:
    score:
      enabled:
      - {{name: NodeAffinity, weight: {affinity_weight}}}
      - {{name: CostAware, weight: {cost_weight}}}
  pluginConfig:
  - name: NodeAffinity
    args:
      addedAffinity:
        preferredDuringSchedulingIgnoredDuringExecution:
        - weight: 100
          preference:
            matchExpressions: [{{key: pool, operator: In, values: [a]}}]
"""


PREFER_A = config(10, 1)
PREFER_B = config(1, 10)
BAD = PREFER_B.replace("name: CostAware", "name: CostAwre")


def write(path: Path, text: str) -> None:
    """Replace the file in one rename, as the kubelet's ConfigMap writer does."""
    staging = path.with_suffix(".tmp")
    staging.write_text(text)
    os.replace(staging, path)


def reloads(app: App, result: str) -> float:
    value = app.metrics.registry.get_sample_value(
        "batchsched_config_reload_total", {"result": result}
    )
    return value or 0.0


async def create_pods(api: client.ApiClient, prefix: str, count: int) -> list[str]:
    names = [f"{prefix}-{i}" for i in range(count)]
    for name in names:
        await create_pod(api, make_pod(name).cpu("100m"))
    return names


async def pools(api: client.ApiClient, names: list[str]) -> dict[str, str]:
    """Each pod's pool ("" while unbound)."""
    nodes = await asyncio.gather(*(node_of(api, NS, name) for name in names))
    return {name: node[:1] for name, node in zip(names, nodes, strict=True)}


async def wait_bound(api: client.ApiClient, names: list[str], what: str) -> dict[str, str]:
    async def all_bound() -> bool:
        return all((await pools(api, names)).values())

    await wait_for(all_bound, timeout=60, what=what)
    return await pools(api, names)


async def test_an_edited_config_is_swapped_in_while_pods_are_scheduled(
    api: client.ApiClient, control_plane: ControlPlane, tmp_path: Path
) -> None:
    for pool, price in (("a", "4.00"), ("b", "1.00")):
        for i in range(2):
            node = make_node(f"{pool}{i}").cpu("64").label("pool", pool).annotation(PRICE, price)
            await create_node(api, node)
    path = tmp_path / "scheduler-config.yaml"
    write(path, PREFER_A)
    options = RunOptions(
        leader_elect=False,
        http_host="127.0.0.1",
        http_port=0,
        config=path,
        config_poll_interval=0.05,
    )
    async with running_scheduler(control_plane, options, load_config(path)) as app:
        before = await create_pods(api, "before", 8)
        assert set((await wait_bound(api, before, "first pods bound")).values()) == {"a"}

        # Edit the file while pods are being created and scheduled.
        creating = asyncio.create_task(create_pods(api, "during", 16))
        await asyncio.sleep(0)  # a yield, not a wait: the first creations start before the edit
        write(path, PREFER_B)
        await wait_for(lambda: reloads(app, "success") == 1, timeout=20, what="reload")
        during = await creating
        placed = await wait_bound(api, during, "pods created during the reload bound")
        assert set(placed.values()) <= {"a", "b"}  # every one bound, on either side

        after = await create_pods(api, "after", 8)
        assert set((await wait_bound(api, after, "pods after the reload bound")).values()) == {"b"}
        scores = app.config.profile("gpu-scheduler").describe()["score"]  # what /configz shows
        assert {"NodeAffinity:1", "CostAware:10"} <= set(scores)

        # A bad edit keeps the weights in force, says why, and scheduling goes on.
        write(path, BAD)
        await wait_for(lambda: reloads(app, "error") == 1, timeout=20, what="rejection")
        later = await create_pods(api, "later", 4)
        assert set((await wait_bound(api, later, "pods after a bad edit bound")).values()) == {"b"}

        async def reported(reason: str) -> bool:
            return any(e.get("reason") == reason for e in await events_for(api, NS, LEASE))

        await wait_for(lambda: reported(INVALID), timeout=20, what="InvalidSchedulerConfig Event")
        await wait_for(lambda: reported(RELOADED), timeout=20, what="SchedulerConfigReloaded")
        (invalid,) = [e for e in await events_for(api, NS, LEASE) if e["reason"] == INVALID]
        assert invalid["type"] == "Warning"
        assert 'unknown plugin "CostAwre"' in invalid["note"]

    # No pod lost: every pod created is bound, once, to one of the four nodes.
    listing: Any = await request_json(api, "GET", f"/api/v1/namespaces/{NS}/pods")
    bound = {p["metadata"]["name"]: p["spec"].get("nodeName") for p in listing["items"]}
    assert sorted(bound) == sorted(before + during + after + later)
    assert set(bound.values()) <= {"a0", "a1", "b0", "b1"}
