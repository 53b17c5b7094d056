"""List+watch of one resource, parsed from raw JSON straight into our lean views.

The protocol logic is pure and tested without an API server (kube/informer_store.py,
re-exported here): `ObjectStore` diffs a list against what the handler has seen and applies
watch events, `WatchLines` splits the stream (`client.Backoff` spaces reconnects). `Informer`
is the thin shell that moves the bytes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final, Generic, TypeVar

import aiohttp
from kubernetes_asyncio.client import ApiClient

from batchsched.clock import Clock, SystemClock
from batchsched.kube.client import ApiError, ApiUnavailable, Backoff, open_stream, request_json
from batchsched.kube.informer_store import Expired as Expired
from batchsched.kube.informer_store import InformerHandler as InformerHandler
from batchsched.kube.informer_store import Listing as Listing
from batchsched.kube.informer_store import ObjectStore as ObjectStore
from batchsched.kube.informer_store import WatchLines as WatchLines
from batchsched.kube.informer_store import decode_event as decode_event
from batchsched.kube.informer_store import object_meta

log = logging.getLogger(__name__)

T = TypeVar("T")

PAGE_SIZE: Final = 500
# The server ends each watch after timeoutSeconds; the jitter spreads reconnects of many
# replicas, and the client-side limit on top catches a connection that silently died.
WATCH_TIMEOUT_S: Final = 300.0
WATCH_GRACE_S: Final = 30.0
# A watch that lived this long was healthy: the next failure starts backing off from scratch.
HEALTHY_AFTER_S: Final = 10.0
RECONNECT_MAX_S: Final = 5.0


@dataclass(frozen=True, slots=True)
class ResourceSpec:
    kind: str
    path: str  # the collection: /api/v1/pods, /apis/scheduling.k8s.io/v1/priorityclasses
    field_selector: str = ""
    label_selector: str = ""


NODES: Final = ResourceSpec("Node", "/api/v1/nodes")
# Like kube-scheduler: finished pods hold nothing, and one that finishes leaves the selection,
# which the watch reports as DELETED, so the cache frees its resources.
# Every pod, finished ones included (kube-scheduler filters those out): a gang's finished
# members count toward its quorum and its PodGroup status, and a pod's final phase must reach
# the cache as an update, so its resources are freed the moment it ends.
PODS: Final = ResourceSpec("Pod", "/api/v1/pods")
PRIORITY_CLASSES: Final = ResourceSpec(
    "PriorityClass", "/apis/scheduling.k8s.io/v1/priorityclasses"
)
# Dynamic Resource Allocation (resource.k8s.io/v1, GA in Kubernetes 1.34).
DEVICE_CLASSES: Final = ResourceSpec("DeviceClass", "/apis/resource.k8s.io/v1/deviceclasses")
RESOURCE_SLICES: Final = ResourceSpec("ResourceSlice", "/apis/resource.k8s.io/v1/resourceslices")
RESOURCE_CLAIMS: Final = ResourceSpec("ResourceClaim", "/apis/resource.k8s.io/v1/resourceclaims")
# The node agent's GPU topology, one cluster-scoped object per node (gpu/nrt.py).
NODE_RESOURCE_TOPOLOGIES: Final = ResourceSpec(
    "NodeResourceTopology", "/apis/topology.node.k8s.io/v1alpha2/noderesourcetopologies"
)


class Informer(Generic[T]):
    """List, then watch from the list's resourceVersion, forever; cancel to stop.

    `run()` may be called again after a cancellation: it resumes watching from where it
    stopped, and relists (delivering what changed, deletes included) if that is too old.
    """

    def __init__(
        self,
        api: ApiClient,
        resource: ResourceSpec,
        parse: Callable[[Mapping[str, object]], T],
        handler: InformerHandler[T],
        *,
        key: Callable[[T], str],
        on_invalid: Callable[[Mapping[str, object], Exception], None] | None = None,
        clock: Clock | None = None,
        rng: random.Random | None = None,
        page_size: int = PAGE_SIZE,
        watch_timeout: float = WATCH_TIMEOUT_S,
    ) -> None:
        self.resource = resource
        self.synced = asyncio.Event()
        self.store: ObjectStore[T] = ObjectStore(resource.kind, parse, handler, key, on_invalid)
        self._api = api
        self._clock: Clock = clock or SystemClock()
        self._rng = rng or random.Random()
        # Reconnects back off to 5 s at most: after an API server restart a cache that stays
        # stale for long is worse than a few more requests.
        self._backoff = Backoff(self._rng, maximum=RECONNECT_MAX_S)
        self._resync = asyncio.Event()  # a fresh list is wanted now (resync())
        self._wanted = 0  # resync requests made, and the last one a list began after
        self._served = 0
        self._list_done = asyncio.Event()
        self._stream: aiohttp.ClientResponse | None = None
        self._page_size = page_size
        self._watch_timeout = watch_timeout
        self._listed = False
        self._delivered = 0  # watch events applied, to tell a busy watch from a failing one

    async def wait_synced(self) -> None:
        await self.synced.wait()

    async def run(self) -> None:
        while True:
            started = self._clock.now()
            delivered = self._delivered
            relisted = not self._listed or self._resync.is_set()
            try:
                if relisted:
                    await self._list()
                await self._watch()
            except Expired as err:
                log.info("watch expired kind=%s error=%s; relisting", self.resource.kind, err)
                self._listed = False
                if relisted:  # expired right after a fresh list: don't spin on it
                    await self._wait_before_retry(started, err)
                continue
            except (ApiError, ApiUnavailable) as err:
                await self._wait_before_retry(started, err)
                continue
            # A watch that delivered events and then ended (the API server closes a watcher it
            # finds slow during a burst) resumes at once from the last resourceVersion; only a
            # short watch that delivered nothing backs off.
            if self._delivered == delivered and self._clock.now() - started < HEALTHY_AFTER_S:
                await self._wait_before_retry(started, "watch ended early")

    async def _wait_before_retry(self, started: float, why: object) -> None:
        if self._resync.is_set():
            return  # a fresh list is wanted at once (it too backs off if it fails)
        if self._clock.now() - started >= HEALTHY_AFTER_S:
            self._backoff.reset()
        delay = self._backoff.next_delay()
        log.warning(
            "informer retry kind=%s delay=%.2fs listed=%s error=%s",
            self.resource.kind,
            delay,
            self._listed,
            why,
        )
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._resync.wait(), delay)

    def _selectors(self) -> list[tuple[str, str]]:
        query = []
        if self.resource.field_selector:
            query.append(("fieldSelector", self.resource.field_selector))
        if self.resource.label_selector:
            query.append(("labelSelector", self.resource.label_selector))
        return query

    async def relist(self) -> None:
        """List now and deliver the difference (what a 410 Gone leads to); tests force one."""
        await self._list()

    async def resync(self) -> None:
        """Have the running informer list afresh now (cutting its watch, or its wait before
        a retry, short) and return once the store holds that list. A new leader calls it
        before its first cycle: a watch that has not yet caught up after an API server
        restart must not let it place pods on GPUs that another replica just bound."""
        self._wanted += 1
        wanted = self._wanted
        self._resync.set()
        if self._stream is not None:
            self._stream.close()
        while self._served < wanted:
            self._list_done.clear()
            await self._list_done.wait()

    async def _list(self) -> None:
        start = time.perf_counter()
        serving = self._wanted  # the resync requests this list answers
        listing: Listing[T] = Listing([], set())
        version, token = "", ""
        while True:
            query = [*self._selectors(), ("limit", str(self._page_size))]
            if token:
                query.append(("continue", token))
            page = await request_json(self._api, "GET", self.resource.path, query=query)
            meta = object_meta(page)
            version = version or str(meta.get("resourceVersion") or "")
            items = page.get("items")
            part = self.store.parse_items(items if isinstance(items, list) else [])
            listing.entries.extend(part.entries)
            listing.unreadable.update(part.unreadable)
            token = str(meta.get("continue") or "")
            if not token:
                break
        adds, updates, deletes = self.store.replace(listing, version)
        self._listed = True
        self._served = max(self._served, serving)
        if self._served >= self._wanted:
            self._resync.clear()
        self._list_done.set()
        self.synced.set()
        log.info(
            "listed kind=%s items=%d adds=%d updates=%d deletes=%d rv=%s seconds=%.3f",
            self.resource.kind,
            len(listing.entries),
            adds,
            updates,
            deletes,
            version,
            time.perf_counter() - start,
        )

    async def _watch(self) -> None:
        seconds = int(self._watch_timeout * (1.0 + self._rng.random()))
        query = [
            *self._selectors(),
            ("watch", "true"),
            ("allowWatchBookmarks", "true"),
            ("resourceVersion", self.store.resource_version),
            ("timeoutSeconds", str(seconds)),
        ]
        timeout = aiohttp.ClientTimeout(total=seconds + WATCH_GRACE_S, sock_connect=10.0)
        try:
            resp = await open_stream(self._api, self.resource.path, query, timeout)
        except ApiError as err:
            if err.status == 410:
                raise Expired(err.message) from err
            raise
        self._stream = resp
        try:
            if not self._resync.is_set():
                await self._consume(resp)
        except (aiohttp.ClientError, TimeoutError, OSError) as err:
            raise ApiUnavailable(f"watch {self.resource.kind}: {type(err).__name__}") from err
        finally:
            self._stream = None
            resp.release()

    async def _consume(self, resp: aiohttp.ClientResponse) -> None:
        lines = WatchLines()
        async for chunk in resp.content.iter_any():
            for line in lines.feed(chunk):
                try:
                    event = decode_event(line)
                except ValueError as err:
                    # A garbled stream cannot be trusted past this point: resume from the
                    # last event we applied.
                    raise ApiUnavailable(f"watch {self.resource.kind}: {err}") from err
                self.store.apply(event)
                self._delivered += 1
