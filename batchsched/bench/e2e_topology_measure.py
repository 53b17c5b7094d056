"""What one scheduler did with the topology workload, from the bench's watch. Purely
computational.

The watch gives, per pod, when it appeared, when it was seen bound and on which node. A gang
started when its last member was bound; replayed in that order from an empty cluster, each
gang is judged by sim/tightness.py: the tightest level holding all its nodes against the
tightest level where one domain had room for it just before. Pods stay bound (no kubelet ever
ends them), so nothing ends during the replay.

A gang bound only in part (a scheduler that split it) still holds its nodes: it is replayed
at its last bind, so the gangs after it see the room it took, but it is not judged.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from batchsched.bench.e2e_topology_workload import GPU, Gang
from batchsched.bench.e2e_watch import percentile
from batchsched.model.node import NodeView
from batchsched.sim.tightness import Started, TightnessSummary, measure, summarise


@dataclass(frozen=True, slots=True)
class Observed:
    """What the bench's watch saw of the pods, on its own clock."""

    appeared: Mapping[str, float]
    bound: Mapping[str, float]
    nodes: Mapping[str, str]  # bound pods only


@dataclass(frozen=True, slots=True)
class Outcome:
    complete: int  # gangs with every member bound
    partial: int  # gangs with some but not all members bound
    unstarted: int  # gangs with no member bound
    latencies: tuple[float, ...]  # per complete gang: last member bound - last member appeared
    summary: TightnessSummary  # of the complete gangs
    bound_gpus: int
    total_gpus: int
    # GPUs of each gang not bound whole -> how many such gangs
    left_by_gpus: Mapping[int, int] = field(default_factory=dict)

    @property
    def gpu_allocation(self) -> float:
        return self.bound_gpus / self.total_gpus if self.total_gpus else 0.0

    @property
    def p50_ms(self) -> float:
        return percentile(self.latencies, 50) * 1e3

    @property
    def p99_ms(self) -> float:
        return percentile(self.latencies, 99) * 1e3


def gang_starts(workload: Sequence[Gang], seen: Observed) -> tuple[list[Started], set[str]]:
    """Every gang with a member bound, as started at its last member's bind (in that order),
    and the names of those bound only in part."""
    starts: list[Started] = []
    partial: set[str] = set()
    for gang in workload:
        bound = [m for m in gang.member_names if m in seen.bound]
        if not bound:
            continue
        if len(bound) < gang.members:
            partial.add(gang.name)
        appeared = [seen.appeared[m] for m in gang.member_names if m in seen.appeared]
        at = max(seen.bound[m] for m in bound)
        placed = tuple((seen.nodes[m], gang.member_requests) for m in bound)
        starts.append(Started(gang.name, at, max(appeared, default=at), gang.request, placed))
    starts.sort(key=lambda s: (s.at, s.key))
    return starts, partial


def judge(
    nodes: Sequence[NodeView], workload: Sequence[Gang], seen: Observed, levels: Sequence[str]
) -> Outcome:
    starts, partial = gang_starts(workload, seen)
    judged = [g for g in measure(nodes, starts, levels) if g.key not in partial]
    whole = {g.key for g in judged}
    by_name = {g.name: g for g in workload}
    bound_gpus = sum(len(s.placed) * by_name[s.key].member_requests.get(GPU) for s in starts)
    return Outcome(
        complete=len(judged),
        partial=len(partial),
        unstarted=len(workload) - len(starts),
        latencies=tuple(s.at - s.arrival for s in starts if s.key not in partial),
        summary=summarise(judged, levels, unstarted=len(workload) - len(judged)),
        bound_gpus=bound_gpus,
        total_gpus=sum(node.allocatable.get(GPU) for node in nodes),
        left_by_gpus=dict(sorted(Counter(g.gpus for g in workload if g.name not in whole).items())),
    )
