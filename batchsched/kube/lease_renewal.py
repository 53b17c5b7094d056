"""Renewing a Lease on a thread of its own, as client-go renews in a goroutine of its own.

A scheduling cycle that holds the main event loop for seconds (a 1000-member gang) must not
make the leader miss its renew deadline. `renew_on_thread` runs the elector's renew loop
(`LeaderElector._keep_renewing`, kube/leader.py) on a thread with its own event loop and its
own API client for one leadership term, and hands what ends it back to the main loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import threading
from collections.abc import Callable, Coroutine

from kubernetes_asyncio.client import ApiClient

from batchsched.kube.lease import LeaseApi

#: The GIL switch interval while a renewal thread runs (see `renew_on_thread`).
RENEW_SWITCH_INTERVAL_S = 0.001

KeepRenewing = Callable[[], Coroutine[object, object, None]]


async def renew_on_thread(
    keep_renewing: KeepRenewing,
    leases: LeaseApi,
    renew_client: Callable[[], ApiClient],
    name: str,
) -> None:
    """`keep_renewing` on a thread named `name` with its own loop, `leases` switched to a
    client from `renew_client` meanwhile; raises what it raises (LeadershipLost).
    Cancelling stops the thread and waits for it."""
    main = asyncio.get_running_loop()
    ended: asyncio.Future[None] = main.create_future()
    renewer = _ThreadRenewer(keep_renewing, leases, renew_client)

    def finish(error: BaseException | None) -> None:
        if not ended.done():
            if error is None:
                ended.set_result(None)
            else:
                ended.set_exception(error)

    def body() -> None:
        error: BaseException | None = None
        try:
            asyncio.run(renewer.run())
        except BaseException as err:  # handed to the main loop, which raises it
            error = err
        with contextlib.suppress(RuntimeError):  # the main loop is closed: nobody waits
            main.call_soon_threadsafe(finish, error)

    thread = threading.Thread(target=body, name=name, daemon=True)
    # The cycle on the main thread is pure Python and holds the GIL; this thread gets it
    # back at every switch interval, and a renewal needs it dozens of times (TLS, HTTP,
    # JSON). At the default 5 ms that can add up to most of a second; at 1 ms, tens of ms.
    sys.setswitchinterval(min(sys.getswitchinterval(), RENEW_SWITCH_INTERVAL_S))
    thread.start()
    try:
        await asyncio.shield(ended)
    finally:
        renewer.stop()
        if not ended.done():
            with contextlib.suppress(BaseException):
                await ended


class _ThreadRenewer:
    """The renew loop of one leadership term, run by `asyncio.run` on its own thread."""

    def __init__(
        self,
        keep_renewing: KeepRenewing,
        leases: LeaseApi,
        renew_client: Callable[[], ApiClient],
    ) -> None:
        self._keep_renewing = keep_renewing
        self._leases = leases
        self._renew_client = renew_client
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._stop_asked = False

    def stop(self) -> None:
        """From any thread: end the loop soon (its current request may finish first)."""
        with self._lock:
            self._stop_asked = True
            if self._loop is not None and self._stopping is not None:
                self._loop.call_soon_threadsafe(self._stopping.set)

    async def run(self) -> None:
        stopping = asyncio.Event()
        with self._lock:
            self._loop, self._stopping = asyncio.get_running_loop(), stopping
            if self._stop_asked:
                return
        async with self._renew_client() as api:
            previous = self._leases.switch_client(api)
            try:
                renewing = asyncio.create_task(self._keep_renewing())
                stopped = asyncio.create_task(stopping.wait())
                await asyncio.wait({renewing, stopped}, return_when=asyncio.FIRST_COMPLETED)
                renewing.cancel()
                stopped.cancel()
                await asyncio.gather(renewing, stopped, return_exceptions=True)
                lost = None if renewing.cancelled() else renewing.exception()
                if lost is not None:
                    raise lost
            finally:
                self._leases.switch_client(previous)
