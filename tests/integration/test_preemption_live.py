"""Preemption on a live scheduler against a real kube-apiserver: whole gangs evicted through the
Eviction API, PodDisruptionBudgets respected (a plan a budget does not allow is not started;
a 429 evicts nothing more and is not retried at once), preemptionPolicy Never, quota reclaim
across tenants, and the minimum runtime.

There are no kubelets: an evicted pod gets a deletionTimestamp and would stay Terminating for
ever. `Kubelet` below finalises such pods as a kubelet would once their containers stopped:
it deletes them with grace period 0 (it records their names: they are the victims). Pods
"start" when bound; where a test needs a pod that has run for an hour, or one that is Running
and Ready (the Eviction API ignores budgets for Pending pods), it writes the status as the
kubelet would. No disruption controller runs here either: tests write a budget's status as it
would compute it from the pods (so the numbers stay right where one does run).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client

from batchsched.kube.client import MERGE_PATCH, ApiError, request_json
from batchsched.kube.eviction import EvictionResult
from batchsched.runtime.app import App, RunOptions
from batchsched.runtime.preempting import Evictor
from batchsched.runtime.preemption_notes import PREEMPTION_ANNOTATION
from tests.builders import PodBuilder, make_node, make_pod
from tests.integration.control_plane import ControlPlane
from tests.integration.helpers import create_node, create_pod, delete_pod_now, wait_for
from tests.integration.live import events_for, node_of, pod, running_scheduler

NS = "default"
GROUPS = f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{NS}/podgroups"
PDBS = f"/apis/policy/v1/namespaces/{NS}/poddisruptionbudgets"
LOW, HIGH, NEVER = "batchsched-test-low", "batchsched-test-high", "batchsched-test-never"
GANG_LABEL = "scheduling.x-k8s.io/pod-group"
TIMEOUT = 30.0
POLICY = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget"}


class Kubelet:
    """Finalises Terminating pods (deletes them with grace 0) while `running`."""

    def __init__(self, api: client.ApiClient) -> None:
        self.api = api
        self.running = asyncio.Event()
        self.running.set()
        self.finalised: set[str] = set()

    async def run(self) -> None:
        core = client.CoreV1Api(self.api)
        while True:
            await self.running.wait()
            pods = await core.list_namespaced_pod(NS)
            for item in pods.items:
                if item.metadata.deletion_timestamp is not None:
                    self.finalised.add(item.metadata.name)
                    with contextlib.suppress(client.ApiException):
                        await delete_pod_now(self.api, NS, item.metadata.name)
            await asyncio.sleep(0.05)


@contextlib.asynccontextmanager
async def kubelet(api: client.ApiClient) -> AsyncIterator[Kubelet]:
    fake = Kubelet(api)
    task = asyncio.create_task(fake.run())
    try:
        yield fake
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def priority_classes(api: client.ApiClient) -> None:
    """Cluster-scoped, so created once and kept across tests."""
    for name, value, policy in (
        (LOW, 0, "PreemptLowerPriority"),
        (HIGH, 1000, "PreemptLowerPriority"),
        (NEVER, 1000, "Never"),
    ):
        body = {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": name},
            "value": value,
            "preemptionPolicy": policy,
        }
        try:
            await request_json(api, "POST", "/apis/scheduling.k8s.io/v1/priorityclasses", body=body)
        except ApiError as err:
            if err.status != 409:
                raise


def gpu_pod(name: str, gpus: int, priority_class: str = LOW) -> PodBuilder:
    return make_pod(name).gpus(gpus).cpu("1").set("spec.priorityClassName", priority_class)


async def create_gang(
    api: client.ApiClient, name: str, members: int, gpus: int, priority_class: str
) -> None:
    body = {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"minMember": members},
    }
    await request_json(api, "POST", GROUPS, body=body)
    for i in range(members):
        await create_pod(api, gpu_pod(f"{name}-{i}", gpus, priority_class).label(GANG_LABEL, name))


async def bound(api: client.ApiClient, name: str) -> bool:
    return bool(await node_of(api, NS, name))


async def all_bound(api: client.ApiClient, *names: str) -> bool:
    return all([await node_of(api, NS, n) for n in names])


async def exists(api: client.ApiClient, name: str) -> bool:
    try:
        await pod(api, NS, name)
    except ApiError as err:
        if err.status == 404:
            return False
        raise
    return True


async def started_an_hour_ago(api: client.ApiClient, name: str) -> None:
    """What the kubelet writes when the pod's containers start."""
    at = datetime.fromtimestamp(time.time() - 3600, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    path = f"/api/v1/namespaces/{NS}/pods/{name}/status"
    patch = {"status": {"startTime": at}}
    await request_json(api, "PATCH", path, body=patch, content_type=MERGE_PATCH)


async def notes(api: client.ApiClient, name: str, reason: str) -> list[str]:
    """The notes of this pod's Events with `reason`: the pod there now, not an earlier pod of
    the same name (another test's Events stay in the namespace)."""
    try:
        uid = (await pod(api, NS, name))["metadata"]["uid"]
    except ApiError as err:
        if err.status != 404:
            raise
        uid = None  # gone: every pod of that name
    return [
        str(e.get("note"))
        for e in await events_for(api, NS, name)
        if e["reason"] == reason and uid in (None, (e.get("regarding") or {}).get("uid"))
    ]


async def gpu_nodes(api: client.ApiClient, count: int) -> None:
    for i in range(count):
        await create_node(api, make_node(f"gpu-{i}").gpus(8).cpu("64"))


async def test_a_16_gpu_high_priority_gang_evicts_exactly_two_8_gpu_gangs_whole_and_binds(
    api: client.ApiClient, control_plane: ControlPlane
) -> None:
    await priority_classes(api)
    await gpu_nodes(api, 2)
    await create_node(api, make_node("cpu-0").cpu("64"))
    low = [f"low-{g}-{i}" for g in (1, 2) for i in range(2)]
    async with running_scheduler(control_plane) as app, kubelet(api) as fake:
        await create_pod(api, make_pod("cpu-job").cpu("1").set("spec.priorityClassName", LOW))
        for g in (1, 2):
            await create_gang(api, f"low-{g}", 2, 4, LOW)
        await wait_for(lambda: all_bound(api, "cpu-job", *low), TIMEOUT, "low gangs bound")

        fake.running.clear()  # victims stay Terminating until the checks below
        await create_gang(api, "high", 2, 8, HIGH)

        async def noted() -> bool:
            group: Any = await request_json(api, "GET", f"{GROUPS}/high")
            note = group["metadata"].get("annotations", {}).get(PREEMPTION_ANNOTATION, "")
            return "0 of 4 terminated" in str(note)

        await wait_for(noted, TIMEOUT, "the PodGroup says what it waits for")
        nominated = {
            (await pod(api, NS, f"high-{i}"))["status"].get("nominatedNodeName") for i in range(2)
        }
        assert nominated == {"gpu-0", "gpu-1"}
        victim_notes = await notes(api, "low-1-0", "Preempted")
        assert victim_notes and victim_notes[0].startswith(
            "preempted by gang default/high (priority 1000) to make room for 8 nvidia.com/gpu on"
        )

        fake.running.set()
        await wait_for(lambda: all_bound(api, "high-0", "high-1"), TIMEOUT, "high gang bound")
        assert fake.finalised == set(low)
        assert await node_of(api, NS, "cpu-job") == "cpu-0"
        assert app.metrics.preemption_victims._sum.get() == 4


async def budget(api: client.ApiClient, name: str, app_label: str) -> None:
    """A budget that allows no disruption, its status written as the disruption controller
    would (this control plane runs none)."""
    body = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": app_label}}},
    }
    created = await request_json(api, "POST", PDBS, body=body)
    status = {
        "observedGeneration": created["metadata"]["generation"],  # type: ignore[index]
        "disruptionsAllowed": 0,
        "currentHealthy": 1,
        "desiredHealthy": 1,
        "expectedPods": 1,
    }
    path = f"{PDBS}/{name}/status"
    await request_json(api, "PATCH", path, body={"status": status}, content_type=MERGE_PATCH)


