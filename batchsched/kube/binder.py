"""Writes the scheduler's decisions back: Binding, PodScheduled condition, nominated node, Events.

Only `bind` raises (its caller must forget the assumed pod and retry); status and Event writes
are best effort, logged and never raised into the scheduling loop.
"""

from __future__ import annotations

import asyncio
import logging
import re
import socket
from collections import OrderedDict
from collections.abc import Mapping
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
    request_json,
)
from batchsched.kube.pod_status import PodStatusWriter, pod_path, remember
from batchsched.model.pod import PodView

__all__ = ["BindError", "EventRecorder", "KubeBinder", "PodStatusWriter", "micro_time"]

log = logging.getLogger(__name__)


REPORTING_CONTROLLER: Final = "gpu-scheduler"
EVENT_SERIES_WINDOW_S: Final = 600.0
# The API server's limits on Event fields (events.k8s.io/v1 validation).
_NOTE_MAX_BYTES: Final = 1024
_SHORT_FIELD_MAX: Final = 128
_NAME_MAX: Final = 253


BIND_CHECK_TRIES = 3  # reads of a pod whose Binding got no answer, a second apart
BIND_CHECK_PAUSE_S = 1.0


class BindError(Exception):
    """A failed Binding; `reason` is snake_case (conflict, not_found, unavailable, ...)."""

    def __init__(self, reason: str, status: int, message: str = "") -> None:
        self.reason = reason
        self.status = status
        self.message = message
        super().__init__(f"{reason} ({status}): {message}" if message else f"{reason} ({status})")


def _snake(reason: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", reason).lower()


@dataclass(frozen=True, slots=True)
class ObjectRef:
    """What an Event is about, when it is not a pod (e.g. a PodGroup)."""

    api_version: str
    kind: str
    namespace: str
    name: str
    uid: str


class KubeBinder:
    """Satisfies `batchsched.plugins.default_binder.BindingClient`."""

    def __init__(self, api: ApiClient, *, timeout: float = 30.0) -> None:
        self._api = api
        self._timeout = timeout

    async def bind(self, namespace: str, name: str, uid: str, node_name: str) -> None:
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            # The uid makes the server refuse to bind a same-named pod created since.
            "metadata": {"name": name, "namespace": namespace, "uid": uid},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node_name},
        }
        path = f"{pod_path(namespace, name)}/binding"
        try:
            await request_json(self._api, "POST", path, body=body, timeout=self._timeout)
        except ApiError as err:
            if err.status >= 500 and await self._bound_anyway(namespace, name, uid, node_name):
                return
            raise BindError(_snake(err.reason), err.status, err.message) from err
        except NotLeading as err:
            raise BindError("not_leading", 0, str(err)) from err
        except ApiUnavailable as err:
            if await self._bound_anyway(namespace, name, uid, node_name):
                return
            raise BindError("unavailable", 0, str(err)) from err

    async def _bound_anyway(self, namespace: str, name: str, uid: str, node_name: str) -> bool:
        """A Binding whose answer was lost (no answer, a timeout, a 5xx) may have been applied:
        read the pod before calling it failed. Forgetting a pod that is in fact bound would
        free its GPUs for the next cycle, and the watch would bring it back too late: an
        over-commit (seen in the chaos soak around an API server restart)."""
        for attempt in range(BIND_CHECK_TRIES):
            if attempt:
                await asyncio.sleep(BIND_CHECK_PAUSE_S)
            try:
                pod = await request_json(
                    self._api, "GET", pod_path(namespace, name), timeout=self._timeout
                )
            except ApiError as err:
                if err.status == 404:
                    return False  # deleted: nothing to count
                continue
            except ApiUnavailable:
                continue
            meta, spec = pod.get("metadata"), pod.get("spec")
            if not isinstance(meta, Mapping) or not isinstance(spec, Mapping):
                return False
            bound = meta.get("uid") == uid and spec.get("nodeName") == node_name
            if bound:
                log.info(
                    "binding answered late but applied pod=%s/%s node=%s",
                    namespace,
                    name,
                    node_name,
                )
            return bound
        return False


@dataclass(slots=True)
class _Series:
    namespace: str
    name: str
    count: int
    last_seen: float
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class EventRecorder:
    """events.k8s.io/v1 Events about pods, deduplicated into series.

    The same (pod, type, reason, action, note) again within `window` seconds of its last
    occurrence bumps the existing Event's series count instead of creating another object:
    a pod retried every few seconds must not flood etcd with identical Events.
    """

    def __init__(
        self,
        api: ApiClient,
        *,
        clock: Clock | None = None,
        hostname: str | None = None,
        window: float = EVENT_SERIES_WINDOW_S,
        timeout: float = 30.0,
    ) -> None:
        self._api = api
        self._clock: Clock = clock or SystemClock()
        self._instance = (hostname or socket.gethostname())[:_SHORT_FIELD_MAX]
        self._window = window
        self._timeout = timeout
        self._series: OrderedDict[tuple[str, ...], _Series] = OrderedDict()
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
                if await self._patch_series(series):
                    return True
            # The Event expired or was deleted on the server: start a new one below.
        series = _Series(regarding.namespace, self._event_name(regarding), 1, now)
        remember(self._series, key, series)
        async with series.lock:
            return await self._create(series, regarding, type_, reason, action, note)

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
            await request_json(self._api, "POST", path, body=body, timeout=self._timeout)
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
        patch = {
            "series": {"count": series.count, "lastObservedTime": micro_time(self._clock.wall())}
        }
        path = f"/apis/events.k8s.io/v1/namespaces/{series.namespace}/events/{series.name}"
        try:
            await request_json(
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
        except ApiUnavailable as err:
            log.warning("event series update failed event=%s error=%s", series.name, err)
        return True


def _truncate_utf8(text: str, max_bytes: int) -> str:
    encoded = text.encode("utf-8")
    if len(encoded) <= max_bytes:
        return text
    return encoded[:max_bytes].decode("utf-8", "ignore")
