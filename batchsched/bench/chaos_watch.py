"""The checker's own eyes: list+watch of pods, nodes, PodGroups, Events and the Lease.

Its own ApiClient with the admin credentials, straight to the API server (never through the
chaos proxy), and its own list/watch loop: none of the scheduler's informer code, which is
under test. Each stream resumes from the last resourceVersion it saw; on 410 Gone, or when
it cannot resume, it lists again and hands the whole list to the checker, which treats what
is missing as gone.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, TextIO

import aiohttp
from kubernetes_asyncio.client import ApiClient

from batchsched.bench.chaos_audit import parse_time
from batchsched.bench.chaos_checker import PREEMPTED_REASON, Checker
from batchsched.bench.chaos_pods import PodState, parse_pod
from batchsched.bench.chaos_workload import GROUPS_API
from batchsched.kube.client import ApiError, ApiUnavailable, open_stream, request_json

WATCH_SECONDS: Final = 300
RETRY_S: Final = 0.5
PAGE: Final = 1000

Handler = Callable[[str, Mapping[str, object], float], None]
Relist = Callable[[list[Mapping[str, object]], float], None]


class _Gone(Exception):
    """410: the resourceVersion we hold is too old to resume from."""


@dataclass
class Stream:
    api: ApiClient
    path: str
    on_event: Handler
    on_relist: Relist
    query: Sequence[tuple[str, str]] = ()
    relists: int = 0
    reconnects: int = 0
    synced: asyncio.Event = field(default_factory=asyncio.Event)
    _version: str = ""

    async def run(self) -> None:
        while True:
            try:
                if not self._version:
                    await self._list()
                await self._watch()
            except _Gone:
                self._version = ""
            except ApiError as err:
                if err.status == 410:  # as an HTTP answer rather than an ERROR event
                    self._version = ""
                else:
                    await asyncio.sleep(RETRY_S)
            except (ApiUnavailable, aiohttp.ClientError, TimeoutError, OSError, ValueError):
                await asyncio.sleep(RETRY_S)
            self.reconnects += 1

    async def _list(self) -> None:
        items: list[Mapping[str, object]] = []
        cont = ""
        while True:
            query = [*self.query, ("limit", str(PAGE))] + ([("continue", cont)] if cont else [])
            try:
                page = await request_json(self.api, "GET", self.path, query=query, timeout=120)
            except ApiError as err:
                if err.status == 410:  # the continue token expired: start over
                    items, cont = [], ""
                    continue
                raise
            found = page.get("items")
            items += [i for i in found if isinstance(i, Mapping)] if isinstance(found, list) else []
            meta = page.get("metadata")
            meta = meta if isinstance(meta, Mapping) else {}
            cont = str(meta.get("continue") or "")
            if not cont:
                self._version = str(meta.get("resourceVersion", ""))
                break
        self.relists += 1
        self.on_relist(items, time.time())
        self.synced.set()

    async def _watch(self) -> None:
        query = [
            *self.query,
            ("watch", "true"),
            ("allowWatchBookmarks", "true"),
            ("resourceVersion", self._version),
            ("timeoutSeconds", str(WATCH_SECONDS)),
        ]
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=10.0, sock_read=WATCH_SECONDS + 30)
        resp = await open_stream(self.api, self.path, query, timeout)
        try:
            buffer = b""
            async for chunk in resp.content.iter_any():
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    if line.strip():
                        self._apply(json.loads(line))
        finally:
            resp.release()

    def _apply(self, event: Mapping[str, object]) -> None:
        kind = str(event.get("type", ""))
        obj = event.get("object")
        if not isinstance(obj, Mapping):
            return
        if kind == "ERROR":
            if obj.get("code") == 410:
                raise _Gone(str(obj.get("message", "")))
            raise ApiUnavailable(f"watch {self.path}: {obj.get('message')}")
        meta = obj.get("metadata")
        version = meta.get("resourceVersion") if isinstance(meta, Mapping) else None
        if isinstance(version, str) and version:
            self._version = version
        if kind != "BOOKMARK":
            self.on_event(kind, obj, time.time())


@dataclass(frozen=True)
class LeaseSeen:
    at: float  # when this watch saw it (wall clock)
    holder: str
    acquired: float  # its acquireTime (wall clock of the replica that wrote it)


@dataclass
class LeaseHistory:
    seen: list[LeaseSeen] = field(default_factory=list)

    def apply(self, kind: str, obj: Mapping[str, object], now: float) -> None:
        spec = obj.get("spec")
        spec = spec if isinstance(spec, Mapping) else {}
        holder = str(spec.get("holderIdentity") or "")
        acquired = parse_time(str(spec.get("acquireTime") or ""))
        if kind != "DELETED" and (not self.seen or self.seen[-1].holder != holder):
            self.seen.append(LeaseSeen(now, holder, acquired))

    def relisted(self, items: list[Mapping[str, object]], now: float) -> None:
        for item in items:
            self.apply("MODIFIED", item, now)

    def next_holder(self, after: float, other_than: str) -> LeaseSeen | None:
        """The first holder other than `other_than` that acquired after `after`."""
        for entry in self.seen:
            if entry.holder and entry.holder != other_than and entry.acquired >= after:
                return entry
        return None


@dataclass
class CheckerWatch:
    """Streams feeding one `Checker`; `pod_gone` listeners hear of every pod that went."""

    api: ApiClient
    checker: Checker
    lease_namespace: str
    lease_name: str
    leases: LeaseHistory = field(default_factory=LeaseHistory)
    pod_gone: list[Callable[[PodState], None]] = field(default_factory=list)
    trace: TextIO | None = None  # every pod change seen, one line each
    streams: list[Stream] = field(default_factory=list)

    def __post_init__(self) -> None:
        lease_path = f"/apis/coordination.k8s.io/v1/namespaces/{self.lease_namespace}/leases"
        self.streams = [
            Stream(self.api, "/api/v1/nodes", self._node, self._nodes),
            Stream(self.api, f"{GROUPS_API}/podgroups", self._group, self._groups),
            Stream(self.api, "/api/v1/pods", self._pod, self._pods),
            Stream(
                self.api,
                "/api/v1/events",
                self._event,
                self._events,
                query=[("fieldSelector", f"reason={PREEMPTED_REASON}")],
            ),
            Stream(
                self.api,
                lease_path,
                self.leases.apply,
                self.leases.relisted,
                query=[("fieldSelector", f"metadata.name={self.lease_name}")],
            ),
        ]

    async def run(self) -> None:
        async with asyncio.TaskGroup() as tasks:
            for stream in self.streams:
                tasks.create_task(stream.run())

    async def wait_synced(self) -> None:
        await asyncio.gather(*(s.synced.wait() for s in self.streams))

    def relists(self) -> int:
        return sum(max(0, s.relists - 1) for s in self.streams)  # the first list is not one

    def _event(self, kind: str, obj: Mapping[str, object], now: float) -> None:
        self.checker.event_seen(obj, now)

    def _events(self, items: list[Mapping[str, object]], now: float) -> None:
        for item in items:
            self.checker.event_seen(item, now)

    def _node(self, kind: str, obj: Mapping[str, object], now: float) -> None:
        self.checker.node_event(kind, obj, now)

    def _nodes(self, items: list[Mapping[str, object]], now: float) -> None:
        for item in items:
            self.checker.node_event("MODIFIED", item, now)

    def _group(self, kind: str, obj: Mapping[str, object], now: float) -> None:
        self.checker.group_event(kind, obj)

    def _groups(self, items: list[Mapping[str, object]], now: float) -> None:
        for item in items:
            self.checker.group_event("MODIFIED", item)

    def _pod(self, kind: str, obj: Mapping[str, object], now: float) -> None:
        pod = parse_pod(obj)
        self._trace(now, kind, pod)
        self.checker.pod_event(kind, obj, now)
        if kind == "DELETED":
            self._tell_gone(pod)

    def _pods(self, items: list[Mapping[str, object]], now: float) -> None:
        before = dict(self.checker.pods)
        self.checker.pods_relisted(items, now)
        for uid, pod in before.items():
            if uid not in self.checker.pods:
                self._trace(now, "GONE-ON-RELIST", pod)
                self._tell_gone(pod)
        for uid, pod in self.checker.pods.items():
            if before.get(uid) != pod:
                self._trace(now, "RELISTED", pod)

    def _trace(self, now: float, kind: str, pod: PodState) -> None:
        """One line per pod change seen: the evidence behind a violation."""
        if self.trace is not None:
            self.trace.write(
                f"{now:.3f} {kind} {pod.key} uid={pod.uid} node={pod.node or '-'} "
                f"phase={pod.phase}{' deleting' if pod.deleting else ''}\n"
            )

    def _tell_gone(self, pod: PodState) -> None:
        for listener in self.pod_gone:
            listener(pod)
