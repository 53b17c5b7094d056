"""Candidate victim units: the pods a preemptor may evict, grouped so that gangs go whole.

Purely computational: reads the snapshot and the request, changes nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Final, NamedTuple

from batchsched.model.pod import PodView
from batchsched.model.resources import CPU, EPHEMERAL_STORAGE, MEMORY, NVIDIA_GPU, PODS
from batchsched.preemption.model import (
    LONE_POD_PREFIX,
    PreemptionRequest,
    VictimGang,
    budget_violations,
    gpus_of,
)
from batchsched.snapshot import NodeInfo, Snapshot

ZONE_LABEL: Final = "topology.kubernetes.io/zone"
# kube-scheduler adds MaxInt32 + 1 to each victim's priority before summing, so that every
# term is positive: a pod more never makes a set cheaper, whatever its (negative) priority.
PRIORITY_OFFSET: Final = 2**31


def priority_term(pod: PodView) -> int:
    """A pod's part of the "sum of priorities" in the cost order."""
    return pod.priority + PRIORITY_OFFSET


@dataclass(frozen=True, slots=True, eq=False)
class Unit:
    """Pods evicted together, with the facts the cost order reads, computed once."""

    key: str
    pods: tuple[PodView, ...]  # as counted in the snapshot (node_name set)
    priority: int  # highest member priority
    priority_sum: int  # sum of priority_term over the pods
    top_run_s: int  # seconds run by the longest-running member of the highest priority
    gpus: int
    run_s: int  # seconds run so far, summed over the pods
    nodes: frozenset[str]
    zones: frozenset[str]
    budget_hits: tuple[tuple[int, int], ...]  # (budget index, pods it covers)
    breaks_alone: bool  # evicting only this unit already evicts a pod beyond a budget
    # node name -> what evicting the unit frees there (resource -> amount, "pods" included)
    freed: Mapping[str, Mapping[str, int]] = field(default_factory=dict)

    def victim(self) -> VictimGang:
        return VictimGang(self.key, self.pods, self.priority)


class NodeFacts(NamedTuple):
    """Per unit with a pod on one node, without building the units: what the cost order
    reads, and what each frees on the node of the resources asked about."""

    pods: list[int]
    priorities: list[int]
    priority_sums: list[int]
    gpus: list[int]
    runs: list[int]
    top_runs: list[int]
    freed: dict[str, list[int]]


class Candidates:
    """The units a preemptor may evict. Lone pods become `Unit`s only when asked for, per
    node: a single-pod plan on a large cluster reads every pod but dry-runs few nodes."""

    __slots__ = (
        "_built",
        "_gangs_on",
        "_lone_on",
        "_request",
        "_rules",
        "_snapshot",
        "gang_units",
        "spared_terminating",
        "spared_with_gang",
        "spared_young",
    )

    def __init__(self, request: PreemptionRequest, snapshot: Snapshot, rules: _Rules) -> None:
        self._request = request
        self._snapshot = snapshot
        self._rules = rules
        self._lone_on: dict[str, list[tuple[PodView, int]]] = {}  # (pod, seconds run)
        self._gangs_on: dict[str, list[Unit]] = {}
        self._built: dict[str, tuple[Unit, ...]] = {}
        self.gang_units: tuple[Unit, ...] = ()
        self.spared_young = 0  # lower-priority pods of units inside the minimum runtime
        self.spared_terminating = 0
        self.spared_with_gang = 0  # lower-priority pods whose gang has a member that may not go

    @property
    def nodes(self) -> list[str]:
        """Nodes holding candidate victims, in snapshot order."""
        names = self._lone_on.keys() | self._gangs_on.keys()
        return [info.name for info in self._snapshot.nodes if info.name in names]

    @property
    def units(self) -> tuple[Unit, ...]:
        """Every unit: the lone pods node by node, then the gangs."""
        lone = [u for node in self._lone_on for u in self._lone_units(node)]
        return (*lone, *self.gang_units)

    @property
    def pods(self) -> int:
        lone = sum(len(p) for p in self._lone_on.values())
        return lone + sum(len(u.pods) for u in self.gang_units)

    def victim_pods(self) -> list[PodView]:
        """Every pod of every unit, without building the units."""
        lone = [p for pods in self._lone_on.values() for p, _ in pods]
        return lone + [p for u in self.gang_units for p in u.pods]

    def units_on(self, node: str) -> tuple[Unit, ...]:
        """Units with a pod on the node, lone pods first."""
        return (*self._lone_units(node), *self._gangs_on.get(node, ()))

    def _lone_units(self, node: str) -> tuple[Unit, ...]:
        built = self._built.get(node)
        if built is None:
            zones = _ZoneOf(self._snapshot)
            built = tuple(
                _unit(self._rules, self._request, f"{LONE_POD_PREFIX}{p.key}", (p,), zones)
                for p, _ in self._lone_on.get(node, ())
            )
            self._built[node] = built
        return built

    def facts_on(self, node: str, names: Iterable[str]) -> NodeFacts:
        """The units on the node, in units_on order (this runs for every node: lists only)."""
        lone = self._lone_on.get(node, ())
        gangs = self._gangs_on.get(node, ())
        freed: dict[str, list[int]] = {}
        for name in names:
            # A pod slot is not in a pod's requests; each pod frees one.
            own = [1] * len(lone) if name == PODS else [p.requests.get(name) for p, _ in lone]
            freed[name] = own + [u.freed[node].get(name, 0) for u in gangs]
        return NodeFacts(
            [1] * len(lone) + [len(u.pods) for u in gangs],
            [p.priority for p, _ in lone] + [u.priority for u in gangs],
            [priority_term(p) for p, _ in lone] + [u.priority_sum for u in gangs],
            [p.requests.scalar.get(NVIDIA_GPU, 0) for p, _ in lone] + [u.gpus for u in gangs],
            [ran for _, ran in lone] + [u.run_s for u in gangs],
            [ran for _, ran in lone] + [u.top_run_s for u in gangs],
            freed,
        )


