"""A lower bound on the cheapest victim set of lone pods on one node, kept between plans.

Purely computational. The single-pod planner needs, for every node, a cost that no victim
set there can beat (cost.py `node_lower_bound`), and on a large cluster most nodes are the
same from one plan to the next: only the nodes that a plan touched changed. `FactsMemo` keeps
each node's facts, built from its pods once per node generation (every change to a node takes
a fresh one, node_info.py), for the preemptor's priority and demand; a plan then reads each
unchanged node in O(victims needed) instead of reading its pods again.

What is kept is what the bound reads for a node whose only candidates are lone pods of lower
priority that are not terminating: how many of them must go at least (the fewest whose
requests cover the node's shortfall), the smallest priority sums, GPUs and pod counts for
that many, and the start instants that give the smallest run times. Run times are computed
from those instants at each plan, on the plan's clock. A start instant is read from the
request's `started` when the facts are built: a memo shared between plans assumes that a
pod's start does not move while its node is unchanged (true of the live scheduler's start
times, which come from status.startTime, the first time it saw the pod run, or creation).

A node holding a gang member, a pod the preemptor may reclaim, a pod placed but not yet
confirmed, or a pod inside the minimum runtime is not judged here (the caller uses the
general path, units.py `Candidates`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from batchsched.model.pod import PodView
from batchsched.model.resources import NVIDIA_GPU, PODS
from batchsched.preemption.cost import Cost, fewest_covering, shortfall
from batchsched.preemption.units import priority_term
from batchsched.snapshot import NodeInfo, Snapshot

__all__ = ["UNKNOWN", "Ask", "FactsMemo", "LoneFacts", "candidates_on"]

# A start instant the request does not know counts as "ran 0 s" (units.py `run_s`): it sorts
# as the latest start.
UNKNOWN: Final = float("inf")


@dataclass(frozen=True, slots=True)
class LoneFacts:
    """What the bound reads on one node (lone candidates only); `None` fields mean no set
    of candidates there frees enough."""

    short: Mapping[str, int]  # what the node lacks of the preemptor's demand
    lowest: int  # lowest candidate priority
    priority_sum: int  # smallest sum of priority terms over `needed` candidates
    needed: int  # fewest candidates whose eviction can cover `short`
    gpus: int  # smallest GPUs lost over `needed` candidates, at least the GPUs short
    run_starts: tuple[float, ...]  # the `needed` latest starts: the smallest run times
    top_start: float  # the start giving the bound's longest run at the lowest priority
    latest_start: float  # the latest known start of any candidate (for the minimum runtime)

    def bound(self, now: float) -> Cost:
        """cost.py `node_lower_bound` for these candidates, on the plan's clock (it runs for
        every node of every plan: a plain loop)."""
        runs = 0
        for start in self.run_starts:
            if start != UNKNOWN and now - start >= 1:
                runs += int(now - start)
        top = self.top_start
        top_run = int(now - top) if top != UNKNOWN and now - top >= 1 else 0
        return (0, self.lowest, self.priority_sum, self.needed, top_run, self.gpus, runs, 1, 1)


@dataclass(frozen=True, slots=True)
class Ask:
    """What a preemptor asks of every node: its priority and demand (a pod slot included)."""

    priority: int
    need: Mapping[str, int]
    key: tuple[int, tuple[tuple[str, int], ...]]

    @classmethod
    def of(cls, priority: int, need: Mapping[str, int]) -> Ask:
        return cls(priority, need, (priority, tuple(sorted(need.items()))))


class FactsMemo:
    """Per node: its generation, what the facts were built for, and the facts (None: no
    lone candidate set there frees enough)."""

    __slots__ = ("_entries",)

    def __init__(self) -> None:
        self._entries: dict[str, tuple[int, object, LoneFacts | None]] = {}

    def lone_facts(
        self, info: NodeInfo, ask: Ask, started: Mapping[str, float]
    ) -> LoneFacts | None:
        """The node's facts for this preemptor (built when the node, or what is asked of
        it, changed since the last plan that asked)."""
        entry = self._entries.get(info.name)
        if entry is not None and entry[0] == info.generation and entry[1] == ask.key:
            return entry[2]
        facts = build_lone_facts(info, ask.priority, ask.need, started)
        self._entries[info.name] = (info.generation, ask.key, facts)
        return facts

    def prune(self, snapshot: Snapshot) -> None:
        """Drop the nodes no longer in the snapshot (the memo outlives node deletions)."""
        if len(self._entries) > len(snapshot.nodes):
            for name in [n for n in self._entries if snapshot.get(n) is None]:
                del self._entries[name]


def candidates_on(info: NodeInfo, priority: int) -> list[PodView]:
    """Lone-pod candidates on a plain node, in the order the node counts them."""
    return [p for p in info.pods.values() if p.priority < priority and not p.deleting]


def build_lone_facts(
    info: NodeInfo, priority: int, need: Mapping[str, int], started: Mapping[str, float]
) -> LoneFacts | None:
    pods = sorted(candidates_on(info, priority), key=lambda p: p.priority)
    if not pods:
        return None
    short = shortfall(info, need)
    needed = _needed(pods, short)
    if needed is None:
        return None
    starts = [started.get(p.uid, UNKNOWN) for p in pods]
    lowest = pods[0].priority
    # Runs are smallest for the latest starts; an unknown start runs 0 s, the least.
    latest = sorted(starts, reverse=True)
    at_lowest = sorted(
        (s for s, p in zip(starts, pods, strict=True) if p.priority == lowest), reverse=True
    )
    gpus = sum(sorted(p.requests.scalar.get(NVIDIA_GPU, 0) for p in pods)[:needed])
    known = [s for s in starts if s != UNKNOWN]
    return LoneFacts(
        short=short,
        lowest=lowest,
        priority_sum=sum(priority_term(p) for p in pods[:needed]),
        needed=needed,
        gpus=max(gpus, short.get(NVIDIA_GPU, 0)),
        run_starts=tuple(latest[:needed]),
        top_start=at_lowest[min(needed, len(at_lowest)) - 1],
        latest_start=max(known, default=UNKNOWN),
    )


def _needed(pods: list[PodView], short: Mapping[str, int]) -> int | None:
    """The fewest pods whose requests cover `short` (`fewest_covering`)."""
    return fewest_covering(
        short, lambda name: (1 if name == PODS else p.requests.get(name) for p in pods)
    )
