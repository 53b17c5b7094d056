"""The pending pod's status fields this scheduler owns: the PodScheduled condition and
nominatedNodeName. Best effort: failures are logged, never raised into the scheduling loop."""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable, Mapping
from typing import Final, Generic, TypeVar

from kubernetes_asyncio.client import ApiClient

from batchsched.clock import Clock, SystemClock
from batchsched.kube.client import (
    STRATEGIC_MERGE_PATCH,
    ApiError,
    ApiUnavailable,
    NotLeading,
    request_unread,
    rfc3339,
)
from batchsched.model.pod import PodView

log = logging.getLogger(__name__)

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
MAX_REMEMBERED: Final = 10_000
MIN_REWRITE_S: Final = 5.0  # the least time between two messages on one pod's condition


class LatestWins(Generic[V]):
    """Serialises writes per key, newest value last: a write asked for while another for the
    same key is in flight is left to that writer, which writes it next (values asked for in
    between are skipped: only the newest matters)."""

    def __init__(self) -> None:
        self._wanted: dict[Hashable, V] = {}

    async def write(
        self,
        key: Hashable,
        value: V,
        write: Callable[[PodView, V], Awaitable[None]],
        pod: PodView,
    ) -> None:
        busy = key in self._wanted
        self._wanted[key] = value
        if busy:
            return
        try:
            while True:
                wanted = self._wanted[key]
                await write(pod, wanted)
                if self._wanted[key] == wanted:
                    return
        finally:
            del self._wanted[key]