class _ZoneOf(Mapping[str, str]):
    """node name -> its zone label (the node name where it has none), read on demand."""

    __slots__ = ("_snapshot",)

    def __init__(self, snapshot: Snapshot) -> None:
        self._snapshot = snapshot

    def __getitem__(self, node: str) -> str:
        info = self._snapshot.get(node)
        return node if info is None else info.node.labels.get(ZONE_LABEL, node)

    def __iter__(self) -> Iterator[str]:
        return (info.name for info in self._snapshot.nodes)

    def __len__(self) -> int:
        return len(self._snapshot.nodes)


def collect(
    request: PreemptionRequest, snapshot: Snapshot, infos: Iterable[NodeInfo] | None = None
) -> Candidates:
    """Every unit the preemptor may evict; gangs are whole or left out. `infos`: only the
    pods on these nodes (in snapshot order; a gang with a member elsewhere must not be
    among them: it would be judged on part of its members)."""
    rules = _Rules.of(request)
    own = {p.uid for p in request.preemptor}
    own_gang = request.group.key if request.group is not None else None
    gang_of = request.gang_of
    found = Candidates(request, snapshot, rules)
    groups: dict[str, list[PodView]] = {}
    for info in snapshot.nodes if infos is None else infos:
        lone: list[tuple[PodView, int]] = []
        for uid, pod in info.pods.items():
            key = gang_of.get(uid)
            if key is not None:
                if key != own_gang:
                    groups.setdefault(key, []).append(pod)
            elif uid not in own:
                # The common case, a lone pod: judged without building anything.
                verdict, ran = rules.judge_one(pod)
                if verdict == "ok":
                    lone.append((pod, ran))
                else:
                    _spare(found, verdict, 1)
        if lone:
            found._lone_on[info.name] = lone
    _collect_gangs(found, groups)
    return found


def lone_units(
    request: PreemptionRequest, snapshot: Snapshot, pods: Iterable[PodView]
) -> tuple[Unit, ...]:
    """One unit per pod, for pods already known to be candidates (node_facts.py)."""
    rules = _Rules.of(request)
    zones = _ZoneOf(snapshot)
    return tuple(_unit(rules, request, f"{LONE_POD_PREFIX}{p.key}", (p,), zones) for p in pods)


def _collect_gangs(found: Candidates, groups: Mapping[str, list[PodView]]) -> None:
    rules = found._rules
    zones = _ZoneOf(found._snapshot)
    units = []
    for key, pods in groups.items():
        verdict = rules.verdict(pods)
        if verdict == "ok":
            unit = _unit(rules, found._request, key, tuple(pods), zones)
            units.append(unit)
            for node in unit.nodes:
                found._gangs_on.setdefault(node, []).append(unit)
        else:
            _spare(found, verdict, sum(1 for p in pods if rules.eligible(p)))
    found.gang_units = tuple(units)


