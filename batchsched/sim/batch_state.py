"""Bookkeeping of the batch simulator: its event heap and what happened to every job."""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from dataclasses import dataclass, field

from batchsched.sim.batch_jobs import BatchJob
from queues.model import GPU, MILLI_PER_GPU

_DEPART, _ARRIVE = 0, 1


class EventQueue:
    """Arrivals and departures by time; at one instant departures come first."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, int, BatchJob]] = []
        self._seq = 0

    def __bool__(self) -> bool:
        return bool(self._heap)

    def arrive(self, at: float, job: BatchJob) -> None:
        self._push(at, _ARRIVE, job)

    def depart(self, at: float, job: BatchJob) -> None:
        self._push(at, _DEPART, job)

    def _push(self, at: float, kind: int, job: BatchJob) -> None:
        heapq.heappush(self._heap, (at, kind, self._seq, job))
        self._seq += 1

    def pop_instant(self) -> tuple[float, list[BatchJob], list[BatchJob]]:
        now = self._heap[0][0]
        departures: list[BatchJob] = []
        arrivals: list[BatchJob] = []
        while self._heap and self._heap[0][0] == now:
            _, kind, _, job = heapq.heappop(self._heap)
            (departures if kind == _DEPART else arrivals).append(job)
        return now, departures, arrivals


@dataclass
class JobRecord:
    tenant: str
    job_class: str
    arrival: float
    start: float | None = None
    end: float | None = None

    @property
    def wait(self) -> float | None:
        return None if self.start is None else self.start - self.arrival


@dataclass
class RunLog:
    """Per job: arrival, start, end. Over time: GPUs in use, overall and per tenant, as
    step functions (time, milli-GPUs) so shares and utilisation integrate exactly."""

    capacity: Mapping[str, int]
    jobs: dict[str, JobRecord] = field(default_factory=dict)
    steps: list[tuple[float, int]] = field(default_factory=list)
    tenant_steps: dict[str, list[tuple[float, int]]] = field(default_factory=dict)
    _in_use: int = 0
    _tenant_use: dict[str, int] = field(default_factory=dict)

    def arrived(self, job: BatchJob, now: float) -> None:
        self.jobs[job.key] = JobRecord(job.tenant, job.job_class, now)

    def started(self, job: BatchJob, now: float, demand: Mapping[str, int]) -> None:
        self.jobs[job.key].start = now
        self._move(job.tenant, now, demand.get(GPU, 0))

    def ended(self, job: BatchJob, now: float, demand: Mapping[str, int]) -> None:
        self.jobs[job.key].end = now
        self._move(job.tenant, now, -demand.get(GPU, 0))

    def _move(self, tenant: str, now: float, milli: int) -> None:
        self._in_use += milli
        self.steps.append((now, self._in_use))
        used = self._tenant_use.get(tenant, 0) + milli
        self._tenant_use[tenant] = used
        self.tenant_steps.setdefault(tenant, []).append((now, used))

    def gpu_utilisation(self, start: float, end: float) -> float:
        """Mean share of the cluster's GPUs in use over [start, end)."""
        cap = self.capacity.get(GPU, 0)
        if cap <= 0 or end <= start:
            return 0.0
        return integrate(self.steps, start, end) / (cap * (end - start))

    def tenant_gpus(self, tenant: str, start: float, end: float) -> float:
        """Mean GPUs (whole) the tenant held over [start, end)."""
        if end <= start:
            return 0.0
        steps = self.tenant_steps.get(tenant, [])
        return integrate(steps, start, end) / (MILLI_PER_GPU * (end - start))

    def makespan(self) -> float:
        ends = [r.end for r in self.jobs.values() if r.end is not None]
        return max(ends, default=0.0)


def integrate(steps: list[tuple[float, int]], start: float, end: float) -> float:
    """The integral over [start, end) of a right-continuous step function given as
    (time, value from then on) in time order; 0 before its first step."""
    area = 0.0
    value = 0
    last = start
    for at, new in steps:
        if at >= end:
            break
        if at > last:
            area += value * (at - last)
            last = at
        value = new
    area += value * (end - last)
    return area
