"""Which topology domain a gang goes to: tried on a few candidate domains, the best kept.

A gang whose group asks for a topology (`PodGroupView.topology`) is placed in one domain of a
level (a node label key; batchsched/gang/domains.py). For each level it is tried at, in order
(a required level alone; a preferred one from the tightest configured level up to it), the
candidate domains (free capacity enough for its members, best fit first, at most K) each get
a placement on a snapshot trial that is then discarded. The best placement of the first level
where one succeeds wins: the most members placed (elastic surplus), then the least free
capacity left in the domain, then the candidate order. The first candidate that takes every
member ends the search: those after it fit less tightly. The cycle then places the gang for
real in that domain, with the runner rewound to where the winning trial started, so the real
placement repeats the trial's; where the winning trial was the last (it took every member, so
the search stopped there), it is kept open and is the placement itself.

Members already reserved or bound fix the domain: the gang stays where its first members are.
A required level where no domain takes the gang is a refusal with a plain reason; a preferred
one falls back to anywhere. The levels and K come from the profile's TopologyDomains plugin;
without it, topology requests are ignored (logged once per profile).
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from typing import Final

from batchsched.cycle.policies import Handle
from batchsched.cycle.workload import Workload
from batchsched.framework.runner import ProfileRunner, RunnerMark, ScheduleResult, Within
from batchsched.gang.core import GangDecision, Outcome, eligible_nodes, schedule_gang
from batchsched.gang.domains import (
    DomainFit,
    GangDemand,
    domains_of,
    free_of,
    gang_demand,
    rank_domains,
    shared_value,
)
from batchsched.gang.podgroup import PodGroupView, pod_group_of
from batchsched.gang.topology import TopologyRequest
from batchsched.node_info import NodeInfo
from batchsched.plugins.topology_domains import TopologyDomains
from batchsched.snapshot import Snapshot, Trial

logger = logging.getLogger(__name__)

# Profiles whose gangs' topology requests were logged as ignored (the plugin is disabled).
_IGNORING: Final[set[str]] = set()


@dataclass(frozen=True, slots=True)
class Kept:
    """The chosen domain's trial, still open: the placement itself, to commit or discard."""

    trial: Trial
    decision: GangDecision


@dataclass(frozen=True, slots=True)
class DomainChoice:
    """Where the gang is placed for real: `within` (None: anywhere), with the runner rewound
    to `mark` first; or, where the chosen domain's trial was the last one made, that trial
    itself (`kept`), nothing to place again. `tried` trial placements were made to choose."""

    within: Within | None
    mark: RunnerMark
    tried: int
    trial: tuple[tuple[str, str], ...] = ()  # (pod uid, node) the chosen domain's trial placed
    kept: Kept | None = None


@dataclass(frozen=True, slots=True)
class DomainRefusal:
    """No domain of the required level takes the gang: nothing is placed."""

    message: str
    results: dict[str, ScheduleResult]
    tried: int


@dataclass(frozen=True, slots=True)
class _Tried:
    fit: DomainFit
    order: int  # the candidate's position (best fit first)
    fitted: bool  # the gang's outcome in the domain was Bind or Wait
    placed: int  # members the trial placed (on a Reject, those placed before it gave up)
    leftover: int  # free dominant resource left in the domain after the placement
    mark: RunnerMark
    results: dict[str, ScheduleResult]
    kept: Kept | None = None  # the trial left open: it took every member (see _attempts)

    @property
    def score(self) -> tuple[int, int, int]:
        """Lower is better: the most members placed, then the least left free, then the
        candidate order."""
        return (-self.placed, self.leftover, self.order)

    @property
    def placements(self) -> tuple[tuple[str, str], ...]:
        return tuple((uid, r.node_name) for uid, r in self.results.items() if r.node_name)

    @property
    def closeness(self) -> tuple[int, int]:
        """Higher is closer to fitting, for a refusal's "best" domain."""
        return (self.placed, -self.order)


