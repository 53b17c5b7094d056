"""Where would these pending pods go on this cluster? Pure: views in, placements out."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Final, Protocol

from batchsched.cycle.cycle import schedule_workload
from batchsched.cycle.decision import Bind
from batchsched.cycle.policies import Admission, SnapshotHandle
from batchsched.cycle.workload import Workload, pod_key
from batchsched.dra.objects import DeviceClass, ResourceClaim, ResourceSlice
from batchsched.dra.state import DraState
from batchsched.framework.interfaces import QueuedPod
from batchsched.framework.profile import Profile
from batchsched.framework.runner import ProfileRunner
from batchsched.framework.status import is_ok
from batchsched.gang.podgroup import PodGroupView, pod_group_of
from batchsched.model.node import NodeView
from batchsched.model.pod import PodView
from batchsched.plugins.gang_sort import attach_group_ages
from batchsched.snapshot import Snapshot
from batchsched.whatif_estimates import estimate_starts, runtime_of
from gpu.topology import NodeTopology
from queues.fairshare import RankKey


@dataclass
class WhatIfResult:
    placements: dict[str, str | None] = field(default_factory=dict)
    reasons: dict[str, str] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)  # pod keys in the order they were tried
    # Unplaced pods: seconds until they could start (None: never), when any running pod's
    # expected runtime is known (whatif_estimates.py).
    estimates: dict[str, float | None] = field(default_factory=dict)
    # Placed pods with ResourceClaims: claim key -> the devices it holds ("driver/pool/device").
    claims: dict[str, dict[str, list[str]]] = field(default_factory=dict)

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"placements": self.placements, "reasons": self.reasons}
        if self.estimates:
            out["estimatedStartSeconds"] = self.estimates
        if self.claims:
            out["claims"] = self.claims
        return out


@dataclass(frozen=True)
class DeviceObjects:
    """The cluster's Dynamic Resource Allocation objects (resource.k8s.io/v1)."""

    classes: Sequence[DeviceClass] = ()
    slices: Sequence[ResourceSlice] = ()
    claims: Sequence[ResourceClaim] = ()


class Tenants(Admission, Protocol):
    """Tenant queues over a quota file (the live scheduler's TenantLayer): quota admission,
    usage counted from the pods bound (and placed here), and fair share between tenants."""

    def attach(self, snapshot: Snapshot) -> None: ...

    def counted(self, pod: PodView) -> None: ...

    def tenant_of(self, pod: PodView) -> str: ...

    def rank(self, queued: QueuedPod) -> RankKey: ...


def queue_order(pods: Sequence[PodView], profile: Profile) -> list[PodView]:
    """Pending pods in the order the queue would pop them (stable for equal keys)."""
    queued = [QueuedPod(pod, pod.creation_time) for pod in pods]

    def compare(a: QueuedPod, b: QueuedPod) -> int:
        if profile.queue_sort.less(a, b):
            return -1
        return 1 if profile.queue_sort.less(b, a) else 0

    return [q.pod for q in sorted(queued, key=functools.cmp_to_key(compare))]


