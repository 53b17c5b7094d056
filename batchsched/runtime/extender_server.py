"""`batchsched extender`: batchsched as an HTTP extender of an unmodified kube-scheduler.

It watches the cluster with the informers and cache of `batchsched run` (read-only: list and
watch, no scheduling loop, no writes, no leader election) and answers kube-scheduler's filter
and prioritize calls (k8s.io/kube-scheduler/extender/v1) with a profile's plugins on the live
snapshot (batchsched/extenders/answer.py): by default GpuTopology and DynamicResources, so
kube-scheduler gets batchsched's NVLink-aware GPU-set check and fragmentation-aware scoring,
and for pods with ResourceClaims the nodes where batchsched's allocator finds devices (best
NVLink/PCIe set first), while it keeps its own plugins, allocation, binding and preemption.
Until the Node and Pod informers have synced, filter answers an Error (an `ignorable`
extender is then skipped) rather than judge on an empty cache.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Final

from aiohttp import web
from kubernetes_asyncio.client import ApiClient

from batchsched.config import SchedulerConfig, config_from_mapping
from batchsched.extenders.answer import asked_names, filter_answer, prioritize_answer
from batchsched.extenders.protocol import Json
from batchsched.framework.profile import Profile
from batchsched.kube.client import api_client
from batchsched.model.errors import InvalidObject
from batchsched.model.pod import PodView, parse_pod
from batchsched.runtime.app import App
from batchsched.runtime.app_options import RunOptions

logger = logging.getLogger(__name__)

EXTENDER_PROFILE: Final = "batchsched-extender"
NOT_SYNCED: Final = "batchsched extender: informers not synced yet"


def extender_config() -> SchedulerConfig:
    """The default: one profile whose filter and score plugins are GpuTopology and
    DynamicResources (a queue sort and a binder are required of every profile; the extender
    uses neither, nor Reserve and PreBind)."""
    names = ("PrioritySort", "GpuTopology", "DynamicResources", "DefaultBinder")
    enabled = [{"name": n} for n in names]
    plugins = {"multiPoint": {"enabled": enabled, "disabled": [{"name": "*"}]}}
    return config_from_mapping(
        {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "profiles": [{"schedulerName": EXTENDER_PROFILE, "plugins": plugins}],
        }
    )


@dataclass(frozen=True, slots=True)
class ExtenderOptions:
    kubeconfig: str | None = None
    host: str = "0.0.0.0"
    port: int = 8888
    profile: str | None = None  # the config's profile to answer with; None: the first


Handler = Callable[[web.Request], Awaitable[web.Response]]


class ExtenderService:
    """The HTTP side: /filter, /prioritize, /healthz and /readyz over a watched App."""

    def __init__(self, app: App, profile: Profile) -> None:
        self.app = app
        self.profile = profile

    def synced(self) -> bool:
        return all(i.synced.is_set() for i in self.app.required)

    def routes(self) -> web.Application:
        web_app = web.Application(client_max_size=64 * 1024 * 1024)
        web_app.router.add_post("/filter", self.filter)
        web_app.router.add_post("/prioritize", self.prioritize)
        web_app.router.add_get("/healthz", self.healthz)
        web_app.router.add_get("/readyz", self.readyz)
        return web_app

    async def filter(self, request: web.Request) -> web.Response:
        args, pod = await _read(request)
        if pod is None:
            return web.json_response({"Error": args.get("error", "bad ExtenderArgs")})
        if not self.synced():
            return web.json_response({"Error": NOT_SYNCED})
        names, objects = asked_names(args)
        snapshot = self.app.cache.snapshot
        passed, failed, unresolvable = filter_answer(self.profile, snapshot, pod, names)
        answer: Json = {
            "FailedNodes": failed,
            "FailedAndUnresolvableNodes": unresolvable,
            "Error": "",
        }
        if objects is None:
            answer["NodeNames"] = passed
        else:
            answer["Nodes"] = {"items": [objects[n] for n in passed]}
        logger.debug("filter pod=%s passed=%d failed=%d", pod.key, len(passed), len(failed))
        return web.json_response(answer)

    async def prioritize(self, request: web.Request) -> web.Response:
        args, pod = await _read(request)
        if pod is None:
            return web.Response(status=400, text=str(args.get("error", "bad ExtenderArgs")))
        if not self.synced():
            return web.Response(status=503, text=NOT_SYNCED)
        names, _ = asked_names(args)
        answer = prioritize_answer(self.profile, self.app.cache.snapshot, pod, names)
        logger.debug("prioritize pod=%s scores=%s", pod.key, answer)
        return web.json_response(answer)

    async def healthz(self, request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def readyz(self, request: web.Request) -> web.Response:
        return web.Response(text="ok") if self.synced() else web.Response(status=503)


async def _read(request: web.Request) -> tuple[Json, PodView | None]:
    """ExtenderArgs and its pod parsed once; a bad one gives ({"error": why}, None)."""
    try:
        args = await request.json()
    except ValueError as err:
        return {"error": f"ExtenderArgs is not JSON: {err}"}, None
    pod = args.get("Pod") if isinstance(args, dict) else None
    if not isinstance(pod, dict):
        return {"error": "ExtenderArgs.Pod: want a Pod object"}, None
    try:
        return args, parse_pod(pod)
    except InvalidObject as err:
        return {"error": f"ExtenderArgs.Pod: {err}"}, None


def _profile(config: SchedulerConfig, name: str | None) -> Profile:
    profiles = config.build_profiles()
    return profiles[name] if name is not None else next(iter(profiles.values()))


async def serve_extender(
    options: ExtenderOptions, config: SchedulerConfig, stop: asyncio.Event | None = None
) -> int:
    """Watch and serve until SIGTERM/SIGINT (or `stop`); the exit code."""
    api = await api_client(options.kubeconfig)
    async with api:
        return await _serve(api, options, config, stop or asyncio.Event())


async def _serve(
    api: ApiClient, options: ExtenderOptions, config: SchedulerConfig, stop: asyncio.Event
) -> int:
    # The app of `batchsched run`, for its informers and cache only: it never leads,
    # schedules or writes (none of its pods names the extender's profile).
    app = App(RunOptions(leader_elect=False, http_port=0), config, api)
    service = ExtenderService(app, _profile(config, options.profile))
    runner = web.AppRunner(service.routes(), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, options.host, options.port)
    await site.start()
    logger.info("serving extender address=%s port=%d", options.host, options.port)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        async with asyncio.TaskGroup() as tasks:
            watching = [tasks.create_task(i.run()) for i in app.informers]
            await stop.wait()
            for task in watching:
                task.cancel()
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
        await runner.cleanup()
    return 0
