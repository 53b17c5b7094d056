"""events.k8s.io/v1 Events, deduplicated into series the way client-go's events library does.

The first occurrence of an Event is created; the first repeat (same object, type, reason,
action and note within `window` seconds) patches the Event into a series of count 2; later
repeats are only counted here, and the counts reach the server when `flush` finds a series
not written for `refresh` seconds (30 minutes, as client-go) or finished (not seen for
`finish` seconds, 6 minutes, as client-go). A pod retried every few seconds must not write
an Event every few seconds: Events are the first writes an overloaded API server should be
spared, and every one of them shares the scheduler's client rate limit with its Bindings.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Final

from kubernetes_asyncio.client import ApiClient

from batchsched.clock import Clock, SystemClock
from batchsched.kube.client import (
    MERGE_PATCH,
    ApiError,
    ApiUnavailable,
    NotLeading,
    micro_time,
    request_unread,
)
from batchsched.kube.pod_status import remember
from batchsched.model.pod import PodView

log = logging.getLogger(__name__)

REPORTING_CONTROLLER: Final = "gpu-scheduler"
EVENT_SERIES_WINDOW_S: Final = 600.0
SERIES_REFRESH_S: Final = 30 * 60.0  # client-go's refreshTime
SERIES_FINISH_S: Final = 6 * 60.0  # client-go's finishTime
# The API server's limits on Event fields (events.k8s.io/v1 validation).
_NOTE_MAX_BYTES: Final = 1024
_SHORT_FIELD_MAX: Final = 128
_NAME_MAX: Final = 253


@dataclass(frozen=True, slots=True)
class ObjectRef:
    """What an Event is about, when it is not a pod (e.g. a PodGroup)."""

    api_version: str
    kind: str
    namespace: str
    name: str
    uid: str


@dataclass(slots=True)
class _Series:
    namespace: str
    name: str
    count: int
    last_seen: float
    written: int = 1  # the count the server has (the create wrote 1)
    written_at: float = 0.0
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class EventRecorder:
    """Posts Events about pods and other objects, deduplicated into series (module doc)."""

    def __init__(
        self,
        api: ApiClient,
        *,
        clock: Clock | None = None,
        hostname: str | None = None,
        window: float = EVENT_SERIES_WINDOW_S,
        refresh: float = SERIES_REFRESH_S,
        finish: float = SERIES_FINISH_S,
        timeout: float = 30.0,
    ) -> None:
        self._api = api
        self._clock: Clock = clock or SystemClock()
        self._instance = (hostname or socket.gethostname())[:_SHORT_FIELD_MAX]
        self._window = window
        self._refresh = refresh
        self._finish = finish
        self._timeout = timeout
        # Every series, in the order last seen (a repeat moves it to the end).
        self._series: OrderedDict[tuple[str, ...], _Series] = OrderedDict()
        # The series with counts the server has not got: `flush` visits only these (and the
        # oldest of `_series`), not each of the thousands of one-off Scheduled Events.
        self._unwritten: dict[tuple[str, ...], None] = {}
        self._sequence = 0

    async def record(
        self, regarding: PodView | ObjectRef, type_: str, reason: str, action: str, note: str
    ) -> bool:
        """Post (or count again) an Event; False when the API did not take it (logged)."""
        key = (regarding.uid, type_, reason, action, note)
        now = self._clock.now()
        series = self._series.get(key)
        if series is not None and now - series.last_seen <= self._window:
            series.last_seen = now
            series.count += 1
            self._series.move_to_end(key)
            # Serialized per series: a repeat must not overtake the create it extends.
            async with series.lock:
                if series.written >= 2 or series.count <= series.written:
                    self._unwritten[key] = None
                    return True  # counted here; `flush` writes it later
                if await self._patch_series(series):
                    return True
            # The Event expired or was deleted on the server: start a new one below.
        series = _Series(regarding.namespace, self._event_name(regarding), 1, now, written_at=now)
        remember(self._series, key, series)
        async with series.lock:
            return await self._create(series, regarding, type_, reason, action, note)

    async def flush(self) -> int:
        """Write the counts of series due for a refresh or finished, and forget finished ones.
        Returns how many series were written. Called by the leader's housekeeping round."""
        now = self._clock.now()
        written = 0
        for key in list(self._unwritten):
            series = self._series.get(key)
            if series is None or series.count <= series.written:
                self._unwritten.pop(key, None)  # forgotten, or written by `record` since
                continue
            finished = now - series.last_seen > self._finish
            if finished or now - series.written_at >= self._refresh:
                async with series.lock:
                    await self._patch_series(series)
                written += 1
                if finished or series.count <= series.written:
                    self._unwritten.pop(key, None)
        # Forget finished series, oldest seen first: the first one still live ends the round.
        while self._series:
            key, series = next(iter(self._series.items()))
            if now - series.last_seen <= self._finish:
                break
            del self._series[key]
            self._unwritten.pop(key, None)
        return written

    def _event_name(self, pod: PodView | ObjectRef) -> str:
        # Unique per recorder: the wall time in ns (as kube's recorders name Events) plus a
        # sequence number, so two Events in the same nanosecond cannot collide.
        self._sequence += 1
        suffix = f".{int(self._clock.wall() * 1e9):x}{self._sequence:x}"
        return pod.name[: _NAME_MAX - len(suffix)] + suffix

    async def _create(
        self,
        series: _Series,
        pod: PodView | ObjectRef,
        type_: str,
        reason: str,
        action: str,
        note: str,
    ) -> bool:
        ref = (
            pod
            if isinstance(pod, ObjectRef)
            else ObjectRef("v1", "Pod", pod.namespace, pod.name, pod.uid)
        )
        body = {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {"name": series.name, "namespace": series.namespace},
            "eventTime": micro_time(self._clock.wall()),
            "reportingController": REPORTING_CONTROLLER,
            "reportingInstance": self._instance,
            "action": action[:_SHORT_FIELD_MAX],
            "reason": reason[:_SHORT_FIELD_MAX],
            "type": type_,
            "note": _truncate_utf8(note, _NOTE_MAX_BYTES),
            "regarding": {
                "apiVersion": ref.api_version,
                "kind": ref.kind,
                "namespace": ref.namespace,
                "name": ref.name,
                "uid": ref.uid,
            },
        }
        path = f"/apis/events.k8s.io/v1/namespaces/{series.namespace}/events"
        try:
            await request_unread(self._api, "POST", path, body=body, timeout=self._timeout)
        except (ApiError, ApiUnavailable) as err:
            if isinstance(err, ApiError) and err.status == 409:
                return True  # an earlier try whose answer was lost created it
            log.log(
                logging.DEBUG if isinstance(err, NotLeading) else logging.WARNING,
                "event create failed kind=%s object=%s/%s reason=%s error=%s",
                ref.kind,
                ref.namespace,
                ref.name,
                reason,
                err,
            )
            return False
        return True

    async def _patch_series(self, series: _Series) -> bool:
        """False when the Event is gone (404): the caller creates a new one."""
        count = series.count
        patch = {"series": {"count": count, "lastObservedTime": micro_time(self._clock.wall())}}
        path = f"/apis/events.k8s.io/v1/namespaces/{series.namespace}/events/{series.name}"
        try:
            await request_unread(
                self._api,
                "PATCH",
                path,
                body=patch,
                content_type=MERGE_PATCH,
                timeout=self._timeout,
            )
        except ApiError as err:
            if err.status == 404:
                return False
            log.warning("event series update failed event=%s error=%s", series.name, err)
            return True
        except ApiUnavailable as err:
            log.log(
                logging.DEBUG if isinstance(err, NotLeading) else logging.WARNING,
                "event series update failed event=%s error=%s",
                series.name,
                err,
            )
            return True
        series.written = max(series.written, count)
        series.written_at = self._clock.now()
        return True


def _truncate_utf8(text: str, max_bytes: int) -> str:
    encoded = text.encode("utf-8")
    if len(encoded) <= max_bytes:
        return text
    return encoded[:max_bytes].decode("utf-8", "ignore")
