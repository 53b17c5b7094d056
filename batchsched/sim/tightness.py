"""How tightly gangs were placed: for each gang at the moment it started, the tightest topology
level whose one domain holds every node it got, against the tightest level at which one
domain could have held it then. Purely computational: replays a run's starts and ends.

"Could have held" counts capacity only: per node, how many of the gang's members its free
GPUs, cpu, memory and pod slots hold just before the gang was placed (its largest member
standing in for all, where members differ); a domain holds the gang when its nodes' counts
add up to the members. Filters other than capacity (taints, affinity, GPU links, backfill
reservations) are not judged. A gang is in its tightest feasible domain when the level it was
placed at is no wider than that one.

Levels are indices into the level keys, tightest first; one past the last is the whole
cluster (the nodes share no domain of any level).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from batchsched.gang.topology import DEFAULT_LEVELS, TopologyRequest
from batchsched.model.node import NodeView
from batchsched.model.resources import PODS, Resources

__all__ = [
    "Ended",
    "GangTightness",
    "Started",
    "TightnessSummary",
    "level_name",
    "measure",
    "percentile",
    "summarise",
]


@dataclass(frozen=True, slots=True)
class Started:
    """A gang started at `at`: each member's node and requests, in member order."""

    key: str
    at: float
    arrival: float
    request: TopologyRequest | None
    placed: tuple[tuple[str, Resources], ...]


@dataclass(frozen=True, slots=True)
class Ended:
    key: str


@dataclass(frozen=True, slots=True)
class GangTightness:
    key: str
    request: TopologyRequest | None
    members: int
    placed_level: int  # the tightest level one of whose domains holds all its nodes
    feasible_level: int  # the tightest level where one domain had room for it, just before
    honoured: bool | None  # a required request: all nodes in one domain of its level
    wait: float

    @property
    def in_tightest(self) -> bool:
        return self.placed_level <= self.feasible_level


class _Cluster:
    """Free capacity per node as a run is replayed, and each level's domains."""

    def __init__(self, nodes: Sequence[NodeView], levels: Sequence[str]) -> None:
        self.index = {node.name: i for i, node in enumerate(nodes)}
        self.labels = [node.labels for node in nodes]
        self.allocatable = [node.allocatable for node in nodes]
        self.used = [Resources() for _ in nodes]
        self.pods = [0] * len(nodes)
        self.domains = [_domains(nodes, level) for level in levels]

    def take(self, placed: Sequence[tuple[str, Resources]], sign: int) -> None:
        for node, requests in placed:
            i = self.index[node]
            self.used[i] = self.used[i] + requests if sign > 0 else self.used[i] - requests
            self.pods[i] += sign

    def rooms(self, member: Mapping[str, int]) -> list[int]:
        """Per node: how many members asking `member` its free room holds."""
        out = []
        for alloc, used, pods in zip(self.allocatable, self.used, self.pods, strict=True):
            room = alloc.pods - pods if alloc.pods else 0
            for name, amount in member.items():
                room = min(room, (alloc.get(name) - used.get(name)) // amount)
            out.append(max(room, 0))
        return out


def _domains(nodes: Sequence[NodeView], level: str) -> list[list[int]]:
    found: dict[str, list[int]] = {}
    for i, node in enumerate(nodes):
        value = node.labels.get(level)
        if value is not None:
            found.setdefault(value, []).append(i)
    return list(found.values())


def measure(
    nodes: Sequence[NodeView],
    events: Sequence[Started | Ended],
    levels: Sequence[str] = DEFAULT_LEVELS,
) -> list[GangTightness]:
    """Every started gang, in start order, measured against the free capacity just before
    it was placed (the run replayed from an empty cluster)."""
    cluster = _Cluster(nodes, levels)
    running: dict[str, Started] = {}
    out = []
    for event in events:
        if isinstance(event, Ended):
            cluster.take(running.pop(event.key).placed, -1)
            continue
        out.append(_judge(cluster, event, levels))
        cluster.take(event.placed, +1)
        running[event.key] = event
    return out


def _judge(cluster: _Cluster, gang: Started, levels: Sequence[str]) -> GangTightness:
    members = len(gang.placed)
    rooms = cluster.rooms(_largest(r for _, r in gang.placed))
    feasible = next(
        (
            li
            for li, domains in enumerate(cluster.domains)
            if any(sum(rooms[i] for i in nodes) >= members for nodes in domains)
        ),
        len(levels),
    )
    labels = [cluster.labels[cluster.index[node]] for node, _ in gang.placed]
    placed = next(
        (li for li, level in enumerate(levels) if _shared(labels, level)),
        len(levels),
    )
    request = gang.request
    required = request.level_in(levels) if request is not None and request.required else None
    honoured = None if required is None else _shared(labels, required)
    return GangTightness(
        gang.key, request, members, placed, feasible, honoured, gang.at - gang.arrival
    )


def _largest(requests: Iterable[Resources]) -> dict[str, int]:
    """Per resource, the most any member asks (pods left out: one slot per member)."""
    member: dict[str, int] = {}
    for r in requests:
        for name in r.names():
            if name != PODS and r.get(name) > 0:
                member[name] = max(member.get(name, 0), r.get(name))
    return member


def _shared(labels: Sequence[Mapping[str, str]], level: str) -> bool:
    values = {node.get(level) for node in labels}
    return len(values) == 1 and None not in values


def level_name(levels: Sequence[str], index: int) -> str:
    """`nvidia.com/gpu.clique` -> "gpu.clique", `topology.batchsched.io/rack` -> "rack";
    one past the last level: "cluster"."""
    if index >= len(levels):
        return "cluster"
    return levels[index].rsplit("/", 1)[-1]


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100); 0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