@dataclass(frozen=True, slots=True)
class _Gang:
    """What every trial of one gang shares."""

    handle: Handle
    workload: Workload
    runner: ProfileRunner
    demand: GangDemand
    held: tuple[NodeInfo, ...]  # nodes of members already reserved or bound
    usable: frozenset[str]  # nodes passing the first member's non-capacity filters

    @property
    def holding(self) -> int:
        """Members reserved or bound already (finished ones included)."""
        return self.workload.bound + len(self.workload.reserved)


def choose_domain(
    handle: Handle, workload: Workload, runner: ProfileRunner
) -> DomainChoice | DomainRefusal | None:
    """The domain to place a gang in; None when it asks for none (or the profile has no
    TopologyDomains, or its tier lies above every level): placed as without topology."""
    group = workload.group
    request = group.topology if group is not None else None
    if group is None or request is None:
        return None
    plugin = _plugin(runner)
    if plugin is None:
        _log_ignored(runner, request)
        return None
    levels = plugin.levels.tried_for(request)
    if not levels:
        return None
    gang = _gang(handle, workload, runner, group)
    start = runner.mark()
    tried = 0
    required = levels[-1] if request.required else None
    for level in levels:
        fits, ranked = _candidates(gang, level, plugin.max_domains_per_level, required)
        attempts = _attempts(gang, fits)
        tried += len(attempts)
        good = [t for t in attempts if t.fitted]
        if good:
            best = min(good, key=_score)
            within = Within(best.fit.names, _outside(best.fit))
            return DomainChoice(within, best.mark, tried, best.placements, best.kept)
        if level == required:
            message = _refusal(group, level, ranked, attempts, gang)
            runner.rewind(start)
            return DomainRefusal(message, _results(attempts), tried)
    return DomainChoice(None, start, tried)


def _attempts(gang: _Gang, fits: list[DomainFit]) -> list[_Tried]:
    """The gang tried in each candidate domain, best fit first, until one takes every
    member: a later candidate could only leave more free (they come best fit first). That
    last trial is the choice, and is kept open rather than made again."""
    attempts: list[_Tried] = []
    for order, fit in enumerate(fits):
        tried = _try(gang, fit, order)
        attempts.append(tried)
        if tried.kept is not None:
            break
    return attempts


def _score(tried: _Tried) -> tuple[int, int, int]:
    return tried.score


def _plugin(runner: ProfileRunner) -> TopologyDomains | None:
    for plugin in runner.profile.pre_filter:
        if isinstance(plugin, TopologyDomains):
            return plugin
    return None


def _log_ignored(runner: ProfileRunner, request: TopologyRequest) -> None:
    profile = runner.profile.scheduler_name
    if profile in _IGNORING:
        return
    _IGNORING.add(profile)
    logger.warning(
        "gang topology requests ignored: the TopologyDomains plugin is not enabled "
        "profile=%s request=%s",
        profile,
        request.describe(),
    )


def _gang(handle: Handle, workload: Workload, runner: ProfileRunner, group: PodGroupView) -> _Gang:
    held = _held(handle, workload)
    # The members the domain must hold this cycle: those still missing from the quorum.
    missing = group.min_member - workload.bound - len(workload.reserved)
    demand = gang_demand(workload.pods, max(0, missing))
    usable: frozenset[str] = frozenset()
    if not held:  # with members held, their domain is the only candidate: no ranking
        eligible = eligible_nodes(runner, workload.pods[0], handle.snapshot)
        usable = frozenset(info.name for info in eligible)
    return _Gang(handle, workload, runner, demand, held, usable)


def _held(handle: Handle, workload: Workload) -> tuple[NodeInfo, ...]:
    """The nodes of the members reserved or bound already (those the snapshot counts)."""
    snapshot = handle.snapshot
    nodes = [snapshot.get(r.node) for r in workload.reserved]
    if workload.bound:
        nodes += _bound_nodes(snapshot, workload)
    return tuple({info.name: info for info in nodes if info is not None}.values())


def _bound_nodes(snapshot: Snapshot, workload: Workload) -> list[NodeInfo | None]:
    """Nodes holding the gang's bound members: a scan of the snapshot's pods, only for
    gangs with bound members (finished members are counted in `bound` but hold no node)."""
    return [
        info
        for info in snapshot.nodes
        if any(pod_group_of(pod) == workload.key for pod in info.pods.values())
    ]


