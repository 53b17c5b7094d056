"""`batchsched queue`: pending workloads in the order the scheduler would try them now.

Purely computational. The order is the live scheduler's own, as its leader writes it on
each PodGroup (`runtime/queue_status.queue_order`: one line per tenant in the profile's
QueueSort order, the tenant whose head ranks best going next), with its `TenantLayer` (fair
share and quota) fed the bound pods, as the cache feeds it. Pods
enter the queue at their creation time. A gang's place is where its first member comes up:
the scheduler then takes the whole gang. Estimated starts are the ones the leader published
on the workload (`batchsched.io/estimated-start-time`), else planned here on the backfill
timeline from the running pods' expected runtimes (`whatif_estimates.estimate_starts`).

The order assumes nothing binds meanwhile: each placement moves its tenant's fair share.
Decayed usage history (`halfLife`) starts from now, so a tenant that ran a lot yesterday
ranks as the live leader would rank it only when history has worn off.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from batchsched.clock import FakeClock
from batchsched.expected_runtime import ESTIMATED_START_ANNOTATION
from batchsched.framework.interfaces import QueuedPod
from batchsched.framework.profile import Profile
from batchsched.framework.runner import ProfileRunner
from batchsched.gang.podgroup import PodGroupView, pod_group_of
from batchsched.model.pod import PodView
from batchsched.plugins.gang_sort import attach_group_ages
from batchsched.runtime.queue_status import queue_order
from batchsched.tenants import UNMATCHED, TenantLayer
from batchsched.views.state import LiveState, groups_by_key, pending_pods, snapshot_of
from batchsched.whatif_estimates import estimate_starts
from queues.demand import gang_demand, gpus
from queues.fairshare import dominant_share
from queues.model import GPU, MILLI_PER_GPU, QuotaPolicy

# How many workloads, from the head of the queue, get a start planned here.
PLANNED: Final = 32


@dataclass(frozen=True, slots=True)
class QueueRow:
    position: int  # 1 = tried next
    tenant_position: int
    tenant: str  # "" when the pod maps to no tenant
    workload: str  # a gang's key, or "namespace/name" of a lone pod
    gang: bool
    pending: int  # members waiting for a node
    min_member: int  # 1 for a lone pod
    priority: int
    gpus: float  # what the pending members ask for
    age_s: float
    start_in_s: float | None  # None: unknown (no expected runtimes), or never
    start_source: str  # "published" (by the leader), "planned" (here), ""
    reason: str


@dataclass(frozen=True, slots=True)
class TenantRow:
    tenant: str
    used_gpus: float
    guaranteed_gpus: float | None  # None: the quota names none
    max_gpus: float | None  # None: no limit
    fair_share: float  # weighted dominant share, what fair-share ordering compares
    pending: int  # workloads waiting


@dataclass(frozen=True, slots=True)
class QueueView:
    rows: tuple[QueueRow, ...]
    tenants: tuple[TenantRow, ...]


class _Groups:
    def __init__(self, groups: Mapping[str, PodGroupView]) -> None:
        self._groups = groups

    def created(self, key: str) -> float | None:
        group = self._groups.get(key)
        return group.creation_time if group is not None else None


def tenant_layer(
    state: LiveState, profiles: Mapping[str, Profile], policy: QuotaPolicy
) -> TenantLayer:
    """The scheduler's tenant layer, fed every bound pod of ours as its cache would."""
    layer = TenantLayer(policy, FakeClock(state.now, 0.0), lambda p: p.scheduler_name in profiles)
    groups = groups_by_key(state)

    def producer_queue(pod: PodView) -> str:
        key = pod_group_of(pod)
        group = groups.get(key) if key is not None else None
        return group.queue if group is not None else ""

    layer.producer_queue = producer_queue
    layer.attach(snapshot_of(state))
    for pod in state.pods:
        if pod.node_name and not pod.is_finished:
            layer.counted(pod)
    return layer


def try_order(
    state: LiveState, profiles: Mapping[str, Profile], layer: TenantLayer
) -> list[list[PodView]]:
    """Pending workloads (each a list of its pending members) in the order the scheduler's
    queue takes them: the order the leader writes on each PodGroup (runtime/queue_status.py)."""
    pending = pending_pods(state, frozenset(profiles))
    if not pending or not profiles:
        return []
    attach_group_ages(profiles, _Groups(groups_by_key(state)))
    profile = next(iter(profiles.values()))
    several = len(layer.policy.tenants) > 1
    order = queue_order(
        (QueuedPod(p, p.creation_time, 0) for p in pending),
        profile.queue_sort.less,
        layer.gang_key,
        layer.tenant_of,
        layer.rank if several else None,
    )
    members: dict[str, list[PodView]] = {}
    for pod in pending:
        members.setdefault(layer.gang_key(pod), []).append(pod)
    return [sorted(members[entry.key], key=lambda p: p.name) for entry in order]