class PodStatusWriter:
    """PodScheduled=False/Unschedulable and nominatedNodeName, written only when they change.

    What we last wrote is remembered per pod uid: only this scheduler writes these fields of
    its pending pods, so a repeat write would change nothing but the API server's load.
    One write per pod and field is in flight at a time, and the newest wish is written last:
    two verdicts a few milliseconds apart (a template claim not made yet, then no devices)
    must not land in the wrong order and leave the older message on the pod.

    A pod already marked Unschedulable gets a new message at most every `min_rewrite`
    seconds: a gang retried on every cluster event would otherwise rewrite each member's
    condition each time the free capacity in its message moved. A newer message asked for
    sooner is kept and written by `flush` once the interval has passed, if the pod still
    waits then (the caller says which pods do).

    A nomination and a condition asked for in the same cycle (a preemptor's plan started)
    go in one patch, as kube-scheduler writes them: the nomination waits one turn of the
    loop, and a condition write that starts meanwhile carries it.
    """

    def __init__(
        self,
        api: ApiClient,
        *,
        clock: Clock | None = None,
        timeout: float = 30.0,
        min_rewrite: float = MIN_REWRITE_S,
    ) -> None:
        self._api = api
        self._clock: Clock = clock or SystemClock()
        self._timeout = timeout
        self._min_rewrite = min_rewrite
        self._conditions: OrderedDict[str, str] = OrderedDict()
        self._marked_at: OrderedDict[str, float] = OrderedDict()
        self._deferred: dict[str, tuple[PodView, str]] = {}
        self._nominated: OrderedDict[str, str | None] = OrderedDict()
        self._latest: LatestWins[str | None] = LatestWins()
        self._nominating: dict[str, str | None] = {}  # nominations not written yet, by uid
        self._carrying: dict[str, asyncio.Event] = {}  # condition writes with a nomination

    async def mark_unschedulable(self, pod: PodView, message: str) -> None:
        uid = pod.uid
        previous = self._conditions.get(uid)
        if previous is not None and previous != message:
            since = self._clock.now() - self._marked_at.get(uid, float("-inf"))
            if since < self._min_rewrite:
                self._deferred[uid] = (pod, message)  # `flush` writes the newest one
                return
        self._deferred.pop(uid, None)
        await self._latest.write(("condition", uid), message, self._mark, pod)

    async def flush(self, waiting: Callable[[str], bool]) -> int:
        """Write the deferred messages whose interval has passed, for pods `waiting` says
        still wait (a bound or deleted pod's is dropped). Returns how many were written."""
        now = self._clock.now()
        due = [
            uid
            for uid in self._deferred
            if now - self._marked_at.get(uid, float("-inf")) >= self._min_rewrite
        ]
        written = 0
        for uid in due:
            entry = self._deferred.pop(uid, None)
            if entry is None:
                continue  # a newer verdict was written while an earlier one was awaited
            pod, message = entry
            if waiting(uid):
                await self._latest.write(("condition", uid), message, self._mark, pod)
                written += 1
        return written

    async def set_nominated_node(self, pod: PodView, node_name: str | None) -> None:
        uid = pod.uid
        self._nominating[uid] = node_name
        await asyncio.sleep(0)  # the cycle's condition write, spawned after us, may carry it
        carrying = self._carrying.get(uid)
        if carrying is not None:
            await carrying.wait()
        if uid in self._nominating and self._nominating[uid] == node_name:
            del self._nominating[uid]
        # Written unless a condition write carried it (`_nominate` skips a value written).
        await self._latest.write(("nominated", uid), node_name, self._nominate, pod)

    async def _mark(self, pod: PodView, message: str | None) -> None:
        assert message is not None
        previous = self._conditions.get(pod.uid)
        if previous == message:
            return
        condition: dict[str, object] = {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": message,
        }
        if previous is None:
            # The status flips (or we cannot know it didn't): a new transition time. When only
            # the message changes, the server keeps the one it has.
            condition["lastTransitionTime"] = rfc3339(self._clock.wall())
        # Strategic merge keys conditions by type: the pod's other conditions are untouched.
        status: dict[str, object] = {"conditions": [condition]}
        uid = pod.uid
        carried = self._carry_nomination(uid, status)
        try:
            written = await self._patch_status(pod, status, "mark_unschedulable")
        finally:
            if carried:
                self._carrying.pop(uid).set()
        if written:
            remember(self._conditions, uid, message)
            remember(self._marked_at, uid, self._clock.now())
            if carried:
                remember(self._nominated, uid, self._carried_node(status))

    def _carry_nomination(self, uid: str, status: dict[str, object]) -> bool:
        """Put a nomination waiting to be written into this condition write (True if so)."""
        if uid not in self._nominating or uid in self._carrying:
            return False
        node = self._nominating[uid]
        if uid in self._nominated and self._nominated[uid] == node:
            return False
        status["nominatedNodeName"] = node or None
        self._carrying[uid] = asyncio.Event()
        return True

    @staticmethod
    def _carried_node(status: Mapping[str, object]) -> str | None:
        node = status["nominatedNodeName"]
        return node if isinstance(node, str) else None

    async def _nominate(self, pod: PodView, node_name: str | None) -> None:
        if pod.uid in self._nominated and self._nominated[pod.uid] == node_name:
            return
        status = {"nominatedNodeName": node_name or None}
        if await self._patch_status(pod, status, "set_nominated_node"):
            remember(self._nominated, pod.uid, node_name)

    def forget(self, uid: str) -> None:
        """The pod is gone: drop what we remembered about it."""
        self._conditions.pop(uid, None)
        self._marked_at.pop(uid, None)
        self._deferred.pop(uid, None)
        self._nominated.pop(uid, None)
        self._nominating.pop(uid, None)

    async def _patch_status(self, pod: PodView, status: Mapping[str, object], what: str) -> bool:
        path = f"{pod_path(pod.namespace, pod.name)}/status"
        # The uid is a precondition: a same-named pod created since is refused (422, uid is
        # immutable) instead of receiving another pod's verdict.
        patch = {"metadata": {"uid": pod.uid}, "status": status}
        try:
            await request_unread(
                self._api,
                "PATCH",
                path,
                body=patch,
                content_type=STRATEGIC_MERGE_PATCH,
                timeout=self._timeout,
            )
        except (ApiError, ApiUnavailable) as err:
            gone = isinstance(err, NotLeading) or (
                isinstance(err, ApiError)
                and (err.status == 404 or (err.status == 422 and "metadata.uid" in err.message))
            )
            log.log(
                logging.DEBUG if gone else logging.WARNING,
                "pod status write failed op=%s pod=%s error=%s",
                what,
                pod.key,
                err,
            )
            return False
        return True


def remember(memory: OrderedDict[K, V], key: K, value: V) -> None:
    """Keep `value` under `key`, newest last, forgetting the oldest past MAX_REMEMBERED."""
    memory[key] = value
    memory.move_to_end(key)
    while len(memory) > MAX_REMEMBERED:
        memory.popitem(last=False)


def pod_path(namespace: str, name: str) -> str:
    return f"/api/v1/namespaces/{namespace}/pods/{name}"
