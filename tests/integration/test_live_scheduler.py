"""batchsched run against a real kube-apiserver: binding, foreign pods, unschedulable pods,
deletion during binding, and an API server restart mid-run."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

from kubernetes_asyncio import client

from batchsched.kube.client import ApiError
from batchsched.plugins.default_binder import BindingClient, DefaultBinder
from tests.builders import make_node, make_pod
from tests.integration.control_plane import ControlPlane
from tests.integration.helpers import create_node, create_pod, delete_pod_now, wait_for
from tests.integration.live import events_for, node_of, pod, running_scheduler

NS = "default"


async def test_pods_are_bound_by_resources_taints_and_affinity(
    api: client.ApiClient, control_plane: ControlPlane
) -> None:
    await create_node(api, make_node("small").cpu("1"))
    await create_node(api, make_node("ssd").cpu("8").label("disk", "ssd"))
    await create_node(api, make_node("tainted").cpu("8").taint("gpu", "bad"))
    async with running_scheduler(control_plane):
        await create_pod(api, make_pod("needs-ssd").node_selector(disk="ssd"))
        await create_pod(api, make_pod("large").cpu("6"))
        await create_pod(
            api,
            make_pod("tolerates")
            .toleration("gpu", "bad", "NoSchedule")
            .node_selector(**{"kubernetes.io/hostname": "tainted"}),
        )
        await create_pod(api, make_pod("too-large").cpu("7500m"))
        for name in ("needs-ssd", "large", "tolerates"):
            await wait_for(lambda n=name: node_of(api, NS, n), timeout=20, what=f"{name} bound")
        assert await node_of(api, NS, "needs-ssd") == "ssd"
        assert await node_of(api, NS, "large") == "ssd"  # the tainted node is not tolerated
        assert await node_of(api, NS, "tolerates") == "tainted"
        # ssd has 8 cpu, 6 taken: the 7.5-cpu pod fits nowhere
        await wait_for(lambda: _unschedulable(api, "too-large"), timeout=20, what="condition")
        assert await node_of(api, NS, "too-large") == ""


async def _unschedulable(api: client.ApiClient, name: str) -> bool:
    body = await pod(api, NS, name)
    conditions = body.get("status", {}).get("conditions") or []
    return any(
        c.get("type") == "PodScheduled"
        and c.get("status") == "False"
        and c.get("reason") == "Unschedulable"
        for c in conditions
    )


async def test_pods_of_other_schedulers_are_ignored_but_their_usage_counts(
    api: client.ApiClient, control_plane: ControlPlane
) -> None:
    await create_node(api, make_node("only").cpu("2"))
    await create_pod(
        api,
        make_pod("theirs-running")
        .scheduler("default-scheduler")
        .cpu("1500m")
        .set("spec.nodeName", "only"),
    )
    await create_pod(api, make_pod("theirs-pending").scheduler("someone-else").cpu("100m"))
    async with running_scheduler(control_plane) as app:
        await create_pod(api, make_pod("ours").cpu("1"))
        await wait_for(lambda: _unschedulable(api, "ours"), timeout=20, what="ours unschedulable")
        body = await pod(api, NS, "ours")
        message = next(c for c in body["status"]["conditions"] if c["type"] == "PodScheduled")
        assert message["message"] == "0/1 nodes are available: 1 Insufficient cpu."
        theirs = await pod(api, NS, "theirs-pending")
        assert not theirs["spec"].get("nodeName")
        assert not (theirs.get("status", {}).get("conditions") or [])
        assert app.scheduler.counts.attempts >= 1
        assert all(
            p.name != "theirs-pending" for info in app.cache.snapshot for p in info.pods.values()
        )


async def test_an_unschedulable_pod_gets_the_condition_and_event_then_binds_when_a_node_fits(
    api: client.ApiClient, control_plane: ControlPlane
) -> None:
    await create_node(api, make_node("tiny").cpu("1"))
    async with running_scheduler(control_plane):
        await create_pod(api, make_pod("waiting").cpu("3"))
        await wait_for(lambda: _unschedulable(api, "waiting"), timeout=20, what="condition")

        async def failed_event() -> bool:
            events = await events_for(api, NS, "waiting")
            return any(e.get("reason") == "FailedScheduling" for e in events)

        await wait_for(failed_event, timeout=20, what="FailedScheduling event")
        event = next(
            e for e in await events_for(api, NS, "waiting") if e["reason"] == "FailedScheduling"
        )
        assert event["note"] == "0/1 nodes are available: 1 Insufficient cpu."
        assert event["type"] == "Warning"
        await create_node(api, make_node("roomy").cpu("4"))
        await wait_for(lambda: node_of(api, NS, "waiting"), timeout=30, what="bound after NodeAdd")
        assert await node_of(api, NS, "waiting") == "roomy"

        async def scheduled_event() -> bool:
            return any(e.get("reason") == "Scheduled" for e in await events_for(api, NS, "waiting"))

        await wait_for(scheduled_event, timeout=20, what="Scheduled event")
        note = next(e for e in await events_for(api, NS, "waiting") if e["reason"] == "Scheduled")[
            "note"
        ]
        assert note == "Successfully assigned default/waiting to roomy"


class DeleteThenBind:
    """Deletes the pod through the API just before binding it: deletion during binding."""

    def __init__(self, api: client.ApiClient, real: BindingClient) -> None:
        self.api = api
        self.real = real
        self.deleted: list[str] = []

    async def bind(self, namespace: str, name: str, uid: str, node_name: str) -> None:
        if name.startswith("doomed"):
            await delete_pod_now(self.api, namespace, name)
            self.deleted.append(name)
        await self.real.bind(namespace, name, uid, node_name)


async def test_a_pod_deleted_while_binding_is_forgotten_and_not_retried(
    api: client.ApiClient, control_plane: ControlPlane
) -> None:
    await create_node(api, make_node("n1").cpu("2"))
    async with running_scheduler(control_plane) as app:
        binder = next(
            p for p in app.scheduler.profiles["gpu-scheduler"].bind if isinstance(p, DefaultBinder)
        )
        wrapper = DeleteThenBind(api, binder.client)
        binder.client = wrapper
        await create_pod(api, make_pod("doomed").cpu("1500m"))
        await wait_for(lambda: wrapper.deleted == ["doomed"], timeout=20, what="delete during bind")
        await wait_for(
            lambda: app.scheduler.counts.bind_failures == 1, timeout=20, what="bind failure"
        )
        await wait_for(
            lambda: sum(app.queue.counts().values()) == 0, timeout=20, what="queue empty"
        )
        info = app.cache.snapshot.get("n1")
        assert info is not None
        await wait_for(lambda: not info.pods, timeout=20, what="nothing counted on n1")
        # the capacity it briefly held is free again: a pod needing it binds
        await create_pod(api, make_pod("after").cpu("1500m"))
        await wait_for(lambda: node_of(api, NS, "after"), timeout=20, what="after bound")
        assert app.cache.is_assumed("doomed") is False


async def test_restarting_the_api_server_mid_run_loses_no_pod_and_binds_none_twice(
    api: client.ApiClient, control_plane: ControlPlane
) -> None:
    for i in range(4):
        await create_node(api, make_node(f"r{i}").cpu("4"))
    async with running_scheduler(control_plane) as app:
        for i in range(60):
            await create_pod(api, make_pod(f"before-{i}").cpu("100m"))
        await wait_for(lambda: app.scheduler.counts.bound >= 1, timeout=30, what="first binding")
        _kill_apiserver(control_plane.state_dir)
        control_plane.script("up", timeout=300)
        # the restarted API server must be reachable with the same client again
        for i in range(60):
            await _create_retrying(api, make_pod(f"after-{i}").cpu("100m"))

        async def all_bound() -> bool:
            pods = await client.CoreV1Api(api).list_namespaced_pod(NS)
            return len(pods.items) == 120 and all(p.spec.node_name for p in pods.items)

        await wait_for(all_bound, timeout=120, what="all 120 pods bound")
        # Nothing lost, nothing counted twice: the cache agrees with the API about where every
        # pod is. A binding whose answer was lost in the restart may have been applied by the
        # server (the watch then confirms it and the pod leaves the queue), so successful
        # answers plus failed ones cover all 120, and none was answered twice.
        pods = await client.CoreV1Api(api).list_namespaced_pod(NS)
        where = {p.metadata.uid: p.spec.node_name for p in pods.items}

        def counted() -> dict[str, str]:
            return {uid: info.name for info in app.cache.snapshot for uid in info.pods}

        # The watch delivers the last bindings a moment after the API shows them.
        await wait_for(lambda: counted() == where, timeout=30, what="cache agrees with API")
        assert counted() == where
        counts = app.scheduler.counts
        assert counts.bound <= 120 <= counts.bound + counts.bind_failures
        await wait_for(lambda: app.cache.assumed_count() == 0, timeout=30, what="all confirmed")


def _kill_apiserver(state: Path) -> None:
    pid = int((state / "kube-apiserver.pid").read_text().strip())
    os.kill(pid, signal.SIGKILL)


async def _create_retrying(api: client.ApiClient, builder: object) -> None:
    from tests.builders import PodBuilder

    assert isinstance(builder, PodBuilder)
    last: Exception | None = None
    for _ in range(100):
        try:
            await create_pod(api, builder)
            return
        except ApiError as err:
            if err.status == 409:  # an earlier try went through after all
                return
            last = err
        except Exception as err:  # the server may still be coming back
            last = err
            await asyncio.sleep(0.1)  # pacing between retries, not waiting for an outcome
    raise AssertionError(f"could not create pod: {last}")