async def max_unavailable(api: client.ApiClient, name: str, allowed: int, healthy: int) -> None:
    """Create or change budget `name` over the pods labelled app=db so that it allows
    `allowed` disruptions of `healthy` Ready pods (minAvailable healthy - allowed: the
    disruption controller computes that for bare pods too, so where a test session runs one
    it writes the same status as this function does)."""
    spec = {"minAvailable": healthy - allowed, "selector": {"matchLabels": {"app": "db"}}}
    try:
        body = {"metadata": {"name": name, "namespace": NS}, "spec": spec}
        obj = await request_json(api, "POST", PDBS, body={**POLICY, **body})
    except ApiError as err:
        if err.status != 409:
            raise
        path = f"{PDBS}/{name}"
        obj = await request_json(api, "PATCH", path, body={"spec": spec}, content_type=MERGE_PATCH)
    status = {
        "observedGeneration": obj["metadata"]["generation"],  # type: ignore[index]
        "disruptionsAllowed": allowed,
        "currentHealthy": healthy,
        "desiredHealthy": healthy - allowed,
        "expectedPods": healthy,
    }
    path = f"{PDBS}/{name}/status"
    await request_json(api, "PATCH", path, body={"status": status}, content_type=MERGE_PATCH)


async def running_and_ready(api: client.ApiClient, *names: str) -> None:
    """What the kubelet writes once the containers run and pass their readiness probe."""
    at = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    ready = {"type": "Ready", "status": "True", "lastTransitionTime": at}
    for name in names:
        patch = {"status": {"phase": "Running", "startTime": at, "conditions": [ready]}}
        path = f"/api/v1/namespaces/{NS}/pods/{name}/status"
        await request_json(api, "PATCH", path, body=patch, content_type=MERGE_PATCH)


