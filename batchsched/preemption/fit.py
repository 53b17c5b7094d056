"""Does the preemptor fit once these units are gone? Asked of the real framework, on a trial.

Every question opens a snapshot trial, forgets the victims' pods, asks the profile's plugins
(or the gang cycle) and discards the trial, so the snapshot ends exactly as it began. Each
question gets a fresh `ProfileRunner` (seed 0): answers do not depend on the caller's
rotating start index, and the caller's runner is left untouched.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Final

from batchsched.framework.cycle_state import CycleState
from batchsched.framework.interfaces import PreFilterResult
from batchsched.framework.profile import Profile
from batchsched.framework.runner import ProfileRunner, Within
from batchsched.framework.status import Code, Status, is_ok
from batchsched.gang.core import GangDecision, GangRequest, schedule_gang
from batchsched.gang.podgroup import PodGroupView
from batchsched.model.pod import PodView
from batchsched.preemption.units import Unit
from batchsched.snapshot import Snapshot


def dry_run_profile(profile: Profile) -> Profile:
    """The profile without PostFilter: a dry run must never start another preemption."""
    return dataclasses.replace(profile, post_filter=()) if profile.post_filter else profile


@contextmanager
def evicted_pods(snapshot: Snapshot, pods: Iterable[PodView]) -> Iterator[None]:
    """The snapshot without these pods, for the duration of the block; the devices of DRA
    claims that only they use are free again too."""
    trial = snapshot.begin_trial()
    try:
        for pod in pods:
            snapshot.forget(pod)
            snapshot.dra.release_consumer(pod.uid)
        yield
    finally:
        trial.discard()


def evicted(snapshot: Snapshot, units: Sequence[Unit]) -> AbstractContextManager[None]:
    """The snapshot without the units' pods, for the duration of the block."""
    return evicted_pods(snapshot, (pod for unit in units for pod in unit.pods))


# PreFilter plugins whose answer comes from the scheduler's own state, not from the pods in
# the snapshot: a preemptor's dry runs ask them once, before any trial. BackfillReservations
# answers from the backfill plan, which may be rebuilt when asked: rebuilt inside a trial, it
# would be built (and kept for its refresh interval) on a snapshot without the victims; and
# one plan's ~10 dry runs asked it ~10 times (PreemptionBasic profile, docs/benchmarks.md).
ASKED_ONCE: Final = frozenset({"BackfillReservations"})


@dataclass(frozen=True, slots=True)
class PodDryRun:
    """One preemptor pod's dry runs: the profile, and what the once-asked PreFilters said
    (their state is in `base`, which every dry run starts from)."""

    profile: Profile
    pod: PodView
    base: CycleState
    answers: Mapping[str, tuple[PreFilterResult | None, Status]]


def prepare_dry_run(profile: Profile, pod: PodView, snapshot: Snapshot) -> PodDryRun:
    """Ask the ASKED_ONCE PreFilters now, on the snapshot as it is (call outside a trial)."""
    base = CycleState()
    answers = {
        plugin.name: plugin.pre_filter(base, pod, snapshot)
        for plugin in profile.pre_filter
        if plugin.name in ASKED_ONCE
    }
    return PodDryRun(profile, pod, base, answers)


def fits_on_node(dry: PodDryRun, snapshot: Snapshot, node_name: str) -> bool:
    """PreFilter, then every Filter on one node: kube-scheduler's dry run for preemption."""
    info = snapshot.get(node_name)
    if info is None:
        return False
    pod = dry.pod
    state = dry.base.clone()
    for plugin in dry.profile.pre_filter:
        answer = dry.answers.get(plugin.name)
        result, status = answer if answer is not None else plugin.pre_filter(state, pod, snapshot)
        if status.code is Code.SKIP:
            state.skip_filter.add(plugin.name)
            continue
        if not is_ok(status):
            return False
        if result is not None and node_name not in result.node_names:
            return False
    for check in dry.profile.filter:
        if check.name not in state.skip_filter and not is_ok(check.filter(state, pod, info)):
            return False
    return True


def unit_fits_on_node(
    dry: PodDryRun, snapshot: Snapshot, node_name: str, units: Sequence[Unit]
) -> bool:
    with evicted(snapshot, units):
        return fits_on_node(dry, snapshot, node_name)


def place_gang(
    profile: Profile,
    group: PodGroupView,
    pending: tuple[PodView, ...],
    bound: int,
    snapshot: Snapshot,
    within: Within | None = None,
) -> GangDecision:
    """The gang cycle as the scheduler runs it, holding nothing for an incomplete gang;
    `within`: only on these nodes (the topology domain it must stay in).

    BIND (minMember reached) or WAIT (every member that exists fits) count as fitting.
    The caller's trial rolls back whatever it placed."""
    request = GangRequest(group, pending, bound=bound)
    runner = ProfileRunner(profile)
    return schedule_gang(request, snapshot, runner, hold_incomplete=False, within=within)


def why_not(profile: Profile, pod: PodView, snapshot: Snapshot) -> str:
    """kube-scheduler's "0/N nodes are available: ..." for the pod on this snapshot."""
    result = ProfileRunner(profile).find_node(pod, snapshot)
    return result.message() if result.node_name is None else f"it fits on {result.node_name}"
