"""`batchsched explain`: why a pod or gang waits, and what would have to change.

Purely computational, read-only: the configured profile's plugins run on a snapshot of the
listed objects (`ProfileRunner.schedule_one`: kube's "0/N nodes are available: ..." with the
per-node reasons counted), the cycle decides the workload as the scheduler would (without
quota, so the node verdict shows even when quota refuses), the tenant layer gives the quota
verdict, the backfill planner the estimated start, and the preemption planner
(`plan_preemption`, the decide half of the scheduler's PostFilter) the victims it would pick.
Every trial is discarded: nothing here changes the snapshot for the next question.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from batchsched.cycle.cycle import schedule_workload
from batchsched.cycle.decision import Bind, Reject, Wait
from batchsched.cycle.policies import SnapshotHandle
from batchsched.cycle.workload import Workload, pod_key
from batchsched.expected_runtime import human_duration
from batchsched.framework.profile import Profile
from batchsched.framework.runner import ProfileRunner
from batchsched.gang.core import eligible_nodes
from batchsched.gang.podgroup import PodGroupView, pod_group_of
from batchsched.model.gang_ref import split_gang_key
from batchsched.model.pod import PodView
from batchsched.preemption.model import NoPlan, PreemptionRequest
from batchsched.preemption.planner import plan_preemption
from batchsched.snapshot import Snapshot
from batchsched.views.queue import QueueRow, blocked, queue_view, short_reason, tenant_layer
from batchsched.views.state import LiveState, groups_by_key, snapshot_of
from gpu.requests import InvalidGpuRequest, gpu_request
from gpu.topology import MILLI_PER_GPU
from queues.model import QuotaPolicy


class NotFound(LookupError):
    pass


@dataclass(frozen=True, slots=True)
class GangFacts:
    key: str
    min_member: int
    pending: tuple[str, ...]
    bound: int
    domain: str  # the topology requirement in words, "" for none


@dataclass(frozen=True, slots=True)
class Explanation:
    workload: str
    tenant: str
    position: int | None  # in the whole queue
    gang: GangFacts | None
    nodes: str  # the per-node verdict of the first pending member
    cycle: str  # what the cycle would decide now (quota aside)
    quota: str  # "admitted" or why not
    start: str  # the estimated start, in words
    preemption: str  # the plan, or why preemption cannot help
    changes: tuple[str, ...]  # what would have to change


def find_workload(state: LiveState, name: str, namespace: str) -> list[PodView]:
    """The pending pods of the pod or gang `name` in `namespace`: "pod/NAME" (with its gang's
    other pending members), "podgroup/NAME" (a gang in any encoding), or NAME (a pod first)."""
    kind, _, bare = name.partition("/") if "/" in name else ("", "", name)
    pending = [p for p in state.pods if not p.node_name and not p.is_finished]
    if kind in ("", "pod", "pods", "po"):
        for pod in pending:
            if pod.namespace == namespace and pod.name == bare:
                key = pod_group_of(pod)
                gang = [p for p in pending if key is not None and pod_group_of(p) == key]
                return sorted(gang, key=lambda p: p.name) if gang else [pod]
    if kind in ("", "podgroup", "podgroups", "pg"):
        members = [p for p in pending if _gang_named(p, namespace, bare)]
        if members:
            return sorted(members, key=lambda p: p.name)
    raise NotFound(f"no pending pod or gang {name!r} in namespace {namespace!r}")


def _gang_named(pod: PodView, namespace: str, name: str) -> bool:
    key = pod_group_of(pod)
    if key is None:
        return False
    _, gang_namespace, gang_name = split_gang_key(key)
    return (gang_namespace, gang_name) == (namespace, name)


def explain(
    state: LiveState,
    profiles: Mapping[str, Profile],
    policy: QuotaPolicy,
    pods: Sequence[PodView],
    seed: int = 0,
) -> Explanation:
    """Everything the scheduler would say about these pending pods (one gang, or one pod)."""
    first = pods[0]
    profile = profiles.get(first.scheduler_name)
    if profile is None:
        names = ", ".join(sorted(profiles))
        raise NotFound(
            f"{first.key} names schedulerName {first.scheduler_name!r}, not ours ({names})"
        )
    groups = groups_by_key(state)
    key = pod_group_of(first)
    group = groups.get(key) if key is not None else None
    layer = tenant_layer(state, profiles, policy)
    view = queue_view(state, profiles, policy, seed)
    workload_name = key if key is not None else first.key
    row = next((r for r in view.rows if r.workload == workload_name), None)
    runner = ProfileRunner(profile, seed)
    snapshot = snapshot_of(state)
    bound = sum(1 for p in state.pods if p.node_name and key is not None and pod_group_of(p) == key)
    nodes = _node_verdict(snapshot, runner, first)
    cycle = _cycle_verdict(snapshot, runner, pods, key, group, bound)
    admission = layer.admit(pods)
    quota = "admitted" if admission.admitted else admission.reason
    reclaimable = layer.reclaimable(pods)
    preemption = _preemption(state, snapshot, runner, pods, (group, bound, reclaimable))
    changes = what_would_change(snapshot, runner, pods, (group, bound), (cycle, quota, preemption))
    start = _start_text(row)
    gang = None
    if key is not None:
        domain = ""
        if group is not None and group.topology is not None:
            need = "required" if group.topology.required else "preferred"
            domain = f"all members in one {group.topology.level or 'tier'} domain ({need})"
        gang = GangFacts(
            key,
            group.min_member if group is not None else 0,
            tuple(p.name for p in pods),
            bound,
            domain,
        )
    return Explanation(
        workload=workload_name,
        tenant=layer.tenant_of(first) or "<no tenant>",
        position=row.position if row is not None else None,
        gang=gang,
        nodes=nodes,
        cycle=cycle or short_reason(state, layer, groups, pods),
        quota=quota,
        start=start,
        preemption=preemption,
        changes=changes,
    )


def _start_text(row: QueueRow | None) -> str:
    if row is None:
        return "unknown: not in the queue"
    if row.start_in_s is not None:
        when = "now" if row.start_in_s < 1 else f"in {human_duration(row.start_in_s)}"
        source = "published by the leader" if row.start_source == "published" else "planned"
        return f"{when} ({source})"
    if blocked(row.reason):
        return "not planned: it waits for its quota or its members first"
    return "unknown: the pods it waits for (or those ahead of it) have no expected runtime"


def _node_verdict(snapshot: Snapshot, runner: ProfileRunner, pod: PodView) -> str:
    """kube's per-node verdict for one pod, its placement undone."""
    trial = snapshot.begin_trial()
    try:
        result = runner.schedule_one(pod, snapshot)
        if result.placed and result.node_name is not None:
            runner.unreserve(result.state, pod, result.node_name, snapshot)
            return f"fits on {result.node_name}"
        return result.message()
    finally:
        trial.discard()