async def terminating(api: client.ApiClient, name: str) -> bool:
    return (await pod(api, NS, name))["metadata"].get("deletionTimestamp") is not None


async def scheduling_condition(api: client.ApiClient, name: str) -> str:
    conditions = (await pod(api, NS, name))["status"].get("conditions", [])
    found = [c for c in conditions if c["type"] == "PodScheduled"]
    return str(found[0].get("message", "")) if found else ""


async def test_a_plan_a_budget_does_not_allow_is_not_started_until_the_budget_allows_it(
    api: client.ApiClient, control_plane: ControlPlane
) -> None:
    await priority_classes(api)
    await request_json(api, "DELETE", PDBS)
    await gpu_nodes(api, 1)
    try:
        async with running_scheduler(control_plane) as app, kubelet(api) as fake:
            for name in ("db-0", "db-1"):
                await create_pod(api, gpu_pod(name, 4).label("app", "db"))
            await wait_for(lambda: all_bound(api, "db-0", "db-1"), TIMEOUT, "db bound")
            await running_and_ready(api, "db-0", "db-1")
            await max_unavailable(api, "guard", allowed=1, healthy=2)
            await wait_for(lambda: len(app.budgets.budgets()) == 1, TIMEOUT, "budget seen")

            # Both db pods must go for it, and the budget allows one disruption.
            await create_pod(api, gpu_pod("urgent", 8, HIGH))
            why = (
                "preemption would violate PodDisruptionBudget default/guard "
                "(2 victims covered, 1 disruption allowed)"
            )

            async def told() -> bool:
                found = await notes(api, "urgent", "FailedScheduling")
                return any(why in n for n in found) and why in await scheduling_condition(
                    api, "urgent"
                )

            await wait_for(told, TIMEOUT, "FailedScheduling and PodScheduled saying why")
            assert not await terminating(api, "db-0") and not await terminating(api, "db-1")
            assert fake.finalised == set() and app.preempting.flights == {}
            assert await notes(api, "urgent", "Preempting") == []

            await max_unavailable(api, "guard", allowed=2, healthy=2)  # now it may
            await wait_for(lambda: bound(api, "urgent"), TIMEOUT, "urgent bound")
            assert fake.finalised == {"db-0", "db-1"}
    finally:
        await request_json(api, "DELETE", PDBS)


