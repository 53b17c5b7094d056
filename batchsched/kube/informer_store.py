"""The pure half of an informer: what the handler has seen, and the watch stream's framing.

`ObjectStore` diffs a list against what the handler has seen and applies watch events;
`WatchLines` splits a watch stream into events and `decode_event` reads one. No I/O: tests
drive them with raw dicts and bytes. `Informer` (kube/informer.py) is the shell that moves
the bytes.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from batchsched.kube.client import ApiError

log = logging.getLogger(__name__)

T = TypeVar("T")
T_contra = TypeVar("T_contra", contravariant=True)


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
    try:
        event = json.loads(line)
    except RecursionError as err:  # not a ValueError: it would end the watch, not resume it
        raise ValueError(f"watch event nested too deeply: {line[:200]!r}") from err
    if not isinstance(event, dict) or not isinstance(event.get("type"), str):
        raise ValueError(f"not a watch event: {line[:200]!r}")
    if not isinstance(event.get("object"), dict):
        raise ValueError(f"watch event without an object: {line[:200]!r}")
    return event


def object_meta(raw: Mapping[str, object]) -> Mapping[str, object]:
    """The metadata of a raw object; empty when it has none (or a malformed one)."""
    meta = raw.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def object_ref(raw: Mapping[str, object]) -> str:
    """namespace/name (or name): stable for an object, known even when it cannot be parsed."""
    meta = object_meta(raw)
    namespace, name = meta.get("namespace"), meta.get("name")
    return f"{namespace}/{name}" if namespace else str(name)


def resource_version(raw: Mapping[str, object]) -> str:
    return str(object_meta(raw).get("resourceVersion") or "")


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
        except Exception as err:  # any parser failure: one bad object must not end the watch
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
