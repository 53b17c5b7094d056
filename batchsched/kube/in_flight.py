"""How many requests a client keeps in flight at once (watches aside)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Final
from weakref import WeakKeyDictionary

from kubernetes_asyncio.client import ApiClient

from batchsched.kube.api_errors import ApiUnavailable

__all__ = ["DEFAULT_MAX_IN_FLIGHT", "limit_in_flight", "turn"]

# Requests (not watches) in flight at once through a client made by `api_client`. Its pool
# (kube/http1.py, or aiohttp's) speaks HTTP/1.1, so each request in flight holds a connection
# of its own, and each new connection costs both ends a TLS handshake; kube-scheduler's
# client multiplexes over one HTTP/2 connection. A burst of binds and Events waits here
# instead of opening hundreds. The scheduler keeps up to 96 binds and 96 Events in flight
# (runtime/event_sender.py says why); the rest is room for status writes, evictions and the
# Lease, which must not wait behind a burst of binds.
DEFAULT_MAX_IN_FLIGHT: Final = 224

_IN_FLIGHT: WeakKeyDictionary[ApiClient, asyncio.Semaphore] = WeakKeyDictionary()


def limit_in_flight(api: ApiClient, requests: int) -> None:
    """From now on at most `requests` requests through `api` (watches aside) are in flight;
    the others wait their turn, within their own timeout."""
    _IN_FLIGHT[api] = asyncio.Semaphore(requests)


@contextlib.asynccontextmanager
async def turn(api: ApiClient, method: str, path: str, deadline: float) -> AsyncIterator[None]:
    """One of the client's places in flight (`limit_in_flight`), waited for until `deadline`
    at most."""
    slots = _IN_FLIGHT.get(api)
    if slots is None:
        yield
        return
    if slots.locked():  # only a wait needs the timer (wait_for costs a task)
        try:
            await asyncio.wait_for(slots.acquire(), deadline - time.monotonic())
        except TimeoutError as err:
            raise ApiUnavailable(f"{method} {path}: no turn in flight before its timeout") from err
    else:
        await slots.acquire()
    try:
        yield
    finally:
        slots.release()