@dataclass(frozen=True, slots=True)
class TightnessSummary:
    levels: tuple[str, ...]
    started: int
    unstarted: int
    in_tightest: int
    preferred: int  # gangs with a preferred request (or none)
    preferred_in_tightest: int
    required: int
    honoured: int
    placed_by_level: tuple[int, ...]  # gangs per placed level; the last entry: cluster
    feasible_by_level: tuple[int, ...]
    wait_p50: float
    wait_p99: float
    gpu_allocation: float  # mean share of GPUs allocated while gangs arrived
    gpu_at_last_arrival: float  # share of GPUs allocated once the last gang arrived

    @property
    def tightest_share(self) -> float:
        return self.in_tightest / self.started if self.started else 0.0

    @property
    def preferred_share(self) -> float:
        return self.preferred_in_tightest / self.preferred if self.preferred else 0.0

    @property
    def honoured_share(self) -> float:
        return self.honoured / self.required if self.required else 1.0


def summarise(
    gangs: Sequence[GangTightness],
    levels: Sequence[str],
    unstarted: int,
    gpu_allocation: float = 0.0,
    gpu_at_last_arrival: float = 0.0,
) -> TightnessSummary:
    required = [g for g in gangs if g.honoured is not None]
    preferred = [g for g in gangs if g.honoured is None]
    waits = [g.wait for g in gangs]
    return TightnessSummary(
        levels=tuple(levels),
        started=len(gangs),
        unstarted=unstarted,
        in_tightest=sum(g.in_tightest for g in gangs),
        preferred=len(preferred),
        preferred_in_tightest=sum(g.in_tightest for g in preferred),
        required=len(required),
        honoured=sum(bool(g.honoured) for g in required),
        placed_by_level=_histogram([g.placed_level for g in gangs], len(levels) + 1),
        feasible_by_level=_histogram([g.feasible_level for g in gangs], len(levels) + 1),
        wait_p50=percentile(waits, 50),
        wait_p99=percentile(waits, 99),
        gpu_allocation=gpu_allocation,
        gpu_at_last_arrival=gpu_at_last_arrival,
    )


def _histogram(values: Sequence[int], size: int) -> tuple[int, ...]:
    counts = [0] * size
    for value in values:
        counts[value] += 1
    return tuple(counts)