async def test_a_refused_eviction_evicts_nothing_more_and_is_not_retried_at_once(
    api: client.ApiClient, control_plane: ControlPlane
) -> None:
    await priority_classes(api)
    await request_json(api, "DELETE", PDBS)
    await gpu_nodes(api, 1)
    try:
        async with running_scheduler(control_plane) as app, kubelet(api) as fake:
            await create_pod(api, gpu_pod("db", 4).label("app", "db"))
            await create_pod(api, gpu_pod("plain", 4))
            await wait_for(lambda: all_bound(api, "db", "plain"), TIMEOUT, "both bound")
            await running_and_ready(api, "db", "plain")
            await max_unavailable(api, "guard", allowed=0, healthy=1)
            await wait_for(lambda: len(app.budgets.budgets()) == 1, TIMEOUT, "budget seen")
            # A stale view (the API server's says 0): the plan passes our check, and the
            # Eviction API refuses its first eviction with a real 429.
            real = app.preempting.budgets
            app.preempting.budgets = lambda: tuple(
                dataclasses.replace(b, disruptions_allowed=1) for b in real()
            )

            await create_pod(api, gpu_pod("urgent", 8, HIGH))

            async def released() -> bool:
                return bool(await notes(api, "urgent", "PreemptionReleased"))

            await wait_for(released, TIMEOUT, "the plan released after the 429")
            (note,) = await notes(api, "urgent", "PreemptionReleased")
            assert "preemption would violate PodDisruptionBudget default/guard" in note
            assert "the eviction of default/db was refused" in note
            await asyncio.sleep(3)  # inside the 5 s backoff: no second try
            assert len(await notes(api, "urgent", "PreemptionReleased")) == 1
            assert not await terminating(api, "plain")  # nothing more was evicted
            assert fake.finalised == set()

            app.preempting.budgets = real  # the view catches up, and the budget allows it now
            await max_unavailable(api, "guard", allowed=1, healthy=1)
            await wait_for(lambda: bound(api, "urgent"), TIMEOUT, "urgent bound")
            assert fake.finalised == {"db", "plain"}
    finally:
        await request_json(api, "DELETE", PDBS)


class SlowEvictions:
    def __init__(self, evictor: Evictor, delay_s: float) -> None:
        self.evictor = evictor
        self.delay_s = delay_s

    async def evict(self, namespace: str, name: str, uid: str) -> EvictionResult:
        await asyncio.sleep(self.delay_s)
        return await self.evictor.evict(namespace, name, uid)


async def test_a_gang_preempting_a_bigger_gang_binds_and_leaves_no_member_of_it_running(
    api: client.ApiClient, control_plane: ControlPlane
) -> None:
    # The 2 x 8-GPU gang fits once two of the four victims are gone; the other two go too.
    await priority_classes(api)
    await gpu_nodes(api, 4)
    low = [f"low-{i}" for i in range(4)]
    async with running_scheduler(control_plane) as app, kubelet(api) as fake:
        await create_gang(api, "low", 4, 8, LOW)
        await wait_for(lambda: all_bound(api, *low), TIMEOUT, "low gang bound")
        # Evictions answered slowly (a loaded API server): the kubelet ends each victim, and
        # the preemptor is placed, before the plan's last evictions are made.
        app.preempting.evictor = SlowEvictions(app.preempting.evictor, 0.5)
        await create_gang(api, "high", 2, 8, HIGH)
        await wait_for(lambda: all_bound(api, "high-0", "high-1"), TIMEOUT, "high gang bound")

        async def all_gone() -> bool:
            return not any([await exists(api, name) for name in low])

        await wait_for(all_gone, TIMEOUT, "every member of the victim gang gone")
        assert fake.finalised == set(low)
        for name in low:
            assert (await notes(api, name, "Preempted"))[0].startswith(
                "preempted by gang default/high (priority 1000)"
            )


async def test_a_pod_protected_by_a_disruption_budget_is_spared_when_another_victim_exists(
    api: client.ApiClient, control_plane: ControlPlane
) -> None:
    await priority_classes(api)
    await request_json(api, "DELETE", PDBS)
    await gpu_nodes(api, 2)
    try:
        async with running_scheduler(control_plane) as app, kubelet(api) as fake:
            await create_pod(api, gpu_pod("plain", 8))
            await create_pod(api, gpu_pod("guarded", 8).label("app", "guarded"))
            await wait_for(lambda: all_bound(api, "plain", "guarded"), TIMEOUT, "both bound")
            # Without the budget "guarded", younger, would be the cheaper victim.
            await started_an_hour_ago(api, "plain")
            await budget(api, "guard", "guarded")
            await wait_for(lambda: len(app.budgets.budgets()) == 1, TIMEOUT, "budget seen")

            await create_pod(api, gpu_pod("urgent", 8, HIGH))
            await wait_for(lambda: bound(api, "urgent"), TIMEOUT, "urgent bound")
            assert fake.finalised == {"plain"}
            assert await exists(api, "guarded")
    finally:
        await request_json(api, "DELETE", PDBS)


