"""One workload cycle: snapshot + workload -> Bind, Wait or Reject. Pure and synchronous.

Steps:
  1. a gang whose PodGroup is missing waits (Reject NO_GROUP);
  2. quota admission before placement (Reject QUOTA);
  3. placement: a lone pod through its profile (PreFilter .. Permit), a gang through the gang
     core on a trial, with other gangs' reservations offered up (the no-deadlock rule); a gang
     asking for a topology domain is tried on candidate domains first and placed in the best
     (cycle/domains.py), or rejected UNSCHEDULABLE when its required level has none (the
     preemption planner then looks for victims inside one domain of it);
  4. what was placed is asked again: quota once the nodes are known, then the backfill
     reservations it might delay; a "no" undoes the placement (Reject QUOTA_PLACED/BACKFILL);
  5. Bind, Wait (a gang short of its members) or Reject UNSCHEDULABLE (preemption may help),
     UNRESOLVABLE (no eviction can), INCOMPLETE (a gang short of members: not yet) or ERROR.

The snapshot keeps what a Bind or Wait placed (reserved, as kube-scheduler's Reserve does);
a Reject leaves it as it was.
"""

from __future__ import annotations

from collections.abc import Sequence

from batchsched.backfill import Running
from batchsched.cycle.decision import Bind, Decision, Reject, Wait, Why
from batchsched.cycle.domains import DomainRefusal, choose_domain
from batchsched.cycle.policies import Handle, Placed
from batchsched.cycle.workload import Workload
from batchsched.framework.lone_batches import LoneBatches
from batchsched.framework.runner import ProfileRunner, ScheduleResult, Within
from batchsched.framework.status import Code
from batchsched.gang.core import GangDecision, Outcome, Reservation, schedule_gang
from batchsched.model.pod import PodView
from batchsched.snapshot import Trial


def schedule_workload(handle: Handle, workload: Workload) -> Decision:
    if workload.gang and workload.group is None:
        return Reject(Why.NO_GROUP, workload.missing)
    admission = handle.admission
    if admission is not None:
        refused = admission.refuses(workload.pods)
        if refused:
            return Reject(Why.QUOTA, f"quota: {refused}")
    if workload.gang:
        return _schedule_gang(handle, workload)
    return _schedule_pod(handle, workload)


def _schedule_pod(handle: Handle, workload: Workload) -> Decision:
    pod = workload.pods[0]
    runner = handle.runner_for(pod)
    snapshot = handle.snapshot
    # A handle may keep filter and score results for lone pods of one signature from cycle
    # to cycle (framework/lone_batches.py): the same result as the runner's, for less work.
    lone = getattr(handle, "lone_batches", None)
    result = _on_nominated_node(handle, runner, pod)
    if result is None and isinstance(lone, LoneBatches):
        result = lone.schedule(runner, pod, snapshot)
    elif result is None:
        result = runner.schedule_one(pod, snapshot)
    results = {pod.uid: result}
    node = result.node_name
    if result.placed and node is not None:
        starting = _starting(handle, [(pod, node)])
        held = _held(handle, workload, [(pod, node)], starting)
        if held is not None:
            runner.unreserve(result.state, pod, node, snapshot)
            if snapshot.node_of(pod.uid) is not None:
                snapshot.forget(pod)
            return Reject(held[0], held[1], results)
        return Bind((Reservation(pod, node),), results, starts=tuple(starting))
    return Reject(_why_not(result.status.code), result.message(), results)


def _on_nominated_node(
    handle: Handle, runner: ProfileRunner, pod: PodView
) -> ScheduleResult | None:
    """A preemptor whose victims went is tried on its nominated node first, alone (as
    kube-scheduler's PreferNominatedNode): the room was made there for it, and a pass over
    every node would only find that one. None when it has none, or does not fit there (the
    usual pass then decides). A handle without `nominated_node` (the simulators) has none."""
    nominated = getattr(handle, "nominated_node", None)
    node = nominated(pod) if callable(nominated) else None
    if not isinstance(node, str):
        return None
    result = runner.schedule_one(pod, handle.snapshot, Within(frozenset((node,))))
    return result if result.placed else None


