"""The bench's side of the workload: the cluster objects, the gangs as they arrive, and what
a training operator does when a member pod goes away (it creates it again, same name).

A member that disappears before it finished (a preemption victim, one the bench deleted, or
one deleted by mistake) is created again as soon as its name is free, so every gang can
still run to its end: a recreated pod is a new uid under the old name.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

from kubernetes_asyncio.client import ApiClient

from batchsched.bench.chaos_checker import Checker
from batchsched.bench.chaos_pods import PodState, finished_by_itself
from batchsched.bench.chaos_workload import (
    GROUPS_API,
    PRIORITY_CLASSES,
    TENANTS,
    GangSpec,
    member_body,
    namespace_of,
    node_body,
    pdb_body,
    pod_group_body,
    priority_class_body,
)
from batchsched.bench.e2e_cluster import create_nodes, create_object, create_or_keep
from batchsched.kube.client import ApiError, ApiUnavailable, request_json

_RECREATE_TIMEOUT_S: Final = 120.0
_RETRY_S: Final = 0.5


async def set_up_cluster(api: ApiClient, nodes: int, concurrency: int) -> None:
    """Namespaces, PriorityClasses and KWOK nodes chaos-node-0..N-1 (kept when present)."""
    for tenant in TENANTS:
        body: dict[str, object] = {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": namespace_of(tenant)},
        }
        await create_or_keep(api, "/api/v1/namespaces", body)
    for name, value, policy in PRIORITY_CLASSES:
        await create_or_keep(
            api,
            "/apis/scheduling.k8s.io/v1/priorityclasses",
            priority_class_body(name, value, policy),
        )
    await create_nodes(api, nodes, concurrency, prefix="chaos-node", body=node_body)


async def wait_nodes_ready(api: ApiClient, nodes: int, timeout: float) -> None:
    """KWOK marks each node Ready; the scheduler would skip the others."""
    deadline = time.monotonic() + timeout
    while True:
        listing = await request_json(
            api, "GET", "/api/v1/nodes", query=[("labelSelector", "bench.batchsched.io/chaos")]
        )
        items = listing.get("items")
        ready = sum(1 for n in items if _ready(n)) if isinstance(items, list) else 0
        if ready >= nodes:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"{ready}/{nodes} KWOK nodes Ready after {timeout:.0f}s: is kwok up?"
            )
        await asyncio.sleep(1.0)


def _ready(node: object) -> bool:
    status = node.get("status") if isinstance(node, dict) else None
    conditions = status.get("conditions") if isinstance(status, dict) else None
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (conditions if isinstance(conditions, list) else [])
        if isinstance(c, dict)
    )


@dataclass
class Operator:
    api: ApiClient
    checker: Checker
    gangs: list[GangSpec]
    concurrency: int
    log: Callable[[str], None]
    created: dict[str, float] = field(default_factory=dict)  # gang key -> when created
    recreated: list[tuple[str, str, float]] = field(default_factory=list)  # key, old uid, at
    by_key: dict[str, GangSpec] = field(default_factory=dict)
    running: bool = True
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)
    _limit: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(32))

    def __post_init__(self) -> None:
        self.by_key = {g.key: g for g in self.gangs}
        self._limit = asyncio.Semaphore(self.concurrency)
        for g in self.gangs:
            self.checker.expect_gang(
                g.key, g.members(), g.min_member, may_fail=g.fail_member is not None
            )

    async def run(self, t0: float) -> None:
        """Create each gang at its arrival time (wall clock t0 + arrival)."""
        async with asyncio.TaskGroup() as tasks:
            for gang in self.gangs:
                delay = t0 + gang.arrival_s - time.time()
                if delay > 0:
                    await asyncio.sleep(delay)
                tasks.create_task(self._create_gang(gang))

    async def _create_gang(self, gang: GangSpec) -> None:
        ns = gang.namespace
        await self._retrying(f"{GROUPS_API}/namespaces/{ns}/podgroups", pod_group_body(gang))
        if gang.pdb:
            path = f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets"
            await self._retrying(path, pdb_body(gang))
        pods = f"/api/v1/namespaces/{ns}/pods"
        await asyncio.gather(
            *(self._retrying(pods, member_body(gang, i)) for i in range(gang.size))
        )
        self.created[gang.key] = time.time()

    async def _retrying(self, path: str, body: dict[str, object]) -> None:
        """Create; the API server may be restarting (a fault), so keep trying for a while."""
        deadline = time.monotonic() + _RECREATE_TIMEOUT_S
        while True:
            try:
                async with self._limit:
                    await create_or_keep(self.api, path, body)
                return
            except (ApiUnavailable, ApiError) as err:
                if time.monotonic() > deadline:
                    self.log(f"operator: giving up creating {path} {body.get('metadata')}: {err}")
                    return
                await asyncio.sleep(_RETRY_S)

    # A member went away

    def pod_gone(self, pod: PodState) -> None:
        """A watch saw `pod` go: unless it had finished by itself, create it again (same
        name). A pod that ended Failed after its deletion began was killed, not finished."""
        if not self.running or finished_by_itself(pod) or pod.gang not in self.by_key:
            return
        gang = self.by_key[pod.gang]
        name = pod.key.rsplit("/", 1)[1]
        index = int(name.rsplit("-", 1)[1])
        self.log(f"operator: {pod.key} uid={pod.uid} went ({pod.phase}); creating it again")
        task = asyncio.get_running_loop().create_task(self._recreate(gang, index, pod.uid))
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            self.log(f"operator: recreating a member failed: {task.exception()!r}")

    async def _recreate(self, gang: GangSpec, index: int, old_uid: str) -> None:
        key = f"{gang.namespace}/{gang.member(index)}"
        path = f"/api/v1/namespaces/{gang.namespace}/pods"
        deadline = time.monotonic() + _RECREATE_TIMEOUT_S
        while self.running:
            try:
                async with self._limit:
                    await create_object(self.api, path, member_body(gang, index))
                self.recreated.append((key, old_uid, time.time()))
                return
            except (ApiError, ApiUnavailable) as err:
                # 409 while the old pod is still terminating; no answer while the API
                # server restarts.
                if time.monotonic() > deadline:
                    self.log(f"operator: could not recreate {key}: {err}")
                    return
            await asyncio.sleep(_RETRY_S)

    async def delete_member(self, pod: PodState) -> bool:
        """The bench's own deletion (this uid only, with the pod's grace period: KWOK removes
        it then, as a kubelet would); the checker hears of it first. Retried while the API
        server does not answer (it may be restarting or overloaded).

        Not grace 0: KWOK v0.8 keeps a force-deleted running pod's pending stages by name and
        later deletes the same-named successor (seen: g00009-0's second incarnation, deleted
        by kwok 1 s after it was bound, its log naming the first one's node)."""
        self.checker.deleted_by_bench(pod.uid)
        namespace, name = pod.key.split("/", 1)
        body = {"preconditions": {"uid": pod.uid}}
        path = f"/api/v1/namespaces/{namespace}/pods/{name}"
        deadline = time.monotonic() + _RECREATE_TIMEOUT_S
        while True:
            try:
                await request_json(self.api, "DELETE", path, body=body)
                return True
            except ApiError as err:
                # 404, or 409 on the uid precondition: that pod is gone already (perhaps by
                # our own earlier try whose answer was lost).
                if err.status in (404, 409):
                    return True
                self.log(f"bench delete of {pod.key} failed: {err}")
                return False
            except ApiUnavailable as err:
                if time.monotonic() > deadline:
                    self.log(f"bench delete of {pod.key} failed: {err}")
                    return False
            await asyncio.sleep(_RETRY_S)

    async def stop(self) -> None:
        self.running = False
        for task in list(self._tasks):
            task.cancel()