def _cycle_verdict(
    snapshot: Snapshot,
    runner: ProfileRunner,
    pods: Sequence[PodView],
    key: str | None,
    group: PodGroupView | None,
    bound: int,
) -> str:
    """What the workload cycle decides now, quota aside; "" when it would bind."""
    if key is None:
        workload = Workload(pod_key(pods[0]), (pods[0],))
    else:
        missing = "" if group is not None else f"PodGroup {key} not found; the pods wait for it"
        workload = Workload(
            key, tuple(pods), gang=True, group=group, bound=bound, hold=False, missing=missing
        )
    trial = snapshot.begin_trial()
    try:
        decision = schedule_workload(SnapshotHandle(snapshot, runner), workload)
    finally:
        trial.discard()
    if isinstance(decision, Bind):
        where = sorted({r.node for r in decision.placed})
        return f"would bind now on {', '.join(where)}" if where else ""
    if isinstance(decision, Wait):
        return decision.message
    assert isinstance(decision, Reject)
    return decision.message


def _preemption(
    state: LiveState,
    snapshot: Snapshot,
    runner: ProfileRunner,
    pods: Sequence[PodView],
    gang: tuple[PodGroupView | None, int, frozenset[str]],
) -> str:
    """The scheduler's preemption planner, read-only: whom it would evict, or why none.
    `gang`: its PodGroup, bound members, and the pods its tenant may reclaim (below its
    guarantee, from tenants above theirs), as the tenant layer tells the scheduler."""
    group, bound, reclaimable = gang
    if any(p.preemption_policy == "Never" for p in pods):
        return "not attempted, preemptionPolicy is Never"
    gang_of = {p.uid: k for p in state.pods if p.node_name and (k := pod_group_of(p)) is not None}
    groups = groups_by_key(state)
    counted: dict[str, int] = {}
    for k in gang_of.values():
        counted[k] = counted.get(k, 0) + 1
    min_member = {k: (groups[k].min_member if k in groups else n) for k, n in counted.items()}
    started = {
        p.uid: p.start_time or p.creation_time
        for p in state.pods
        if p.node_name and not p.is_finished
    }
    request = PreemptionRequest(
        preemptor=tuple(pods),
        group=group,
        bound_members=bound,
        now=state.now,
        started=started,
        min_runtime_s=0.0,
        budgets=(),
        gang_of=gang_of,
        gang_min_member=min_member,
        reclaimable=reclaimable,
    )
    trial = snapshot.begin_trial()
    try:
        answer = plan_preemption(request, snapshot, runner)
    finally:
        trial.discard()
    if isinstance(answer, NoPlan):
        return answer.reason
    return answer.describe()


