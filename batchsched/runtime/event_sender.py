"""Events posted in the background: a bounded buffer served by a few senders.

The model is client-go's event broadcaster: whoever records an Event only puts it in a buffer
(at most `capacity`, client-go's 1000) and goes on; a small fixed number of senders post what
is buffered, one request each at a time. A full buffer drops the new Event with a log line and
a counted metric rather than hold up scheduling: an Event is the first write a busy API server
should be spared. Posting each pod's `Scheduled` Event from its own task instead had thousands
of requests in flight after a burst of binds, and the connection pool opened hundreds of TLS
connections for them.

Senders are started when Events arrive and end when the buffer is empty, so an idle scheduler
holds no task. The series logic and the write fence stay where they are (kube/events.py,
kube/client.py): a sender only calls the recorder, so a standby still writes nothing.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable
from typing import Final, Protocol, TypeAlias

from batchsched.kube.binder import ObjectRef
from batchsched.model.pod import PodView

__all__ = ["EVENT_BUFFER", "EVENT_SENDERS", "EventSender"]

logger = logging.getLogger(__name__)

EVENT_BUFFER: Final = 1000  # client-go's maxQueuedEvents
# Requests in flight for Events, and for binds (runtime/scheduler.py: BINDS_IN_FLIGHT is this).
# An API server short of CPU serves the requests in flight about alike, so each kind goes
# at the pace of its share of them: with 8 senders beside 64 binds, a backlog of 5000 pods
# outran its Scheduled Events and 3500 of them were dropped on a loaded box. Many writes in
# flight are also cheaper for the server: etcd commits what arrives together in one batch.
# `python -m batchsched.bench server-cost` on the 2-core box (docs/benchmarks.md, "Binds and
# Events in flight"): etcd CPU per Event POST 0.53-0.60 ms with 4 in flight, 0.25-0.27 with
# 32, 0.17-0.19 with 96, 0.13-0.15 with 256; the API server's 1.75, 1.50, 1.34, 1.34 (medians).
EVENT_SENDERS: Final = 96
# On shutdown, how long buffered Events may still take before the rest are dropped: an API
# server that stopped answering must not hold the process for each Event's own timeout.
DRAIN_GRACE_S: Final = 5.0

Regarding: TypeAlias = PodView | ObjectRef
_Event: TypeAlias = tuple[Regarding, str, str, str, str]


class EventSink(Protocol):
    async def record(
        self, regarding: Regarding, type_: str, reason: str, action: str, note: str
    ) -> bool | None: ...


class EventSender:
    """Posts Events through `sink` in the background (module doc)."""

    def __init__(
        self,
        sink: EventSink,
        *,
        senders: int = EVENT_SENDERS,
        capacity: int = EVENT_BUFFER,
        on_drop: Callable[[str], None] | None = None,
    ) -> None:
        if senders < 1 or capacity < 1:
            raise ValueError(
                f"event sender needs senders >= 1, capacity >= 1 ({senders}, {capacity})"
            )
        self.sink = sink
        self._senders = senders
        self._capacity = capacity
        self._on_drop = on_drop
        self._buffer: deque[_Event] = deque()
        self._running: set[asyncio.Task[None]] = set()
        self.dropped = 0

    def send(self, regarding: Regarding, type_: str, reason: str, action: str, note: str) -> bool:
        """Buffer an Event for posting; False when the buffer was full and it was dropped."""
        if len(self._buffer) >= self._capacity:
            self._drop(reason, f"{type(regarding).__name__} {regarding.namespace}/{regarding.name}")
            return False
        self._buffer.append((regarding, type_, reason, action, note))
        if len(self._running) < self._senders:
            task = asyncio.create_task(self._post_buffered())
            self._running.add(task)
            task.add_done_callback(self._running.discard)
        return True

    @property
    def buffered(self) -> int:
        return len(self._buffer)

    async def drain(self, grace: float = DRAIN_GRACE_S) -> None:
        """Wait until every buffered Event was posted, at most `grace` seconds; what is left
        then is dropped (counted) and the senders stop."""
        running = set(self._running)
        if running:
            _, late = await asyncio.wait(running, timeout=grace)
            if late:
                left = len(self._buffer)
                for _, _, reason, _, _ in self._buffer:
                    self._count_drop(reason)
                self._buffer.clear()
                for task in late:
                    task.cancel()
                await asyncio.gather(*late, return_exceptions=True)
                logger.warning(
                    "events dropped on shutdown buffered=%d in_flight=%d grace_s=%g",
                    left,
                    len(late),
                    grace,
                )
        # Senders started while these were waited for (an Event recorded meanwhile).
        while self._running:
            await asyncio.gather(*list(self._running), return_exceptions=True)

    async def _post_buffered(self) -> None:
        while self._buffer:
            regarding, type_, reason, action, note = self._buffer.popleft()
            try:
                await self.sink.record(regarding, type_, reason, action, note)
            except Exception:  # a bug in one Event must not stop the others
                logger.exception("event post failed reason=%s", reason)

    def _drop(self, reason: str, about: str) -> None:
        self._count_drop(reason)
        logger.warning(
            "event dropped: too many buffered reason=%s object=%s buffered=%d dropped_total=%d",
            reason,
            about,
            len(self._buffer),
            self.dropped,
        )

    def _count_drop(self, reason: str) -> None:
        self.dropped += 1
        if self._on_drop is not None:
            self._on_drop(reason)