def _candidates(
    gang: _Gang, level: str, limit: int, required: str | None
) -> tuple[list[DomainFit], list[DomainFit]]:
    """The domains to try at `level` (at most `limit`), and every domain ranked (for the
    refusal's reason). With members held, only their domain is a candidate. Below a
    required level, only domains lying in one domain of it."""
    fits, ranked = _ranked(gang, level, limit)
    if required is None or level == required:
        return fits, ranked
    inside = [fit for fit in fits if shared_value(fit.nodes, required) is not None]
    return inside, ranked


def _ranked(gang: _Gang, level: str, limit: int) -> tuple[list[DomainFit], list[DomainFit]]:
    snapshot = gang.handle.snapshot
    domains = domains_of(snapshot.nodes, level)
    if gang.held:
        value = shared_value(gang.held, level)
        if value is None:
            return [], []
        fit = rank_domains({value: domains[value]}, level, gang.demand)[0]
        return [fit], [fit]
    ranked = rank_domains(domains, level, gang.demand, gang.usable)
    return [fit for fit in ranked if fit.fits][:limit], ranked


def _try(gang: _Gang, fit: DomainFit, order: int) -> _Tried:
    """The gang placed in one domain on a trial and measured; the trial is taken back unless
    every member was placed (then it is kept open, the choice made)."""
    snapshot, workload, runner = gang.handle.snapshot, gang.workload, gang.runner
    mark = runner.mark()
    trial = snapshot.begin_trial()
    try:
        decision = schedule_gang(
            workload.gang_request(),
            snapshot,
            runner,
            waiting=gang.handle.waiting(),
            hold_incomplete=workload.hold,
            within=Within(fit.names, _outside(fit)),
        )
    except BaseException:
        trial.discard()
        raise
    dominant = gang.demand.dominant
    leftover = sum(max(0, free_of(info, dominant)) for info in fit.nodes)
    fitted = decision.outcome is not Outcome.REJECT
    placed = sum(1 for r in decision.results.values() if r.placed)
    tried = _Tried(fit, order, fitted, placed, leftover, mark, dict(decision.results))
    if fitted and placed == len(workload.pods):
        return dataclasses.replace(tried, kept=Kept(trial, decision))
    trial.discard()
    return tried


def _outside(fit: DomainFit) -> str:
    return f"node(s) outside the gang's {fit.level} domain {fit.value}"


def _refusal(
    group: PodGroupView,
    level: str,
    ranked: list[DomainFit],
    attempts: list[_Tried],
    gang: _Gang,
) -> str:
    """E.g. "gang ml/train requires one topology.batchsched.io/rack domain: 0 of 64 racks fit
    its 8 pods (best: rack-3, 5 of 8)"."""
    head = f"gang {group.key} requires one {level} domain"
    need = group.min_member
    if gang.held:
        if not ranked:
            return f"{head}: its members already placed are not all in one {level} domain"
        value, count = _closest(ranked, attempts, gang)
        return f"{head}: its members already placed are in {value}, which holds {count} of {need}"
    if not ranked:
        return f"{head}: no node has the label {level}"
    noun = level.rsplit("/", 1)[-1]
    value, count = _closest(ranked, attempts, gang)
    return (
        f"{head}: 0 of {len(ranked)} {noun}s fit its {need} pods (best: {value}, {count} of {need})"
    )


def _closest(ranked: list[DomainFit], attempts: list[_Tried], gang: _Gang) -> tuple[str, int]:
    """The domain that came closest, with how many members it would hold: by the trials
    where there were any, else by free capacity."""
    if attempts:
        best = max(attempts, key=_closeness)
        return best.fit.value, gang.holding + best.placed
    top = ranked[0]
    return top.value, gang.holding + top.holds


def _closeness(tried: _Tried) -> tuple[int, int]:
    return tried.closeness


def _results(attempts: list[_Tried]) -> dict[str, ScheduleResult]:
    """The per-member results of the closest trial (each member's reason), or none."""
    if not attempts:
        return {}
    return max(attempts, key=_closeness).results