def _spare(found: Candidates, verdict: str, pods: int) -> None:
    if verdict == "young":
        found.spared_young += pods
    elif verdict == "terminating":
        found.spared_terminating += pods
    elif verdict == "gang":
        found.spared_with_gang += pods


@dataclass(frozen=True, slots=True)
class _Rules:
    """The request's eligibility rules, read once (they run for every pod on the cluster)."""

    priority: int
    reclaimable: frozenset[str]
    started: Mapping[str, float]
    now: float
    min_runtime_s: float
    unconfirmed: frozenset[str]

    @classmethod
    def of(cls, request: PreemptionRequest) -> _Rules:
        return cls(
            request.priority,
            request.reclaimable,
            request.started,
            request.now,
            request.min_runtime_s,
            request.unconfirmed,
        )

    def eligible(self, pod: PodView) -> bool:
        return pod.priority < self.priority or pod.uid in self.reclaimable

    def judge_one(self, pod: PodView) -> tuple[str, int]:
        """A lone pod's verdict and, when it is "ok", the seconds it has run."""
        if not (pod.priority < self.priority or pod.uid in self.reclaimable):
            return "priority", 0
        # Already terminating: evicting again frees nothing sooner.
        if pod.deleting:
            return "terminating", 0
        if pod.uid in self.unconfirmed:
            return "young", 0
        started = self.started_at(pod)
        if started is None:
            return "ok", 0
        ran = self.now - started
        return ("young", 0) if ran < self.min_runtime_s else ("ok", max(0, int(ran)))

    def verdict(self, pods: list[PodView]) -> str:
        """ok, or why the unit stays: priority (quietly), gang, terminating, young."""
        eligible = [self.eligible(p) for p in pods]
        if not any(eligible):
            return "priority"
        if not all(eligible):
            return "gang"
        if any(p.deleting for p in pods):
            return "terminating"
        return "young" if any(self.is_young(p) for p in pods) else "ok"

    def started_at(self, pod: PodView) -> float | None:
        """When the pod started on its node, on the request's clock; None: unknown.
        (status.startTime is wall time, not that clock: the runtime converts it.)"""
        return self.started.get(pod.uid)

    def is_young(self, pod: PodView) -> bool:
        # A pod whose start is unknown is not protected: the runtime reports every pod it bound.
        if pod.uid in self.unconfirmed:
            return True
        started = self.started_at(pod)
        return started is not None and self.now - started < self.min_runtime_s

    def run_s(self, pod: PodView) -> int:
        started = self.started_at(pod)
        return 0 if started is None else max(0, int(self.now - started))


def _unit(
    rules: _Rules,
    request: PreemptionRequest,
    key: str,
    pods: tuple[PodView, ...],
    zones: Mapping[str, str],
) -> Unit:
    hits: dict[int, int] = {}
    for i, budget in enumerate(request.budgets):
        covered = sum(1 for p in pods if budget.covers(p))
        if covered:
            hits[i] = covered
    nodes = frozenset(p.node_name for p in pods)
    priority = max(p.priority for p in pods)
    return Unit(
        key=key,
        pods=pods,
        priority=priority,
        priority_sum=sum(priority_term(p) for p in pods),
        top_run_s=max(rules.run_s(p) for p in pods if p.priority == priority),
        gpus=sum(gpus_of(p) for p in pods),
        run_s=sum(rules.run_s(p) for p in pods),
        nodes=nodes,
        zones=frozenset(zones[n] for n in nodes),
        budget_hits=tuple(sorted(hits.items())),
        breaks_alone=budget_violations(hits, request.budgets) > 0,
        freed=_freed(pods),
    )


def _freed(pods: tuple[PodView, ...]) -> dict[str, dict[str, int]]:
    freed: dict[str, dict[str, int]] = {}
    for pod in pods:
        amounts = freed.setdefault(pod.node_name, {})
        req = pod.requests
        amounts[PODS] = amounts.get(PODS, 0) + 1
        amounts[CPU] = amounts.get(CPU, 0) + req.milli_cpu
        amounts[MEMORY] = amounts.get(MEMORY, 0) + req.memory
        amounts[EPHEMERAL_STORAGE] = amounts.get(EPHEMERAL_STORAGE, 0) + req.ephemeral_storage
        for name, amount in req.scalar.items():
            amounts[name] = amounts.get(name, 0) + amount
    return freed
