"""The gang cycle: place a PodGroup's members together on a trial, then keep all or nothing.

Pure and synchronous, like the rest of the core: given the snapshot, the gang's pending
members, the members it already holds (reserved, waiting at Permit) and how many are bound,
decide one of three outcomes:

- BIND: at least minMember members are placed (counting bound and reserved ones); the trial
  is committed and every reserved or newly placed member should be bound now. Members beyond
  minMember (elastic surplus) are placed when there is room, after the core.
- WAIT: fewer than minMember members exist yet, and every existing one fits; the trial is
  committed (when the caller holds reservations) and the members wait at Permit for the rest.
- REJECT: the gang does not fit; the trial is discarded, nothing is held, and the reason says
  why in plain words.

The no-deadlock rule: reservations of incomplete gangs never block a complete gang. When a
gang whose quorum exists fits only without other gangs' waiting reservations, those are
released (their gangs go back to the queue) and the complete gang is placed. Two incomplete
gangs can therefore never hold each other's capacity while a complete one waits.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum

from batchsched.framework.cycle_state import CycleState
from batchsched.framework.members import Batching, GangMembers
from batchsched.framework.runner import ProfileRunner, ScheduleResult, Within
from batchsched.framework.status import Code, is_ok
from batchsched.gang.podgroup import PodGroupView
from batchsched.model.pod import PodView
from batchsched.model.resources import CPU, MEMORY, NVIDIA_GPU, Resources
from batchsched.snapshot import NodeInfo, Snapshot


class Outcome(Enum):
    BIND = "bind"
    WAIT = "wait"
    REJECT = "reject"


@dataclass(frozen=True, slots=True)
class Reservation:
    pod: PodView  # as counted in the snapshot (node_name set)
    node: str


@dataclass(frozen=True, slots=True)
class GangRequest:
    group: PodGroupView
    pending: tuple[PodView, ...]  # members to place now
    reserved: tuple[Reservation, ...] = ()  # members placed earlier, waiting at Permit
    bound: int = 0  # members already bound (or binding)

    @property
    def key(self) -> str:
        return self.group.key

    @property
    def existing(self) -> int:
        return self.bound + len(self.reserved) + len(self.pending)


@dataclass(frozen=True)
class GangDecision:
    key: str
    outcome: Outcome
    placed: tuple[Reservation, ...] = ()  # new this cycle; BIND also binds request.reserved
    unplaced: tuple[PodView, ...] = ()  # stay pending (everything on REJECT, surplus on BIND)
    released: tuple[str, ...] = ()  # other gangs whose waiting reservations were released
    message: str = ""
    results: Mapping[str, ScheduleResult] = field(default_factory=dict)  # by pod uid


def schedule_gang(
    request: GangRequest,
    snapshot: Snapshot,
    runner: ProfileRunner,
    waiting: Mapping[str, Sequence[Reservation]] | None = None,
    hold_incomplete: bool = True,
    within: Within | None = None,
    batching: Batching = "auto",
) -> GangDecision:
    """One gang cycle. `waiting` holds other gangs' reservations that may be released;
    `within`, where given, is the only nodes the members may go to (a topology domain);
    `batching` is GangMembers' (identical members reuse filter and score results)."""
    too_big = _exceeds_cluster(request, snapshot)
    if too_big:
        return GangDecision(request.key, Outcome.REJECT, unplaced=request.pending, message=too_big)
    decision = _attempt(request, snapshot, runner, hold_incomplete, within, batching)
    others = {k: v for k, v in (waiting or {}).items() if k != request.key and v}
    if decision.outcome is not Outcome.REJECT or request.existing < request.group.min_member:
        return decision
    if not others:
        return decision
    # A complete gang that does not fit: try again without incomplete gangs' reservations.
    trial = snapshot.begin_trial()
    for reservations in others.values():
        for reservation in reservations:
            snapshot.forget(reservation.pod)
    retry = _attempt(request, snapshot, runner, hold_incomplete, within, batching)
    if retry.outcome is Outcome.BIND:
        trial.commit()
        return GangDecision(
            retry.key,
            retry.outcome,
            retry.placed,
            retry.unplaced,
            tuple(sorted(others)),
            retry.message,
            retry.results,
        )
    trial.discard()
    return decision


def _attempt(
    request: GangRequest,
    snapshot: Snapshot,
    runner: ProfileRunner,
    hold_incomplete: bool,
    within: Within | None = None,
    batching: Batching = "auto",
) -> GangDecision:
    group = request.group
    need = group.min_member
    held = request.bound + len(request.reserved)
    trial = snapshot.begin_trial()
    placed: list[Reservation] = []
    results: dict[str, ScheduleResult] = {}
    left = len(request.pending)
    # Members sharing a scheduling signature reuse one another's filter and score results.
    members = GangMembers(runner, snapshot, request.pending, within, batching)
    for pod in request.pending:
        left -= 1
        result = members.schedule(pod)
        results[pod.uid] = result
        if result.placed and result.node_name is not None:
            placed.append(Reservation(_counted(snapshot, pod), result.node_name))
        elif held + len(placed) + left < need:
            break  # the rest cannot make up minMember any more
    chosen = {r.pod.uid for r in placed}
    unplaced = tuple(p for p in request.pending if p.uid not in chosen)
    if held + len(placed) >= need:
        trial.commit()
        return GangDecision(request.key, Outcome.BIND, tuple(placed), unplaced, results=results)
    if request.existing < need and not unplaced:
        message = (
            f"gang {request.key} waits for members: {request.existing} of minMember {need} "
            "exist; those that exist fit and are reserved"
        )
        if hold_incomplete:
            trial.commit()
        else:
            trial.discard()
        return GangDecision(
            request.key, Outcome.WAIT, tuple(placed), message=message, results=results
        )
    trial.discard()
    message = _explain_without_own_reservations(
        request, snapshot, runner, len(placed), results, within
    )
    return GangDecision(
        request.key, Outcome.REJECT, unplaced=request.pending, message=message, results=results
    )


