"""List+watch of one resource, parsed from raw JSON straight into our lean views.

The protocol logic is pure and tested without an API server: `ObjectStore` diffs a list
against what the handler has seen and applies watch events, `WatchLines` splits the stream
(`client.Backoff` spaces reconnects). `Informer` is the thin shell that moves the bytes.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Generic, Protocol, TypeVar

import aiohttp
from kubernetes_asyncio.client import ApiClient

from batchsched.clock import Clock, SystemClock
from batchsched.kube.client import ApiError, ApiUnavailable, Backoff, open_stream, request_json

log = logging.getLogger(__name__)

T = TypeVar("T")
T_contra = TypeVar("T_contra", contravariant=True)

PAGE_SIZE: Final = 500
# The server ends each watch after timeoutSeconds; the jitter spreads reconnects of many
# replicas, and the client-side limit on top catches a connection that silently died.
WATCH_TIMEOUT_S: Final = 300.0
WATCH_GRACE_S: Final = 30.0
# A watch that lived this long was healthy: the next failure starts backing off from scratch.
HEALTHY_AFTER_S: Final = 10.0
_PARSE_ERRORS: Final = (ValueError, TypeError, KeyError, AttributeError)


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
# The node agent's GPU topology, one cluster-scoped object per node (gpu/nrt.py).
NODE_RESOURCE_TOPOLOGIES: Final = ResourceSpec(
    "NodeResourceTopology", "/apis/topology.node.k8s.io/v1alpha2/noderesourcetopologies"
)


class InformerHandler(Protocol[T_contra]):
    """Synchronous callbacks, called in watch order."""

    def on_add(self, obj: T_contra) -> None: ...
    def on_update(self, old: T_contra, new: T_contra) -> None: ...
    def on_delete(self, obj: T_contra) -> None: ...


class Expired(Exception):
    """The resourceVersion we hold is gone from the server's history (410): relist."""


class WatchLines:
    """Splits a watch stream into its newline-delimited JSON events, whatever the chunking."""

    def __init__(self) -> None:
        self._parts: list[bytes] = []  # a big object arrives in many chunks: join once

    def feed(self, chunk: bytes) -> list[bytes]:
        if b"\n" not in chunk:
            self._parts.append(chunk)
            return []
        *lines, last = b"".join([*self._parts, chunk]).split(b"\n")
        self._parts = [last] if last else []
        return [line for line in lines if line.strip()]

    def pending(self) -> bytes:
        """An unterminated last line: cut off mid-event, it is not to be trusted."""
        return b"".join(self._parts)


def decode_event(line: bytes) -> Mapping[str, object]:
    """One watch event: {"type": ..., "object": {...}}; ValueError if it is not one."""
    event = json.loads(line)
    if not isinstance(event, dict) or not isinstance(event.get("type"), str):
        raise ValueError(f"not a watch event: {line[:200]!r}")
    if not isinstance(event.get("object"), dict):
        raise ValueError(f"watch event without an object: {line[:200]!r}")
    return event


def _meta(raw: Mapping[str, object]) -> Mapping[str, object]:
    meta = raw.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def object_ref(raw: Mapping[str, object]) -> str:
    """namespace/name (or name): stable for an object, known even when it cannot be parsed."""
    meta = _meta(raw)
    namespace, name = meta.get("namespace"), meta.get("name")
    return f"{namespace}/{name}" if namespace else str(name)


def resource_version(raw: Mapping[str, object]) -> str:
    return str(_meta(raw).get("resourceVersion") or "")


@dataclass(frozen=True, slots=True)
class _Entry(Generic[T]):
    ref: str
    key: str
    version: str
    view: T


@dataclass(frozen=True, slots=True)
class Listing(Generic[T]):
    entries: list[_Entry[T]]
    unreadable: set[str]  # refs of listed objects we could not parse: they still exist


