"""PostFilter for pods and gangs: the cheapest whole-gang victim set, or why there is none.

Purely computational: `plan_preemption` reads the snapshot through trials it discards, so
the snapshot is exactly as it was when it returns.

One pod (kube-scheduler's DefaultPreemption, per node): on each node that holds candidate
victims, the pod must fit once all of them are gone; then the cheapest subset that still
lets it fit there is searched (search.py). Nodes are visited in order of a lower bound on
what their best set can cost, and the walk stops once the best set found costs no more
than the next node's bound, so on a large cluster only a few nodes are dry-run. The bounds
of nodes whose candidates are lone pods come from facts kept per node generation between
plans (node_facts.py), so a plan reads again only the nodes that changed since the last.

A gang: one search over the whole cluster, each candidate set judged by the gang cycle
itself (`schedule_gang`, holding nothing), so the gang's packing and topology rules decide.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence

from batchsched.framework.profile import Profile
from batchsched.framework.runner import ProfileRunner, Within
from batchsched.gang.core import GangDecision, Outcome
from batchsched.model.resources import NVIDIA_GPU, PODS
from batchsched.preemption.cost import (
    Cost,
    cluster_covers,
    cluster_free,
    demand,
    node_covers,
    node_lower_bound,
    plan_cost,
    shortfall,
)
from batchsched.preemption.domains import domain_scopes, domains_planned, required_level
from batchsched.preemption.fit import (
    PodDryRun,
    dry_run_profile,
    evicted,
    evicted_pods,
    place_gang,
    prepare_dry_run,
    unit_fits_on_node,
    why_not,
)
from batchsched.preemption.model import NoPlan, PreemptionPlan, PreemptionRequest
from batchsched.preemption.node_facts import UNKNOWN, Ask, FactsMemo, candidates_on
from batchsched.preemption.search import Found, cheapest
from batchsched.preemption.units import ZONE_LABEL, Candidates, Unit, collect, lone_units
from batchsched.snapshot import Snapshot

__all__ = ["plan_preemption"]

NEVER = "Never"
# A gang preemptor's greedy search also tries this many nodes (and zones) first, the ones
# whose candidate victims free the most, so its victims can come from one place.
DOMAINS_TRIED = 4


def plan_preemption(
    request: PreemptionRequest,
    snapshot: Snapshot,
    runner: ProfileRunner,
    memo: FactsMemo | None = None,
) -> PreemptionPlan | NoPlan:
    """The cheapest set of whole victim units whose eviction lets the preemptor fit.

    `memo`: per-node facts kept from earlier plans on this snapshot (node_facts.py; the
    caller promises that a pod's start in `started` does not move); without one, every
    node is read afresh."""
    refused = _refusal(request)
    if refused:
        return NoPlan(refused)
    profile = dry_run_profile(runner.profile)
    if request.group is None:
        return _plan_pod(request, snapshot, profile, memo or FactsMemo())
    candidates = collect(request, snapshot)
    if not candidates.nodes:
        return _nothing_to_evict(request, candidates)
    return _plan_gang(request, candidates, snapshot, profile)


def _refusal(request: PreemptionRequest) -> str:
    if not request.preemptor:
        return "preemption cannot help: no pods to place"
    if request.group is None and len(request.preemptor) != 1:
        return f"a preemptor without a PodGroup is one pod, not {len(request.preemptor)}"
    if all(p.preemption_policy == NEVER for p in request.preemptor):
        return f"{request.who} does not preempt: preemptionPolicy is Never"
    return ""


def _nothing_to_evict(request: PreemptionRequest, candidates: Candidates) -> NoPlan:
    spared = _spared(request, candidates)
    return NoPlan(f"preemption cannot help: no {_kind(request)} pods to evict{spared}")


def _plan_pod(
    request: PreemptionRequest, snapshot: Snapshot, profile: Profile, memo: FactsMemo
) -> PreemptionPlan | NoPlan:
    """Nodes in order of their lower bound; a node is dry-run only while its bound is below
    the best set found. Plain nodes (lone candidates only) are bounded from the memo; the
    others (gang members, reclaimable, unconfirmed or young pods) from their pods."""
    pod = request.preemptor[0]
    bounds, general = _node_bounds(request, snapshot, memo)
    dry = prepare_dry_run(profile, pod, snapshot)
    heapq.heapify(bounds)
    best: tuple[Found, str] | None = None
    while bounds:
        bound, _, node, short = heapq.heappop(bounds)
        if best is not None and best[0].cost <= bound:
            break  # no node left can beat it
        source = general.get(node)
        if source is not None:
            units = source.units_on(node)
        else:
            info = snapshot.get(node)
            assert info is not None
            units = lone_units(request, snapshot, candidates_on(info, request.priority))
        found = _best_on_node(request, units, snapshot, dry, node, short)
        if found is not None and (best is None or found.cost < best[0].cost):
            best = (found, node)
    if best is None:
        candidates = collect(request, snapshot)
        if not candidates.nodes:
            return _nothing_to_evict(request, candidates)
        with evicted_pods(snapshot, candidates.victim_pods()):
            left = why_not(profile, pod, snapshot)
        return NoPlan(_cannot_help(request, candidates, f"{pod.key} unschedulable: {left}"))
    found, node = best
    if not found.units:
        return NoPlan(f"preemption is not needed: {request.who} fits on {node} as it is")
    return _plan(request, found, {pod.uid: node})


Bound = tuple[Cost, int, str, Mapping[str, int]]


def _node_bounds(
    request: PreemptionRequest, snapshot: Snapshot, memo: FactsMemo
) -> tuple[list[Bound], dict[str, Candidates]]:
    """Every node's lower bound (with its index, name and shortfall), and the candidates of
    the nodes not bounded from the memo, by node name."""
    need = demand(request.preemptor)
    special = _special_nodes(request, snapshot)
    general: dict[str, Candidates] = {}
    if special:
        shared = collect(request, snapshot, [i for i in snapshot.nodes if i.name in special])
        general = dict.fromkeys(special, shared)
    bounds: list[Bound] = []
    now, young, started = request.now, request.min_runtime_s, request.started
    ask = Ask.of(request.priority, need)
    for index, info in enumerate(snapshot.nodes):
        name = info.name
        if name not in general:
            facts = memo.lone_facts(info, ask, started)
            if facts is None:
                continue
            if facts.latest_start == UNKNOWN or now - facts.latest_start >= young:
                bounds.append((facts.bound(now), index, name, facts.short))
                continue
            general[name] = collect(request, snapshot, [info])  # a pod may be too young
        short = shortfall(info, need)
        bound = node_lower_bound(short, general[name].facts_on(name, short))
        if bound is not None:
            bounds.append((bound, index, name, short))
    memo.prune(snapshot)
    return bounds, general


def _special_nodes(request: PreemptionRequest, snapshot: Snapshot) -> set[str]:
    """Nodes whose candidates the memo does not judge: those holding a gang member, a pod
    the preemptor may reclaim, a pod not yet confirmed, or the preemptor itself."""
    own = (p.uid for p in request.preemptor)
    names: set[str] = set()
    for uids in (request.gang_of, request.reclaimable, request.unconfirmed, own):
        for uid in uids:
            info = snapshot.node_of(uid)
            if info is not None:
                names.add(info.name)
    return names


def _best_on_node(
    request: PreemptionRequest,
    units: Sequence[Unit],
    snapshot: Snapshot,
    dry: PodDryRun,
    node: str,
    short: Mapping[str, int],
) -> Found | None:
    def fits(chosen: Sequence[Unit]) -> bool:
        return unit_fits_on_node(dry, snapshot, node, chosen)

    if not short and fits(()):
        return Found((), ())
    if not fits(units):
        return None
    return cheapest(
        units,
        fits,
        lambda chosen: node_covers(node, short, chosen),
        lambda chosen: plan_cost(chosen, request.budgets),
    )


def _plan_gang(
    request: PreemptionRequest, candidates: Candidates, snapshot: Snapshot, profile: Profile
) -> PreemptionPlan | NoPlan:
    group = request.group
    assert group is not None
    level = required_level(profile, group)
    if level is None:
        return _search_gang(request, candidates, candidates.units, snapshot, profile, None)
    need = demand(request.preemptor)
    limit = domains_planned(profile)
    scopes = domain_scopes(level, snapshot, candidates.units, need, limit)
    if not scopes:
        return NoPlan(
            f"preemption cannot help: no {level} domain holds {request.who} even with every "
            f"{_kind(request)} pod inside it evicted"
        )
    best: PreemptionPlan | None = None
    refusal = NoPlan("")
    for scope in scopes:
        within = Within(scope.nodes, scope.reason)
        planned = _search_gang(request, candidates, scope.units, snapshot, profile, within)
        if isinstance(planned, NoPlan):
            if planned.reason.startswith("preemption is not needed"):
                return planned
            refusal = planned
        elif best is None or planned.cost < best.cost:
            best = planned
    return best if best is not None else refusal


def _search_gang(
    request: PreemptionRequest,
    candidates: Candidates,
    units: Sequence[Unit],
    snapshot: Snapshot,
    profile: Profile,
    within: Within | None,
) -> PreemptionPlan | NoPlan:
    """The cheapest set of `units` whose eviction lets the gang fit (only on `within`'s
    nodes, where given), judged by the gang cycle itself."""
    group = request.group
    assert group is not None
    pending = request.preemptor

    def attempt(chosen: Sequence[Unit]) -> GangDecision:
        with evicted(snapshot, chosen):
            return place_gang(profile, group, pending, request.bound_members, snapshot, within)

    def placed(chosen: Sequence[Unit]) -> dict[str, str] | None:
        decision = attempt(chosen)
        if decision.outcome is Outcome.REJECT:
            return None
        return {r.pod.uid: r.node for r in decision.placed}

    need = demand(pending)
    free = cluster_free(snapshot, need)
    short = {name: amount - free[name] for name, amount in need.items() if amount > free[name]}
    if not short and placed(()) is not None:
        return NoPlan(f"preemption is not needed: {request.who} fits as it is")
    decision = attempt(units)
    if decision.outcome is Outcome.REJECT:
        return NoPlan(
            _cannot_help(request, candidates, f"{request.who} unplaced: {decision.message}")
        )
    found = cheapest(
        units,
        lambda chosen: placed(chosen) is not None,
        lambda chosen: cluster_covers(short, chosen),
        lambda chosen: plan_cost(chosen, request.budgets),
        _domains(units, need, snapshot),
    )
    placements = placed(found.units)
    if placements is None:  # the search only returns sets the gang cycle accepted
        raise RuntimeError(f"preemption plan for {request.who} no longer fits")
    return _plan(request, found, placements)


def _domains(
    units: Sequence[Unit], need: Mapping[str, int], snapshot: Snapshot
) -> list[frozenset[str]]:
    """The nodes, then the zones, whose candidate victims free the most of what the gang
    is short of (GPUs when it asks for any, else pod slots)."""
    resource = NVIDIA_GPU if need.get(NVIDIA_GPU) else PODS
    per_node: dict[str, int] = {}
    for unit in units:
        for node, amounts in unit.freed.items():
            per_node[node] = per_node.get(node, 0) + amounts.get(resource, 0)
    per_zone: dict[str, set[str]] = {}
    for node in per_node:
        info = snapshot.get(node)
        zone = info.node.labels.get(ZONE_LABEL, node) if info is not None else node
        per_zone.setdefault(zone, set()).add(node)

    def freed_in(zone: str) -> int:
        return sum(per_node[n] for n in per_zone[zone])

    nodes = sorted(per_node, key=lambda n: -per_node[n])[:DOMAINS_TRIED]
    zones = [z for z in sorted(per_zone, key=lambda z: -freed_in(z)) if len(per_zone[z]) > 1]
    return [frozenset([n]) for n in nodes] + [frozenset(per_zone[z]) for z in zones[:DOMAINS_TRIED]]


def _plan(request: PreemptionRequest, found: Found, placements: dict[str, str]) -> PreemptionPlan:
    victims = tuple(sorted((u.victim() for u in found.units), key=lambda v: v.key))
    return PreemptionPlan(victims, placements, found.cost[0], found.cost)


def _kind(request: PreemptionRequest) -> str:
    return "lower-priority or reclaimable" if request.reclaimable else "lower-priority"


def _cannot_help(request: PreemptionRequest, candidates: Candidates, leaves: str) -> str:
    pods = candidates.pods
    noun = "pod" if pods == 1 else "pods"
    return (
        f"preemption cannot help: even evicting all {pods} {_kind(request)} {noun} leaves "
        f"{leaves}{_spared(request, candidates)}"
    )


def _spared(request: PreemptionRequest, candidates: Candidates) -> str:
    parts = []
    if candidates.spared_young:
        just = "just placed or " if request.unconfirmed else ""
        parts.append(
            f"{candidates.spared_young} {just}inside the minimum runtime of "
            f"{request.min_runtime_s:g}s"
        )
    if candidates.spared_with_gang:
        parts.append(f"{candidates.spared_with_gang} in gangs with a member that may not go")
    if candidates.spared_terminating:
        parts.append(f"{candidates.spared_terminating} already terminating")
    return f" ({', '.join(parts)} spared)" if parts else ""
