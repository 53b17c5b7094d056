"""A relist that is the first to see a pod deleted and recreated under the same name (PyTorchJob
workers and StatefulSet pods reuse names) must free the old pod and take in the new one,
through the app's own informer, handlers, cache and queue."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from kubernetes_asyncio import client

from batchsched.config import default_config
from batchsched.runtime.app import App, RunOptions
from tests.builders import make_node, make_pod
from tests.integration.control_plane import ControlPlane
from tests.integration.helpers import create_node, create_pod, delete_pod_now, wait_for
from tests.integration.live import scheduler_api


def informer(app: App, kind: str) -> Any:
    return next(i for i in app.informers if i.resource.kind == kind)


def cpu_on(app: App, node: str) -> int:
    info = app.cache.snapshot.get(node)
    assert info is not None
    return info.req_milli_cpu


async def test_a_relist_sees_a_same_named_pod_as_a_delete_and_an_add(
    control_plane: ControlPlane, api: client.ApiClient
) -> None:
    await create_node(api, make_node("relist-n1").cpu("4"))
    await create_pod(api, make_pod("worker-0").cpu("2").node("relist-n1"))
    await create_pod(api, make_pod("worker-1").cpu("1").node("relist-n1"))
    async with await scheduler_api(control_plane) as sched_api:
        app = App(RunOptions(leader_elect=False), default_config(), sched_api)
        await informer(app, "Node").relist()
        await informer(app, "Pod").relist()
        assert cpu_on(app, "relist-n1") == 3000
        old_uids = {p.uid for p in informer(app, "Pod").store.views()}

        # Deleted and recreated while the scheduler was not watching: worker-0 comes back
        # pending (ours, to schedule), worker-1 comes back already bound by someone else.
        await delete_pod_now(api, "default", "worker-0")
        await delete_pod_now(api, "default", "worker-1")
        await create_pod(api, make_pod("worker-0").cpu("2"))
        await create_pod(api, make_pod("worker-1").cpu("1").node("relist-n1"))
        await informer(app, "Pod").relist()

        uids = {p.uid for p in informer(app, "Pod").store.views()}
        assert len(uids) == 2 and not uids & old_uids
        assert cpu_on(app, "relist-n1") == 1000  # the old worker-0 freed, worker-1 once
        queued = app.queue.pop_ready()
        assert queued is not None and queued.pod.name == "worker-0"
        assert queued.pod.uid in uids


async def test_resync_cuts_a_running_watch_and_returns_with_a_fresh_list(
    control_plane: ControlPlane, api: client.ApiClient
) -> None:
    """What a new leader does before its first cycle; the informer keeps watching after."""
    await create_node(api, make_node("resync-n1").cpu("4"))
    async with await scheduler_api(control_plane) as sched_api:
        app = App(RunOptions(leader_elect=False), default_config(), sched_api)
        pods = informer(app, "Pod")
        await informer(app, "Node").relist()
        task = asyncio.create_task(pods.run())
        try:
            await asyncio.wait_for(pods.wait_synced(), timeout=30)
            await create_pod(api, make_pod("resync-a").cpu("1").node("resync-n1"))
            await asyncio.wait_for(asyncio.gather(pods.resync(), pods.resync()), timeout=30)
            assert cpu_on(app, "resync-n1") == 1000  # in the fresh list, whatever the watch did
            await create_pod(api, make_pod("resync-b").cpu("1").node("resync-n1"))

            async def watched() -> bool:
                return cpu_on(app, "resync-n1") == 2000

            await wait_for(watched, timeout=30, what="the watch resumed after the resync")
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