def _explain_without_own_reservations(
    request: GangRequest,
    snapshot: Snapshot,
    runner: ProfileRunner,
    placed: int,
    results: Mapping[str, ScheduleResult],
    within: Within | None = None,
) -> str:
    """A rejected gang gives up its own reservations too, so explain it as if they were free:
    the whole gang against the capacity it could use."""
    with snapshot.begin_trial():
        for reservation in request.reserved:
            if snapshot.node_of(reservation.pod.uid) is not None:  # not deleted meanwhile
                snapshot.forget(reservation.pod)
        whole = GangRequest(
            request.group,
            tuple(r.pod for r in request.reserved) + request.pending,
            bound=request.bound,
        )
        return explain_rejection(
            whole, snapshot, runner, request.bound + len(request.reserved) + placed, results, within
        )


def _counted(snapshot: Snapshot, pod: PodView) -> PodView:
    info = snapshot.node_of(pod.uid)
    assert info is not None
    return info.pods[pod.uid]


def _exceeds_cluster(request: GangRequest, snapshot: Snapshot) -> str:
    """minResources against everything the cluster could ever free: all allocatable."""
    wanted = request.group.min_resources
    if wanted.is_zero():
        return ""
    # Summed per wanted resource, not as whole vectors: 5000 nodes cost a few milliseconds
    # instead of 40, and a topology domain's trials ask once per candidate.
    nodes = snapshot.nodes
    for name in wanted.names():
        capacity = sum(info.node.allocatable.get(name) for info in nodes)
        if wanted.get(name) > capacity:
            return (
                f"gang {request.key} needs minResources {wanted.get(name)} {name}, more than "
                f"the whole cluster has ({capacity})"
            )
    return ""


def explain_rejection(
    request: GangRequest,
    snapshot: Snapshot,
    runner: ProfileRunner,
    placeable: int,
    results: Mapping[str, ScheduleResult],
    within: Within | None = None,
) -> str:
    """In plain words: what the gang needs, what is free where it may run, and one member's
    kube-scheduler style reason, e.g. "gang ml/train needs 8 more pod(s) placed together
    (minMember 8, 64 nvidia.com/gpu); 40 nvidia.com/gpu free on 5 node(s) that pass its
    filters; 5 of 8 fit. 0/9 nodes are available: ..."."""
    need = request.group.min_member
    if not request.pending:
        return f"gang {request.key} has no pending members to place"
    sample = request.pending[0]
    resource = _dominant(sample.requests)
    missing = need - request.bound - len(request.reserved)
    eligible = eligible_nodes(runner, sample, snapshot, within)
    free = sum(max(0, info.free.get(resource)) for info in eligible)
    first_failure = next((r.message() for r in results.values() if not r.placed), "")
    return (
        f"gang {request.key} needs {missing} more pod(s) placed together (minMember {need}, "
        f"{_amount(resource, missing * sample.requests.get(resource))}); "
        f"{_amount(resource, free)} free on {len(eligible)} node(s) that pass its filters; "
        f"{placeable} of {need} fit. {first_failure}"
    ).strip()


# Filters about free capacity (now or reserved for later): left out when asking which nodes a
# gang may use at all.
CAPACITY_PLUGINS = frozenset(
    {"NodeResourcesFit", "GpuTopology", "NodePorts", "BackfillReservations"}
)


def eligible_nodes(
    runner: ProfileRunner, pod: PodView, snapshot: Snapshot, within: Within | None = None
) -> list[NodeInfo]:
    """Nodes (of `within`, where given) that pass every filter except the ones about free
    capacity."""
    state = CycleState()
    for plugin in runner.profile.pre_filter:
        if plugin.name in CAPACITY_PLUGINS:
            continue
        _, status = plugin.pre_filter(state, pod, snapshot)
        if status.code is Code.SKIP:
            state.skip_filter.add(plugin.name)
        elif not is_ok(status):
            return []
    checks = [
        p.filter
        for p in runner.profile.filter
        if p.name not in CAPACITY_PLUGINS and p.name not in state.skip_filter
    ]
    nodes = (
        snapshot.nodes if within is None else [i for i in snapshot.nodes if i.name in within.nodes]
    )
    return [info for info in nodes if all(is_ok(c(state, pod, info)) for c in checks)]


def _dominant(requests: Resources) -> str:
    """The resource a gang is usually short of: GPUs when it asks for any, else cpu."""
    if requests.get(NVIDIA_GPU):
        return NVIDIA_GPU
    return CPU if requests.milli_cpu else MEMORY


def _amount(resource: str, amount: int) -> str:
    if resource == CPU:
        return f"{amount / 1000:g} cpu"
    if resource == MEMORY:
        return f"{amount / 2**30:.1f}Gi memory"
    return f"{amount} {resource}"