def queue_view(
    state: LiveState,
    profiles: Mapping[str, Profile],
    policy: QuotaPolicy,
    seed: int = 0,
) -> QueueView:
    layer = tenant_layer(state, profiles, policy)
    workloads = try_order(state, profiles, layer)
    groups = groups_by_key(state)
    reasons = [short_reason(state, layer, groups, pods) for pods in workloads]
    # Only what may start gets a place on the timeline, as only that gets a reservation in
    # the scheduler: a workload its quota refuses, or short of members, waits for that first.
    # Each reservation costs more than the last (the timeline grows), so only the first
    # PLANNED of them are planned, as the scheduler itself reserves only the first few.
    runnable = [p for p, why in zip(workloads, reasons, strict=True) if not blocked(why)]
    runnable = runnable[:PLANNED]
    runners = {name: ProfileRunner(profile, seed) for name, profile in profiles.items()}
    planned = estimate_starts(snapshot_of(state), runnable, frozenset(), runners, groups, state.now)
    rows: list[QueueRow] = []
    per_tenant: dict[str, int] = {}
    for index, (pods, why) in enumerate(zip(workloads, reasons, strict=True), start=1):
        tenant = layer.tenant_of(pods[0])
        per_tenant[tenant] = per_tenant.get(tenant, 0) + 1
        rows.append(_row(state, layer, groups, pods, planned, (index, per_tenant[tenant]), why))
    return QueueView(tuple(rows), tenant_rows(layer, per_tenant, state.now))


def blocked(reason: str) -> bool:
    """Whether the workload waits for its quota or its members before any node matters."""
    return reason.startswith(("quota: ", "waiting for members", "PodGroup "))


def _row(
    state: LiveState,
    layer: TenantLayer,
    groups: Mapping[str, PodGroupView],
    pods: Sequence[PodView],
    planned: Mapping[str, float | None],
    positions: tuple[int, int],
    reason: str,
) -> QueueRow:
    first = pods[0]
    key = pod_group_of(first)
    group = groups.get(key) if key is not None else None
    published = _published_start(group.annotations if group is not None else first.annotations)
    start, source = planned.get(first.key), "planned" if planned.get(first.key) is not None else ""
    if published is not None:
        start, source = max(0.0, published - state.now), "published"
    demand = gang_demand(pods, None, {})
    created = group.creation_time if group is not None else first.creation_time
    return QueueRow(
        position=positions[0],
        tenant_position=positions[1],
        tenant=layer.tenant_of(first),
        workload=key if key is not None else first.key,
        gang=key is not None,
        pending=len(pods),
        min_member=group.min_member if group is not None else 1,
        priority=max(p.priority for p in pods),
        gpus=gpus(demand),
        age_s=max(0.0, state.now - created),
        start_in_s=start,
        start_source=source,
        reason=reason,
    )


def short_reason(
    state: LiveState,
    layer: TenantLayer,
    groups: Mapping[str, PodGroupView],
    pods: Sequence[PodView],
) -> str:
    """Why it waits, in one line: missing members, then quota, then the scheduler's last word."""
    key = pod_group_of(pods[0])
    group = groups.get(key) if key is not None else None
    if key is not None and group is None:
        return f"PodGroup {key} not found"
    if group is not None:
        bound = sum(1 for p in state.pods if p.node_name and pod_group_of(p) == key)
        have = bound + len(pods)
        if have < group.min_member:
            return f"waiting for members: {have}/{group.min_member} exist"
    admission = layer.admit(pods)
    if not admission.admitted:
        return f"quota: {admission.reason}"
    for pod in pods:
        message = state.scheduled_messages.get(pod.key)
        if message:
            return message
    return ""


def tenant_rows(
    layer: TenantLayer, pending: Mapping[str, int], now: float
) -> tuple[TenantRow, ...]:
    capacity = layer.capacity()
    rows = []
    for name, tenant in layer.policy.tenants.items():
        effective = layer.ledger.effective(name, now)
        rows.append(
            TenantRow(
                tenant=name,
                used_gpus=layer.ledger.current(name).get(GPU, 0) / MILLI_PER_GPU,
                guaranteed_gpus=_gpus_or_none(tenant.guaranteed.get(GPU)),
                max_gpus=_gpus_or_none(tenant.max.get(GPU)),
                fair_share=dominant_share(effective, capacity, tenant.weight),
                pending=pending.get(name, 0),
            )
        )
    if pending.get(UNMATCHED):
        rows.append(TenantRow("<no tenant>", 0.0, None, None, 0.0, pending[UNMATCHED]))
    return tuple(rows)


def _gpus_or_none(milli: int | None) -> float | None:
    return None if milli is None else milli / MILLI_PER_GPU


def _published_start(annotations: Mapping[str, str]) -> float | None:
    text = annotations.get(ESTIMATED_START_ANNOTATION)
    if not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