class ObjectStore(Generic[T]):
    """What the handler has been told, keyed by `key`; turns lists and events into calls.

    Purely computational: no I/O, callable from tests with raw dicts.
    """

    def __init__(
        self,
        kind: str,
        parse: Callable[[Mapping[str, object]], T],
        handler: InformerHandler[T],
        key: Callable[[T], str],
        on_invalid: Callable[[Mapping[str, object], Exception], None] | None = None,
    ) -> None:
        self.kind = kind
        self.resource_version = ""
        self._parse = parse
        self._handler = handler
        self._key = key
        self._on_invalid = on_invalid
        self._entries: dict[str, _Entry[T]] = {}
        self._by_ref: dict[str, str] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: str) -> T | None:
        entry = self._entries.get(key)
        return entry.view if entry is not None else None

    def views(self) -> Iterator[T]:
        return (entry.view for entry in self._entries.values())

    def parse_items(self, items: Sequence[object]) -> Listing[T]:
        """Parse one page of a list; unreadable objects are reported and remembered."""
        listing: Listing[T] = Listing([], set())
        for raw in items:
            if not isinstance(raw, Mapping):
                continue
            entry = self._read(raw)
            if entry is None:
                listing.unreadable.add(object_ref(raw))
            else:
                listing.entries.append(entry)
        return listing

    def replace(self, listing: Listing[T], version: str) -> tuple[int, int, int]:
        """Deliver the difference between a full list and the store: (adds, updates, deletes).

        Deletes go first so a cache frees what vanished before counting what arrived. An
        object we cannot read keeps its last good view: it still exists on the server.
        """
        listed = {entry.key for entry in listing.entries}
        gone = [
            key
            for key, entry in self._entries.items()
            if key not in listed and entry.ref not in listing.unreadable
        ]
        for key in gone:
            self._remove(key)
        adds = updates = 0
        for entry in listing.entries:
            added, updated = self._upsert(entry)
            adds += added
            updates += updated
        self.resource_version = version
        return adds, updates, len(gone)

    def apply(self, event: Mapping[str, object]) -> None:
        """One watch event. Raises Expired for 410 and ApiError for other ERROR events."""
        kind = event.get("type")
        raw = event.get("object")
        if not isinstance(raw, Mapping):
            return
        if kind == "ERROR":
            raise _watch_error(raw)
        if kind in ("ADDED", "MODIFIED"):
            entry = self._read(raw)
            if entry is not None:
                self._upsert(entry)
        elif kind == "DELETED":
            # By name, not by parsing: the final state of an object may be unreadable.
            key = self._by_ref.get(object_ref(raw))
            if key is not None:
                self._remove(key)
        elif kind != "BOOKMARK":
            log.warning("unknown watch event kind=%s type=%s", self.kind, kind)
        self.resource_version = resource_version(raw) or self.resource_version

    def _read(self, raw: Mapping[str, object]) -> _Entry[T] | None:
        try:
            view = self._parse(raw)
            key = self._key(view)
        except _PARSE_ERRORS as err:
            self._report_invalid(raw, err)
            return None
        return _Entry(object_ref(raw), key, resource_version(raw), view)

    def _report_invalid(self, raw: Mapping[str, object], err: Exception) -> None:
        log.warning("invalid object kind=%s name=%s error=%s", self.kind, object_ref(raw), err)
        if self._on_invalid is not None:
            self._call(self._on_invalid, raw, err)

    def _upsert(self, entry: _Entry[T]) -> tuple[int, int]:
        previous_key = self._by_ref.get(entry.ref)
        if previous_key is not None and previous_key != entry.key:
            self._remove(previous_key)  # same name, new identity (a pod keyed by uid recreated)
        old = self._entries.get(entry.key)
        self._entries[entry.key] = entry
        self._by_ref[entry.ref] = entry.key
        if old is None:
            self._call(self._handler.on_add, entry.view)
            return 1, 0
        if old.version != entry.version or not entry.version:
            self._call(self._handler.on_update, old.view, entry.view)
            return 0, 1
        return 0, 0  # relisted unchanged: nothing to tell

    def _remove(self, key: str) -> None:
        # The handler gets the view it was last given, so a cache can undo exactly that.
        entry = self._entries.pop(key)
        if self._by_ref.get(entry.ref) == key:
            del self._by_ref[entry.ref]
        self._call(self._handler.on_delete, entry.view)

    def _call(self, fn: Callable[..., None], *args: object) -> None:
        # A handler bug must not stop the stream for everyone else: log it loudly, go on.
        try:
            fn(*args)
        except Exception:
            log.exception("informer handler failed kind=%s handler=%s", self.kind, fn)


def _watch_error(status: Mapping[str, object]) -> Exception:
    code = status.get("code")
    message = str(status.get("message", ""))
    if code == 410:
        return Expired(message)
    reason = str(status.get("reason") or "WatchError")
    return ApiError(code if isinstance(code, int) else 500, reason, message)


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
        self._backoff = Backoff(self._rng)
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
            relisted = not self._listed
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
        await asyncio.sleep(delay)

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

    async def _list(self) -> None:
        start = time.perf_counter()
        listing: Listing[T] = Listing([], set())
        version, token = "", ""
        while True:
            query = [*self._selectors(), ("limit", str(self._page_size))]
            if token:
                query.append(("continue", token))
            page = await request_json(self._api, "GET", self.resource.path, query=query)
            meta = _meta(page)
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
        try:
            await self._consume(resp)
        except (aiohttp.ClientError, TimeoutError, OSError) as err:
            raise ApiUnavailable(f"watch {self.resource.kind}: {type(err).__name__}") from err
        finally:
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