async def test_preemption_policy_never_preempts_nothing(
    api: client.ApiClient, control_plane: ControlPlane
) -> None:
    await priority_classes(api)
    await gpu_nodes(api, 1)
    async with running_scheduler(control_plane) as app, kubelet(api) as fake:
        await create_pod(api, gpu_pod("running", 8))
        await wait_for(lambda: bound(api, "running"), TIMEOUT, "running bound")
        await create_pod(api, gpu_pod("polite", 8, NEVER))

        async def told() -> bool:
            found = await notes(api, "polite", "FailedScheduling")
            return any("preemptionPolicy is Never" in n for n in found)

        await wait_for(told, TIMEOUT, "FailedScheduling saying it does not preempt")
        assert (await pod(api, NS, "running"))["metadata"].get("deletionTimestamp") is None
        assert fake.finalised == set()
        assert app.preempting.flights == {}
        assert await node_of(api, NS, "polite") == ""


QUOTA = """apiVersion: batchsched.io/v1alpha1
kind: QuotaConfig
tenants:
- {name: team-a, queues: [a], guaranteed: {nvidia.com/gpu: 8}}
- {name: team-b, queues: [b], guaranteed: {nvidia.com/gpu: 8}}
"""


async def test_a_tenant_below_its_guarantee_reclaims_from_a_borrowing_tenant(
    api: client.ApiClient, control_plane: ControlPlane, tmp_path: Path
) -> None:
    path = tmp_path / "quota.yaml"
    path.write_text(QUOTA)
    options = RunOptions(leader_elect=False, http_host="127.0.0.1", http_port=0, quota=path)
    await gpu_nodes(api, 2)
    async with running_scheduler(control_plane, options) as app, kubelet(api) as fake:
        # team-b uses all 16 GPUs: 8 of them borrowed above its guarantee.
        for name in ("b-old", "b-young"):
            await create_pod(api, make_pod(name).gpus(8).cpu("1").label("batchsched.io/queue", "b"))
            await wait_for(lambda n=name: bound(api, n), TIMEOUT, f"{name} bound")  # type: ignore[misc]
        # Same priority as team-b's pods: only the reclaim rule lets it preempt.
        await create_pod(api, make_pod("a-1").gpus(8).cpu("1").label("batchsched.io/queue", "a"))
        await wait_for(lambda: bound(api, "a-1"), TIMEOUT, "team-a's pod bound")
        assert fake.finalised == {"b-young"}
        assert await exists(api, "b-old")
        assert _gpus(app, "team-b") == 8


def _gpus(app: App, tenant: str) -> float:
    layer = app.scheduler.tenants
    assert layer is not None
    return layer.ledger.current(tenant).get("nvidia.com/gpu", 0) / 1000


async def test_victims_inside_the_minimum_runtime_are_spared(
    api: client.ApiClient, control_plane: ControlPlane
) -> None:
    await priority_classes(api)
    await gpu_nodes(api, 2)
    options = RunOptions(
        leader_elect=False, http_host="127.0.0.1", http_port=0, preemption_min_runtime=600.0
    )
    async with running_scheduler(control_plane, options), kubelet(api) as fake:
        await create_pod(api, gpu_pod("veteran", 8))
        await create_pod(api, gpu_pod("rookie", 8))
        await wait_for(lambda: all_bound(api, "veteran", "rookie"), TIMEOUT, "both bound")
        # Without the minimum runtime "rookie", younger, would be the cheaper victim.
        await started_an_hour_ago(api, "veteran")

        await create_pod(api, gpu_pod("urgent", 8, HIGH))
        await wait_for(lambda: bound(api, "urgent"), TIMEOUT, "urgent bound")
        assert fake.finalised == {"veteran"}
        assert await exists(api, "rookie")