def what_would_change(
    snapshot: Snapshot,
    runner: ProfileRunner,
    pods: Sequence[PodView],
    gang: tuple[PodGroupView | None, int],
    verdicts: tuple[str, str, str],
) -> tuple[str, ...]:
    """The smallest changes that would let it start, in words. `gang`: its PodGroup and bound
    members; `verdicts`: the cycle's, the quota's and preemption's."""
    group, bound = gang
    cycle, quota, preemption = verdicts
    out = []
    if group is not None and bound + len(pods) < group.min_member:
        short = group.min_member - bound - len(pods)
        out.append(f"{short} more member pod(s) must be created (minMember {group.min_member})")
    if quota != "admitted":
        out.append(f"tenant quota: {quota}")
    if cycle.startswith("would bind") or not cycle:
        return tuple(out)
    out.extend(_gpu_shortfall(snapshot, runner, pods))
    if preemption.startswith("preempting"):
        out.append(f"or preemption: {preemption}")
    return tuple(out)


def _gpu_shortfall(snapshot: Snapshot, runner: ProfileRunner, pods: Sequence[PodView]) -> list[str]:
    """GPUs missing on one node for the largest member, and on all the nodes it may use (those
    passing every filter but the capacity ones) for all of them."""
    try:
        needs = [gpu_request(p).count for p in pods]
    except InvalidGpuRequest:
        return []
    if not any(needs):
        return []
    usable = eligible_nodes(runner, pods[0], snapshot)
    ledgers = [(i.name, i.gpu) for i in usable if i.gpu is not None]
    free = {name: sum(1 for f in g.free if f >= MILLI_PER_GPU) for name, g in ledgers}
    most = max(free.values(), default=0)
    out = []
    if max(needs) > most:
        best = max(free, key=lambda n: free[n]) if free else "no GPU node"
        out.append(
            f"needs {max(needs) - most} more GPU(s) free on one node "
            f"({max(needs)} per pod; most free on one node: {most} on {best})"
        )
    total, idle = sum(needs), sum(free.values())
    if total > idle:
        out.append(
            f"needs {total - idle} more GPU(s) free on the nodes it may use "
            f"({total} asked, {idle} free)"
        )
    return out