def place_pending(
    nodes: Sequence[NodeView],
    pods: Sequence[PodView],
    profiles: Mapping[str, Profile],
    namespace_labels: Mapping[str, Mapping[str, str]] | None = None,
    seed: int = 0,
    pod_groups: Sequence[PodGroupView] = (),
    now: float | None = None,
    devices: DeviceObjects = DeviceObjects(),
    topologies: Mapping[str, NodeTopology] | None = None,
    tenants: Tenants | None = None,
    progress: Callable[[int], None] | None = None,
) -> WhatIfResult:
    """Schedule pending pods in queue order; each placement is visible to the next. A gang is
    placed whole when its first member comes up; one that would wait at Permit for members
    that do not exist yet is reported unplaced, as is one that does not fit. A placed pod's
    claims show the devices they were allocated (or held already). `topologies`: the GPU
    topology each node's agent measured (NodeResourceTopology), as the live cache holds it.
    `tenants`: quota admission and fair share, as the live queue applies them (the bound pods
    are counted first, and each placement as it is made). `progress`: pods tried so far."""
    snapshot = Snapshot(nodes, [p for p in pods if p.node_name], namespace_labels)
    for node_name, topology in (topologies or {}).items():
        snapshot.set_measured_topology(node_name, topology)
    snapshot.dra.load(devices.classes, devices.slices, devices.claims)
    pending = [p for p in pods if not p.node_name and not p.is_finished]
    runners = {name: ProfileRunner(profile, seed) for name, profile in profiles.items()}
    groups = {g.key: g for g in pod_groups}
    result = WhatIfResult()
    if not profiles:
        return result
    if tenants is not None:
        _count_bound(tenants, snapshot, pods)
    attach_group_ages(profiles, _GroupAges(groups))
    done: set[str] = set()
    unplaced: list[list[PodView]] = []
    unfit: dict[Hashable, str] = {}
    for pod in _queue(pending, next(iter(profiles.values())), tenants, done):
        gang = pod_group_of(pod)
        if gang is None:
            outcomes = [_place_lone(pod, profiles, runners, snapshot, tenants, unfit)]
        else:
            members = [p for p in pending if pod_group_of(p) == gang and p.uid not in done]
            bound_count = sum(1 for p in pods if p.node_name and pod_group_of(p) == gang)
            outcomes = _place_gang(
                gang, members, bound_count, groups, profiles, runners, (snapshot, tenants)
            )
        _record(result, outcomes, snapshot, tenants)
        done.update(member.uid for member, _, _ in outcomes)
        missing = [m for m, node, _ in outcomes if node is None]
        if missing:
            unplaced.append(missing)
        if len(missing) < len(outcomes):
            unfit.clear()  # the snapshot changed
        if progress is not None:
            progress(len(done))
    if now is not None and unplaced and any(runtime_of(p, groups) for p in pods if p.node_name):
        placed_now = frozenset(p.uid for p in pending if result.placements.get(p.key))
        result.estimates = estimate_starts(snapshot, unplaced, placed_now, runners, groups, now)
    return result


Outcome = tuple[PodView, str | None, str]  # pod, its node (None: unplaced), why not


def _count_bound(tenants: Tenants, snapshot: Snapshot, pods: Sequence[PodView]) -> None:
    tenants.attach(snapshot)
    for pod in pods:
        if pod.node_name and not pod.is_finished:
            tenants.counted(pod)


def _record(
    result: WhatIfResult, outcomes: Sequence[Outcome], snapshot: Snapshot, tenants: Tenants | None
) -> None:
    for member, node, reason in outcomes:
        result.order.append(member.key)
        result.placements[member.key] = node
        if reason:
            result.reasons[member.key] = reason
        held = claim_devices(member, snapshot.dra) if node else {}
        if held:
            result.claims[member.key] = held
        if node and tenants is not None:
            tenants.counted(replace(member, node_name=node))


def _queue(
    pending: Sequence[PodView], profile: Profile, tenants: Tenants | None, done: set[str]
) -> Iterator[PodView]:
    """The pending pods as the live queue pops them: QueueSort order, and with tenants the
    head of each tenant's queue whose fair-share rank is best (asked again after each pod,
    as placements change it). Pods in `done` (a gang's other members) are passed over."""
    ordered = queue_order(pending, profile)
    if tenants is None:
        yield from (pod for pod in ordered if pod.uid not in done)
        return
    queues: dict[str, list[PodView]] = {}
    for pod in ordered:
        queues.setdefault(tenants.tenant_of(pod), []).append(pod)
    position = {pod.uid: i for i, pod in enumerate(ordered)}
    while True:
        best: tuple[tuple[RankKey, int], PodView] | None = None
        for queue in queues.values():
            while queue and queue[0].uid in done:
                queue.pop(0)
            if queue:
                head = queue[0]
                key = (tenants.rank(QueuedPod(head, head.creation_time)), position[head.uid])
                best = (key, head) if best is None or key < best[0] else best
        if best is None:
            return
        yield best[1]


def claim_devices(pod: PodView, dra: DraState) -> dict[str, list[str]]:
    """Each allocated claim of the pod (by key, in the pod's order) -> its device ids, sorted
    so that gpu-10 comes after gpu-9."""
    found: dict[str, list[str]] = {}
    for entry in pod.resource_claims:
        name = pod.claim_statuses.get(entry.name, "") if entry.from_template else entry.claim_name
        claim = dra.claim(f"{pod.namespace}/{name}") if name else None
        if claim is not None and claim.allocation is not None:
            ids = {str(d.id) for d in claim.allocation.devices}
            found[claim.key] = sorted(ids, key=_natural)
    return found


def _natural(text: str) -> list[tuple[int, str]]:
    return [(int(part), "") if part.isdigit() else (-1, part) for part in re.split(r"(\d+)", text)]


