"""topology-e2e's timed phase: the gangs created as they arrive, each pod's bind and node seen
on the bench's watch, until every pod is bound or binding has settled; and the clean-up.

Unlike harness_phase's phase, this one need not end with every pod bound: pods never finish
here (plain Nodes, no kubelet), so a scheduler that packs badly may leave gangs that fit
nowhere. The phase then ends `settle` seconds after the last bind (or the last create), and
its clock stops at the last bind. CPU and the API server's writes are measured the same way
(harness_phase.api_writes, CpuMeter).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from kubernetes_asyncio.client import ApiClient

from batchsched.bench.e2e_cluster import create_object, delete_pods, run_bounded
from batchsched.bench.e2e_procs import CpuMeter
from batchsched.bench.e2e_topology_measure import Observed
from batchsched.bench.e2e_topology_workload import (
    PLUGINS_API,
    UPSTREAM_API,
    Encoding,
    Gang,
    group_objects,
    member_body,
    member_offsets,
)
from batchsched.bench.e2e_watch import BindWatch
from batchsched.bench.harness_phase import api_writes
from batchsched.kube.client import MERGE_PATCH, ApiError, request_json

_POLL_S: Final = 0.1


def group_api(encoding: Encoding) -> str:
    return f"/apis/{UPSTREAM_API if encoding is Encoding.UPSTREAM else PLUGINS_API}"


@dataclass(frozen=True, slots=True)
class Pacing:
    member_gap: float  # seconds between a gang's members
    concurrency: int  # create requests in flight at most
    timeout: float  # seconds from the first create
    settle: float  # seconds without a bind after which binding is over


class PlacementWatch(BindWatch):
    """A BindWatch that keeps each bound pod's node and the time of the last bind."""

    def __init__(self, api: ApiClient, namespace: str, expected: int) -> None:
        super().__init__(api, namespace, expected)
        self.nodes: dict[str, str] = {}
        self.last_bind = 0.0

    def _seen(self, kind: str, obj: Mapping[str, object]) -> None:
        before = len(self.bound)
        super()._seen(kind, obj)
        meta, spec = obj.get("metadata"), obj.get("spec")
        if len(self.bound) == before or not isinstance(meta, Mapping):
            return
        name = str(meta.get("name"))
        self.last_bind = self.bound[name]
        self.nodes[name] = str(spec.get("nodeName")) if isinstance(spec, Mapping) else ""

    async def wait_settled(self, since: float, deadline: float, idle: float) -> bool:
        """True once every expected pod is bound; False when none was bound for `idle`
        seconds (counted from `since` at the earliest) or at `deadline`."""
        while len(self.bound) < self.expected:
            now = time.perf_counter()
            if now >= deadline or now - max(since, self.last_bind) >= idle:
                return False
            await asyncio.sleep(_POLL_S)
        return True

    def observed(self) -> Observed:
        return Observed(dict(self.appeared), dict(self.bound), dict(self.nodes))


@dataclass
class TopologyPhase:
    watch: PlacementWatch
    started: float  # the first create request
    created: float  # the last create answered
    ended: float  # the last pod seen bound (the last create if none was)
    cpu_seconds: dict[str, float] = field(default_factory=dict)
    api_writes: dict[str, int] = field(default_factory=dict)

    @property
    def seconds(self) -> float:
        return self.ended - self.started


async def topology_phase(
    api: ApiClient,
    namespace: str,
    workload: Sequence[Gang],
    encoding: Encoding,
    scheduler_name: str,
    pacing: Pacing,
    meter: CpuMeter,
) -> TopologyPhase:
    watch = PlacementWatch(api, namespace, sum(g.members for g in workload))
    async with asyncio.TaskGroup() as tasks:
        watching = tasks.create_task(watch.run())
        await watch.wait_watching()
        before = await api_writes(api)
        meter.start()
        started = time.perf_counter()
        await create_paced(api, namespace, workload, encoding, scheduler_name, pacing, started)
        created = time.perf_counter()
        await watch.wait_settled(created, started + pacing.timeout, pacing.settle)
        cpu = meter.stop()
        ended = max(watch.bound.values(), default=created)
        watching.cancel()
    after = await api_writes(api)
    writes = {k: n - before.get(k, 0) for k, n in sorted(after.items())}
    positive = {k: n for k, n in writes.items() if n > 0}
    return TopologyPhase(watch, started, created, ended, cpu, positive)


async def create_paced(
    api: ApiClient,
    namespace: str,
    workload: Sequence[Gang],
    encoding: Encoding,
    scheduler_name: str,
    pacing: Pacing,
    started: float,
) -> None:
    """Each gang at its time after `started`: its group objects, then its members
    `member_gap` apart; gangs interleave, at most `concurrency` requests in flight."""
    slots = asyncio.Semaphore(pacing.concurrency)
    groups = f"{group_api(encoding)}/namespaces/{namespace}"
    pods = f"/api/v1/namespaces/{namespace}/pods"

    async def create(path: str, body: Mapping[str, object]) -> None:
        async with slots:
            await create_object(api, path, body)

    async def arrive(gang: Gang) -> None:
        await _sleep_until(started + gang.at)
        for resource, body in group_objects(gang, encoding):
            await create(f"{groups}/{resource}", body)
        for i, due in enumerate(member_offsets(gang, pacing.member_gap)):
            await _sleep_until(started + due)
            await create(pods, member_body(gang, i, encoding, scheduler_name))

    async with asyncio.TaskGroup() as tasks:
        for gang in workload:
            tasks.create_task(arrive(gang))


async def _sleep_until(moment: float) -> None:
    delay = moment - time.perf_counter()
    if delay > 0:
        await asyncio.sleep(delay)


async def clean_up(api: ApiClient, namespace: str, encoding: Encoding, concurrency: int) -> None:
    """Pods force-deleted (and the namespace), then the group objects; an upstream PodGroup's
    protection finalizer is dropped first, as no kube-controller-manager runs to drop it."""
    await delete_pods(api, namespace)
    base = f"{group_api(encoding)}/namespaces/{namespace}"
    if encoding is Encoding.UPSTREAM:
        listing = await request_json(api, "GET", f"{base}/podgroups")
        items = listing.get("items")
        names = [
            str(item["metadata"]["name"])
            for item in (items if isinstance(items, list) else [])
            if item.get("metadata", {}).get("finalizers")
        ]

        async def release(i: int) -> None:
            patch = {"metadata": {"finalizers": None}}
            path = f"{base}/podgroups/{names[i]}"
            try:
                await request_json(api, "PATCH", path, body=patch, content_type=MERGE_PATCH)
            except ApiError as err:
                if err.status != 404:
                    raise

        await run_bounded(len(names), concurrency, release)
        await request_json(api, "DELETE", f"{base}/workloads")
    await request_json(api, "DELETE", f"{base}/podgroups")
