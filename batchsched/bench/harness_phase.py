"""One timed phase of an end-to-end bench: create pods under a watch and wait until the
scheduler under test has bound them, metering CPU and counting the API server's writes.

The e2e, gang and preemption benches all measure this way, so their figures mean the same:
the clock starts at the first create request and stops at the last pod seen bound on the
bench's own watch (BindWatch), or at the timeout.
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Final

import aiohttp
from kubernetes_asyncio.client import ApiClient

from batchsched.bench.e2e_cluster import BenchError, ControlPlane
from batchsched.bench.e2e_procs import CpuMeter, SchedulerProcess
from batchsched.bench.e2e_watch import BindWatch, percentile
from batchsched.kube.client import open_stream

_WRITE_LINE: Final = re.compile(r"^apiserver_request_total\{(.*)\} (\S+)$")
_LABEL: Final = re.compile(r'(\w+)="([^"]*)"')
_WRITE_VERBS: Final = frozenset({"POST", "PUT", "PATCH", "DELETE", "DELETECOLLECTION"})
WRITES_QUIET_S: Final = 1.0  # the API writes count is read again until this long unchanged
WRITES_SETTLE_S: Final = 15.0  # ... or this long at most


@dataclass
class Phase:
    """What one phase saw; times are perf_counter values."""

    watch: BindWatch
    started: float  # the first create request
    created: float  # the last create answered
    ended: float  # the last pod seen bound, or the time the phase gave up
    cpu_seconds: dict[str, float] = field(default_factory=dict)  # by process (CpuMeter)
    # Mutating requests the API server answered during the phase, "VERB resource[/sub]",
    # those that happened only: the bench's own creates count the same for every scheduler.
    api_writes: dict[str, int] = field(default_factory=dict)

    @property
    def bound(self) -> int:
        return len(self.watch.bound)

    @property
    def seconds(self) -> float:
        return self.ended - self.started

    @property
    def create_seconds(self) -> float:
        return self.created - self.started

    def latency_ms(self, q: float) -> float:
        """The q-th percentile of seen -> seen bound over the bound pods, in ms."""
        return percentile(self.watch.latencies(), q) * 1e3


async def timed_phase(
    api: ApiClient,
    namespace: str,
    expected: int,
    create: Callable[[], Awaitable[None]],
    timeout: float,
    *,
    meter: CpuMeter | None = None,
    count_writes: bool = False,
) -> Phase:
    """Watch `namespace`, run `create`, and wait up to `timeout` from the first create for
    `expected` pods bound there; `meter` and the write counts cover create + binding."""
    watch = BindWatch(api, namespace, expected)
    return await _measured(api, watch, create, timeout, meter, count_writes)


async def backlog_phase(
    api: ApiClient,
    namespace: str,
    expected: int,
    create: Callable[[], Awaitable[None]],
    scheduler: SchedulerProcess,
    timeout: float,
    *,
    meter: CpuMeter | None = None,
    count_writes: bool = False,
) -> Phase:
    """Backlog mode: `create` everything while no scheduler serves it, then start `scheduler`
    and time from its start to the last of `expected` pods seen bound (or `timeout`). This
    measures the scheduler, not how fast the bench can create pods. The Phase's `created` is
    when the scheduler said it was ready; its CPU counts from the process's birth. The
    caller stops the scheduler."""
    await create()
    watch = BindWatch(api, namespace, expected, count_listed=True)

    async def start() -> None:
        await scheduler.start()
        if meter is not None:
            meter.add_from_birth("scheduler", scheduler.pid())

    return await _measured(api, watch, start, timeout, meter, count_writes)


async def _measured(
    api: ApiClient,
    watch: BindWatch,
    act: Callable[[], Awaitable[None]],
    timeout: float,
    meter: CpuMeter | None,
    count_writes: bool,
) -> Phase:
    """Under `watch`: the clock starts, `act` runs, and the phase ends when every pod the
    watch expects was seen bound, or `timeout` after the start."""
    writes_before: dict[str, int] = {}
    cpu: dict[str, float] = {}
    async with asyncio.TaskGroup() as tasks:
        watching = tasks.create_task(watch.run())
        await watch.wait_watching()
        if count_writes:
            writes_before = await api_writes(api)
        if meter is not None:
            meter.start()
        started = time.perf_counter()
        await act()
        acted = time.perf_counter()
        complete = await watch.wait_all_bound(started + timeout)
        if meter is not None:
            cpu = meter.stop()
        ended = max(watch.bound.values()) if complete else time.perf_counter()
        watching.cancel()
    writes: dict[str, int] = {}
    if count_writes:
        after = await settled_writes(api)
        writes = {k: n - writes_before.get(k, 0) for k, n in sorted(after.items())}
    positive = {k: n for k, n in writes.items() if n > 0}
    return Phase(watch, started, acted, ended, cpu, positive)


def cpu_meter(plane: ControlPlane, scheduler: SchedulerProcess) -> CpuMeter:
    """The scheduler, the API server, etcd and this process (the bench's client)."""
    return CpuMeter(
        {
            "scheduler": scheduler.pid(),
            "kube-apiserver": plane.pid("kube-apiserver"),
            "etcd": plane.pid("etcd"),
            "bench client": os.getpid(),
        }
    )


async def api_writes(api: ApiClient) -> dict[str, int]:
    """apiserver_request_total of POST/PUT/PATCH/DELETE by resource, from its /metrics."""
    resp = await open_stream(api, "/metrics", [], aiohttp.ClientTimeout(total=30.0))
    try:
        text = (await resp.read()).decode()
    finally:
        resp.release()
    return writes_by_resource(text)


async def settled_writes(
    api: ApiClient, quiet: float = WRITES_QUIET_S, limit: float = WRITES_SETTLE_S
) -> dict[str, int]:
    """`api_writes` once two reads `quiet` seconds apart agree (at most `limit` seconds): a
    scheduler's Events trail its bindings, and a count taken at the last binding would leave
    out a different share of them for each scheduler."""
    deadline = time.monotonic() + limit
    last = await api_writes(api)
    while time.monotonic() < deadline:
        await asyncio.sleep(quiet)
        now = await api_writes(api)
        if now == last:
            break
        last = now
    return last


def writes_by_resource(metrics_text: str) -> dict[str, int]:
    """Purely computational: apiserver_request_total of the mutating verbs, summed by
    "VERB resource[/subresource]"."""
    totals: dict[str, int] = {}
    for line in metrics_text.splitlines():
        found = _WRITE_LINE.match(line)
        if found is None:
            continue
        labels = dict(_LABEL.findall(found.group(1)))
        if labels.get("verb") not in _WRITE_VERBS:
            continue
        sub = labels.get("subresource", "")
        key = f"{labels['verb']} {labels.get('resource', '')}" + (f"/{sub}" if sub else "")
        totals[key] = totals.get(key, 0) + int(float(found.group(2)))
    return totals


async def scheduler_metrics(scheduler: SchedulerProcess) -> str:
    """Its /metrics text, or "" (said on stderr) when it cannot be read."""
    try:
        return await scheduler.metrics()
    except (BenchError, aiohttp.ClientError, TimeoutError, OSError) as err:
        print(f"{scheduler.name}: no /metrics ({err})", file=sys.stderr)
        return ""
