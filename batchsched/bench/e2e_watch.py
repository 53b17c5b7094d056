"""Observes the pods of one namespace from a single watch: when each appeared, when it bound
(`BindWatch`). `ResumedWatch`, the resumed watch under it, serves dra-e2e's claim watch too.

Both moments are taken on this process's clock as the events arrive, so a pod's latency
(bound − appeared) is what a client watching the API sees, with no clock skew between
processes. Times are `time.perf_counter()` values.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Mapping, Sequence

import aiohttp
from kubernetes_asyncio.client import ApiClient

from batchsched.bench.e2e_cluster import BenchError
from batchsched.kube.client import ApiUnavailable, open_stream, request_json
from batchsched.kube.informer import WatchLines, decode_event

WATCH_SECONDS = 3600
RECONNECT_DELAY_S = 0.2


class ResumedWatch:
    """One watch of `path`, resumed from the last event seen until cancelled: nothing lost,
    nothing counted twice. A subclass takes the listing it starts from (`_listed`) and each
    ADDED, MODIFIED and DELETED event (`_seen`). Run `run()` as a task; `wait_watching()`
    before creating what it should see."""

    def __init__(self, api: ApiClient, path: str) -> None:
        self.path = path
        self.reconnects = 0  # each one delays what this watch sees: it is reported
        self._api = api
        self._version = ""
        self._watching = asyncio.Event()

    async def wait_watching(self) -> None:
        await self._watching.wait()

    async def run(self) -> None:
        """Watch from the current state until cancelled."""
        listing = await request_json(self._api, "GET", self.path)
        self._listed(listing)
        self._version = _str_at(listing, "metadata", "resourceVersion")
        while True:
            # The server closes a watch that falls behind a burst; only a broken connection
            # waits first.
            try:
                await self._watch()
            except ApiUnavailable:
                await asyncio.sleep(RECONNECT_DELAY_S)
            self.reconnects += 1

    async def _watch(self) -> None:
        query = [
            ("watch", "true"),
            ("allowWatchBookmarks", "true"),
            ("resourceVersion", self._version),
            ("timeoutSeconds", str(WATCH_SECONDS)),
        ]
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=10.0)
        resp = await open_stream(self._api, self.path, query, timeout)
        self._watching.set()
        lines = WatchLines()
        try:
            async for chunk in resp.content.iter_any():
                for line in lines.feed(chunk):
                    self._apply(decode_event(line))
        except (aiohttp.ClientError, TimeoutError, OSError) as err:
            raise ApiUnavailable(f"watch {self.path}: {type(err).__name__}") from err
        finally:
            resp.release()

    def _apply(self, event: Mapping[str, object]) -> None:
        kind, obj = str(event["type"]), event["object"]
        assert isinstance(obj, Mapping)  # decode_event checked it
        if kind == "ERROR":
            # A 410 here would mean relisting, and what changed meanwhile would be lost.
            raise BenchError(f"watch on {self.path} failed: {obj.get('message')}")
        self._version = _str_at(obj, "metadata", "resourceVersion") or self._version
        if kind in ("ADDED", "MODIFIED", "DELETED"):
            self._seen(kind, obj)

    def _listed(self, listing: Mapping[str, object]) -> None:
        """What was there before the watch: nothing by default (the watch's ADDED events
        come after the listing's resourceVersion)."""

    def _seen(self, kind: str, obj: Mapping[str, object]) -> None:
        raise NotImplementedError


class BindWatch(ResumedWatch):
    """The pods of a namespace: `wait_all_bound()` after creating them."""

    def __init__(
        self, api: ApiClient, namespace: str, expected: int, *, count_listed: bool = False
    ) -> None:
        """`count_listed`: the pods already there when the watch starts count too (a backlog
        created before any scheduler ran), as appearing when they were listed."""
        super().__init__(api, f"/api/v1/namespaces/{namespace}/pods")
        self.expected = expected
        self.count_listed = count_listed
        self.appeared: dict[str, float] = {}
        self.bound: dict[str, float] = {}
        self._all_bound = asyncio.Event()

    async def wait_all_bound(self, deadline: float) -> bool:
        """True once `expected` pods were seen bound; False at `deadline` (perf_counter)."""
        try:
            await asyncio.wait_for(self._all_bound.wait(), max(0.0, deadline - time.perf_counter()))
        except TimeoutError:
            return False
        return True

    def _listed(self, listing: Mapping[str, object]) -> None:
        items = listing.get("items") if self.count_listed else None
        for item in items if isinstance(items, list) else ():
            if isinstance(item, Mapping):
                self._seen("ADDED", item)

    def _seen(self, kind: str, obj: Mapping[str, object]) -> None:
        if kind == "DELETED":
            return
        now = time.perf_counter()
        name = _str_at(obj, "metadata", "name")
        self.appeared.setdefault(name, now)
        if name not in self.bound and _str_at(obj, "spec", "nodeName"):
            self.bound[name] = now
            if len(self.bound) >= self.expected:
                self._all_bound.set()

    def latencies(self) -> list[float]:
        """Seconds from appearing to bound, for each bound pod."""
        return [at - self.appeared[name] for name, at in self.bound.items()]


def _str_at(obj: Mapping[str, object], section: str, field: str) -> str:
    part = obj.get(section)
    value = part.get(field) if isinstance(part, Mapping) else None
    return value if isinstance(value, str) else ""


def percentile(values: Sequence[float], q: float) -> float:
    """Purely computational: the nearest-rank q-th percentile (0 < q <= 100); nan if empty."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100.0 * len(ordered)))
    return ordered[rank - 1]
