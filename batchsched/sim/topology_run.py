"""One gang workload through the batch simulator on a topology cluster, measured for domain
tightness (`tightness.py`): where each gang started, replayed against the free capacity just
before it was placed.

`PlacementLog` is the simulator's run log that also keeps, in order, each gang's start (the
node of every member, read from the snapshot as the gang is booked) and end. The profile
decides whether domains are chosen: `without_domains` drops the TopologyDomains plugin (the
workload cycle then ignores topology requests). Before that plugin exists, no profile has it,
and both runs are topology-blind.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from batchsched.framework.profile import Profile
from batchsched.gang.topology import DEFAULT_LEVELS
from batchsched.model.node import NodeView
from batchsched.sim.batch import BatchJob, BatchResult, BatchSimulator, Mode
from batchsched.sim.batch_state import RunLog
from batchsched.sim.tightness import (
    Ended,
    GangTightness,
    Started,
    TightnessSummary,
    measure,
    summarise,
)
from batchsched.snapshot import Snapshot
from queues.model import GPU, QuotaPolicy, Tenant

__all__ = [
    "DOMAINS_PLUGIN",
    "PlacementLog",
    "TopologyRun",
    "domain_choice",
    "run_topology",
    "without_domains",
]

DOMAINS_PLUGIN: Final = "TopologyDomains"


@dataclass
class PlacementLog(RunLog):
    """A RunLog that also records each gang's placement and end, in the order they happen."""

    snapshot: Snapshot | None = None
    events: list[Started | Ended] = field(default_factory=list)

    def started(self, job: BatchJob, now: float, demand: Mapping[str, int]) -> None:
        super().started(job, now, demand)
        assert self.snapshot is not None
        placed = []
        for pod in job.members:
            info = self.snapshot.node_of(pod.uid)
            assert info is not None, f"{pod.uid} of started gang {job.key} is on no node"
            placed.append((info.name, pod.requests))
        self.events.append(Started(job.key, now, job.arrival, job.topology, tuple(placed)))

    def ended(self, job: BatchJob, now: float, demand: Mapping[str, int]) -> None:
        super().ended(job, now, demand)
        self.events.append(Ended(job.key))


@dataclass(frozen=True, slots=True)
class TopologyRun:
    result: BatchResult
    events: tuple[Started | Ended, ...]  # as run (the baseline's without requests)
    gangs: tuple[GangTightness, ...]
    summary: TightnessSummary


def domain_choice(profile: Profile) -> bool:
    """Whether the profile chooses domains for gangs that ask for one."""
    return any(p.name == DOMAINS_PLUGIN for p in profile.pre_filter)


def without_domains(profile: Profile) -> Profile:
    """The profile with TopologyDomains disabled: gangs' topology requests are ignored."""
    kept = tuple(p for p in profile.pre_filter if p.name != DOMAINS_PLUGIN)
    return dataclasses.replace(profile, pre_filter=kept)


def one_tenant(jobs: Sequence[BatchJob]) -> QuotaPolicy:
    """No quota in the way: every job's tenant, unbounded."""
    tenants = {job.tenant: Tenant(job.tenant) for job in jobs}
    default = next(iter(tenants), "t")
    return QuotaPolicy(tenants or {"t": Tenant("t")}, default_tenant=default)


def run_topology(
    nodes: Sequence[NodeView],
    jobs: Sequence[BatchJob],
    profile: Profile,
    mode: Mode = "backfill",
    seed: int = 0,
    levels: Sequence[str] = DEFAULT_LEVELS,
    requests: Mapping[str, BatchJob] | None = None,
) -> TopologyRun:
    """Run the jobs and measure them. `requests`: the jobs whose topology requests the
    measure judges, by key, when the ones run carry none (the topology-blind baseline)."""
    simulator = BatchSimulator(Snapshot(list(nodes), []), profile, one_tenant(jobs), mode, seed)
    log = PlacementLog(simulator.capacity, snapshot=simulator.snapshot)
    simulator.log = log  # the simulator books every start and end on its log
    result = simulator.run(jobs)
    judged = log.events
    if requests is not None:
        judged = [_asked(e, requests) for e in judged]
    gangs = tuple(measure(nodes, judged, levels))
    last_arrival = max((job.arrival for job in jobs), default=0.0)
    unstarted = sum(1 for record in log.jobs.values() if record.start is None)
    allocation = log.gpu_utilisation(0.0, last_arrival)
    summary = summarise(gangs, levels, unstarted, allocation, _allocated_at(log, last_arrival))
    return TopologyRun(result, tuple(log.events), gangs, summary)


def _allocated_at(log: RunLog, at: float) -> float:
    """The share of the cluster's GPUs allocated at `at` (after every change at that instant)."""
    capacity = log.capacity.get(GPU, 0)
    in_use = 0
    for when, value in log.steps:
        if when > at:
            break
        in_use = value
    return in_use / capacity if capacity > 0 else 0.0


def _asked(event: Started | Ended, requests: Mapping[str, BatchJob]) -> Started | Ended:
    if isinstance(event, Ended):
        return event
    return dataclasses.replace(event, request=requests[event.key].topology)