def devices_text(ids: Sequence[str]) -> str:
    """Device ids grouped by driver and pool: "gpu.nvidia.com/dgx-0/gpu-0,gpu-1"."""
    pools: dict[str, list[str]] = {}
    for device_id in ids:
        pool, _, device = device_id.rpartition("/")
        pools.setdefault(pool, []).append(device)
    return " ".join(f"{pool}/{','.join(names)}" for pool, names in pools.items())


class _GroupAges:
    def __init__(self, groups: Mapping[str, PodGroupView]) -> None:
        self._groups = groups

    def created(self, key: str) -> float | None:
        group = self._groups.get(key)
        return group.creation_time if group is not None else None


def _place_gang(
    gang: str,
    members: list[PodView],
    bound: int,
    groups: Mapping[str, PodGroupView],
    profiles: Mapping[str, Profile],
    runners: Mapping[str, ProfileRunner],
    where: tuple[Snapshot, Admission | None],
) -> list[Outcome]:
    snapshot, admission = where
    group = groups.get(gang)
    if group is None:
        reason = f"PodGroup {gang} not found; the pod waits for it"
        return [(m, None, reason) for m in members]
    runner = runners.get(members[0].scheduler_name)
    if runner is None:
        return [(m, *_place_one(m, profiles, runners, snapshot, admission)) for m in members]
    pods = tuple(sorted(members, key=lambda p: p.name))
    workload = Workload(gang, pods, gang=True, group=group, bound=bound, hold=False)
    decision = schedule_workload(_handle(snapshot, runner, admission), workload)
    if not isinstance(decision, Bind):
        return [(m, None, decision.message) for m in pods]
    nodes = {r.pod.uid: r.node for r in decision.placed}
    surplus = "elastic member beyond minMember: no room left after the gang's core"
    return [(m, nodes.get(m.uid), "" if m.uid in nodes else surplus) for m in pods]


def _place_lone(
    pod: PodView,
    profiles: Mapping[str, Profile],
    runners: Mapping[str, ProfileRunner],
    snapshot: Snapshot,
    admission: Admission | None,
    unfit: dict[Hashable, str],
) -> Outcome:
    """`_place_one`, or the answer an equal pod got: `unfit` holds the shapes that found no
    node since the snapshot last changed, each with its reason. On the same snapshot an equal
    pod's cycle gives the same answer, and one that left the runner as it was (no node passed
    the filters: start index and tie-break generator unmoved) changes nothing to skip."""
    shape = _shape(pod)
    if shape is not None and shape in unfit:
        return pod, None, unfit[shape]
    runner = runners.get(pod.scheduler_name)
    before = runner.mark() if runner is not None else None
    node, reason = _place_one(pod, profiles, runners, snapshot, admission)
    if node is None and shape is not None and runner is not None and runner.mark() == before:
        unfit[shape] = reason
    return pod, node, reason


# What a cycle reads of a pod: all of it but its name, uid and creation time.
_SHAPE_FIELDS: Final = tuple(
    f.name for f in fields(PodView) if f.name not in ("name", "uid", "creation_time")
)


def _shape(pod: PodView) -> Hashable | None:
    """The pod's shape for `_place_lone`; None for one with claims (named per pod) or a
    field that does not hash."""
    if pod.resource_claims:
        return None
    values = [getattr(pod, name) for name in _SHAPE_FIELDS]
    shape = tuple(tuple(sorted(v.items())) if isinstance(v, Mapping) else v for v in values)
    try:
        hash(shape)
    except TypeError:
        return None
    return shape


def _place_one(
    pod: PodView,
    profiles: Mapping[str, Profile],
    runners: Mapping[str, ProfileRunner],
    snapshot: Snapshot,
    admission: Admission | None,
) -> tuple[str | None, str]:
    profile = profiles.get(pod.scheduler_name)
    if profile is None:
        names = ", ".join(sorted(profiles))
        return (
            None,
            f"schedulerName {pod.scheduler_name!r} is not a profile of this scheduler ({names})",
        )
    for gate in profile.pre_enqueue:
        status = gate.pre_enqueue(pod)
        if not is_ok(status):
            return None, status.message()
    handle = _handle(snapshot, runners[pod.scheduler_name], admission)
    decision = schedule_workload(handle, Workload(pod_key(pod), (pod,)))
    if isinstance(decision, Bind):
        return decision.placed[0].node, ""
    return None, decision.message


def _handle(
    snapshot: Snapshot, runner: ProfileRunner, admission: Admission | None
) -> SnapshotHandle:
    handle = SnapshotHandle(snapshot, runner)
    handle.admission = admission
    return handle