def _schedule_gang(handle: Handle, workload: Workload) -> Decision:
    runner = handle.runner_for(workload.pods[0])
    domain = choose_domain(handle, workload, runner)
    if isinstance(domain, DomainRefusal):
        # UNSCHEDULABLE: preemption may help, planning victims inside one domain of the
        # level only (preemption/domains.py).
        why = Why.INCOMPLETE if _short_of_members(workload) else Why.UNSCHEDULABLE
        return Reject(why, domain.message, domain.results)
    if domain is None:
        return _place_gang(handle, workload, runner, None)
    if domain.kept is not None:  # the chosen domain's trial is the placement
        return _settle(handle, workload, domain.kept.trial, domain.kept.decision)
    runner.rewind(domain.mark)  # the chosen domain's trial, repeated for real
    return _place_gang(handle, workload, runner, domain.within)


def _place_gang(
    handle: Handle, workload: Workload, runner: ProfileRunner, within: Within | None
) -> Decision:
    trial = handle.snapshot.begin_trial()
    decision = schedule_gang(
        workload.gang_request(),
        handle.snapshot,
        runner,
        waiting=handle.waiting(),
        hold_incomplete=workload.hold,
        within=within,
    )
    return _settle(handle, workload, trial, decision)


def _settle(handle: Handle, workload: Workload, trial: Trial, decision: GangDecision) -> Decision:
    """A gang placement on its open trial, asked again (quota, backfill) and kept or undone."""
    placed = [(r.pod, r.node) for r in decision.placed]
    starting = _starting(handle, placed)
    held = _held(handle, workload, placed, starting)
    if held is not None:  # it fits, but its quota or a reservation says no: nothing stays
        trial.discard()
        return Reject(held[0], held[1], decision.results)
    trial.commit()
    if decision.outcome is Outcome.BIND:
        return Bind(
            decision.placed,
            decision.results,
            decision.unplaced,
            decision.released,
            tuple(starting),
        )
    if decision.outcome is Outcome.WAIT:
        return Wait(decision.placed, decision.results, decision.message)
    # A member that no eviction could help (a PreFilter's UnschedulableAndUnresolvable, e.g.
    # DRA claims we do not allocate) makes the whole gang so.
    codes = {r.status.code for r in decision.results.values()}
    if Code.UNSCHEDULABLE_AND_UNRESOLVABLE in codes:
        why = Why.UNRESOLVABLE
    elif _short_of_members(workload):
        why = Why.INCOMPLETE
    else:
        why = Why.UNSCHEDULABLE
    return Reject(why, decision.message, decision.results)


def _short_of_members(workload: Workload) -> bool:
    known, group = workload.known_members, workload.group
    return known is not None and group is not None and known < group.min_member


def _why_not(code: Code) -> Why:
    if code is Code.ERROR:
        return Why.ERROR
    if code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
        return Why.UNRESOLVABLE
    return Why.UNSCHEDULABLE


def _starting(handle: Handle, placed: Placed) -> list[Running]:
    holds = handle.holds
    return holds.starting(placed) if holds is not None else []


def _held(
    handle: Handle, workload: Workload, placed: Placed, starting: Sequence[Running]
) -> tuple[Why, str] | None:
    """Why placements that fit may not stand now, or None."""
    admission = handle.admission
    if admission is not None and placed:
        refused = admission.refuses_placed(placed)
        if refused:
            return Why.QUOTA_PLACED, f"quota: {refused}"
    holds = handle.holds
    if holds is not None and starting:
        why = holds.held_back(workload.key, workload.priority, starting)
        if why:
            return Why.BACKFILL, why
    return None
