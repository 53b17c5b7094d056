"""The tenant layer: which tenant a pod belongs to, what each tenant uses, whether a gang may
start under its tenant's quota, and which tenant's pod goes next.

The live scheduler, `batchsched place --quota` and `batchsched simulate --quota` drive this
one class, each on its own clock (so it sits under the drivers: docs/architecture.md). In the
live scheduler usage is fed by the cache (`counted` / `uncounted`): every pod of ours the
cache counts (bound, binding, or reserved while its gang waits) uses its tenant's quota. The
decisions are the pure ones in `queues/`; this module only keeps their inputs current. A
quota reload replaces the policy and recounts every pod under it (tenants may have changed);
decayed history restarts then, which only forgives the past early.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from batchsched.clock import Clock
from batchsched.dra.resolve import claimed_devices, class_capacity
from batchsched.framework.interfaces import QueuedPod
from batchsched.gang.podgroup import pod_group_of
from batchsched.metrics import SchedulerMetrics
from batchsched.model.pod import PodView
from batchsched.model.resources import Resources
from batchsched.snapshot import Snapshot
from queues.config import capacity_warnings
from queues.demand import (
    PRODUCT_LABEL,
    capacity_of,
    device_demand,
    gang_demand,
    pod_demand,
    sole_product,
)
from queues.fairshare import RankKey, rank_key
from queues.model import GPU, MILLI_PER_GPU, QuotaPolicy, add, subtract, total
from queues.quota import Admission, check_admission, never_refuses
from queues.usage import UsageLedger

logger = logging.getLogger(__name__)

UNMATCHED = ""  # the queue's tenant for pods that map to no tenant


DEMANDS_KEPT = 100_000  # pods whose demand is remembered before the memory starts over


@dataclass(frozen=True, slots=True)
class _Counted:
    tenant: str
    demand: dict[str, int]


@dataclass(frozen=True, slots=True)
class _Demand:  # a pod's demand and what it was computed from
    requests: Resources
    annotations: Mapping[str, str]
    product: str | None
    demand: dict[str, int]


class TenantLayer:
    def __init__(
        self,
        policy: QuotaPolicy,
        clock: Clock,
        ours: Callable[[PodView], bool],
        metrics: SchedulerMetrics | None = None,
    ) -> None:
        self.policy = policy
        self.clock = clock
        self.ours = ours  # whether a pod is scheduled by one of our profiles
        # The queue a pod's gang names in its producer's API (the app wires GangTracker's).
        self.producer_queue: Callable[[PodView], str] = lambda pod: ""
        self.metrics = metrics
        self.ledger = UsageLedger(policy.half_life_s, clock.now())
        self.in_use: dict[str, int] = {}
        self.started: dict[str, float] = {}  # uid -> when we saw it start using capacity
        self._counted: dict[str, _Counted] = {}
        self._pods: dict[str, PodView] = {}
        self._snapshot: Snapshot | None = None
        self._capacity: dict[str, int] | None = None
        self._capacity_version = 0
        self._warned: set[str] = set()
        # Per-pod cost (#17): a policy that refuses nothing skips the quota arithmetic.
        self._lenient = never_refuses(policy)
        self._demands: dict[str, _Demand] = {}
        self._last: tuple[tuple[object, ...], Admission] | None = None
        self._gauges: dict[str, Callable[[float], None]] = {}
        self._publish_quotas()

    def attach(self, snapshot: Snapshot) -> None:
        """The live snapshot: capacity and GPU models come from its nodes."""
        self._snapshot = snapshot

    # Usage, from the cache

    def counted(self, pod: PodView) -> None:
        if not self.ours(pod) or pod.uid in self._counted:
            return
        tenant = self._tenant(pod)
        self._pods[pod.uid] = pod
        self.started.setdefault(pod.uid, self.clock.now())
        if tenant is None:
            return
        demand = self._demand(pod, self._product(pod.node_name))
        self._counted[pod.uid] = _Counted(tenant, demand)
        self.ledger.add(self.policy, tenant, demand, self.clock.now())
        self.in_use = add(self.in_use, demand)
        self._publish(tenant)

    def recounted(self, old: PodView, new: PodView) -> None:
        """The watch's newer version of a counted pod (often the confirmation of our own
        binding): the same as `uncounted(old)` then `counted(new)`, without touching the
        ledger when the new version counts what the old one did."""
        entry = self._counted.get(old.uid)
        if (
            entry is not None
            and new.uid == old.uid
            and self.ours(new)
            and self._tenant(new) == entry.tenant
            and self._demand(new, self._product(new.node_name)) == entry.demand
        ):
            self._pods[new.uid] = new
            self.started[new.uid] = self.clock.now()  # as uncounting and counting it would
            return
        self.uncounted(old)
        self.counted(new)

    def uncounted(self, pod: PodView) -> None:
        self._demands.pop(pod.uid, None)
        self._pods.pop(pod.uid, None)
        self.started.pop(pod.uid, None)
        entry = self._counted.pop(pod.uid, None)
        if entry is None:
            return
        self.ledger.remove(self.policy, entry.tenant, entry.demand, self.clock.now())
        self.in_use = subtract(self.in_use, entry.demand)
        self._publish(entry.tenant)

    def set_policy(self, policy: QuotaPolicy) -> None:
        """A reloaded quota file: recount every pod under the new tenants."""
        pods = list(self._pods.values())
        started = dict(self.started)
        self.policy = policy
        self._lenient = never_refuses(policy)
        self._demands.clear()  # deviceClasses may map other devices now
        self.ledger = UsageLedger(policy.half_life_s, self.clock.now())
        self._publish_quotas()
        self.in_use = {}
        self._counted.clear()
        self._pods.clear()
        for pod in pods:
            self.counted(pod)
        self.started.update(started)
        logger.info("tenant policy in force tenants=%d pods=%d", len(policy.tenants), len(pods))

    # Questions the queue and the scheduling cycle ask

    def tenant_of(self, pod: PodView) -> str:
        found = self._tenant(pod)
        return UNMATCHED if found is None else found

    def _tenant(self, pod: PodView) -> str | None:
        labels: Mapping[str, str] = pod.labels
        queue_label = self.policy.queue_label
        if queue_label not in labels:
            # A queue named in the gang's own API (Volcano's spec.queue, Kueue's queue-name
            # label) counts as the queue label: the quota file names queues, not encodings.
            queue = self.producer_queue(pod)
            if queue:
                labels = {**labels, queue_label: queue}
        return self.policy.tenant_of(pod.namespace, labels)

    def rank(self, queued: QueuedPod) -> RankKey:
        """Which tenant's head goes next (smaller first); pods of no tenant go last, so the
        cycle can tell them why."""
        tenant = self.tenant_of(queued.pod)
        if tenant == UNMATCHED:
            return ((2, 0.0),)
        demand = self._demand(queued.pod, None)
        return rank_key(self.policy, self.ledger, tenant, demand, self.capacity(), self.clock.now())

    def admit_placed(self, placed: Sequence[tuple[PodView, str]]) -> Admission:
        """The same question once the nodes are chosen: per-GPU-model maxes count the model
        of each pod's node (before placement only a single-model cluster tells it)."""
        if not placed or sole_product(self.capacity()) is not None:
            return Admission(True)
        products = {pod.uid: self._product(node) or "" for pod, node in placed}
        return self.admit([pod for pod, _ in placed], {k: v for k, v in products.items() if v})

    def _unmatched(self, pod: PodView) -> str:
        label = self.policy.queue_label
        return (
            f"pod maps to no tenant (namespace {pod.namespace}, label {label}="
            f"{pod.labels.get(label, '<none>')}) and the quota file names no defaultTenant"
        )

    def admit(
        self, pods: Sequence[PodView], products: Mapping[str, str] | None = None
    ) -> Admission:
        """May these pending pods (one gang, or one pod) start under their tenant's quota?
        `products`: each pod's node's GPU model, once placed."""
        first = pods[0]
        tenant = self._tenant(first)
        if tenant is None:
            return Admission(False, self._unmatched(first))
        priority = max(p.priority for p in pods)
        capacity = self.capacity()
        sole = sole_product(capacity)  # one GPU model: per-model quota is known before placing
        if products is None and sole is not None:
            products = {p.uid: sole for p in pods}
        products = products or {}
        demand = total(self._demand(p, products.get(p.uid)) for p in pods)
        # The same inputs give the same answer: a lone pod is asked before and after placing
        # (the per-model quota), with nothing counted in between.
        key = (self.ledger, self.ledger.version, tenant, priority, demand, capacity, self.in_use)
        if self._last is not None and self._last[0] == key:
            return self._last[1]
        admission = check_admission(
            self.policy, self.ledger, tenant, demand, priority, capacity, self.in_use
        )
        self._last = (key, admission)
        return admission

    # The workload cycle's Admission policy (batchsched/cycle/policies.py).

    def refuses(self, pods: Sequence[PodView]) -> str:
        if self._lenient:  # only a pod of no tenant can be refused
            return "" if self._tenant(pods[0]) is not None else self._unmatched(pods[0])
        admission = self.admit(pods)
        return "" if admission.admitted else admission.reason

    def refuses_placed(self, placed: Sequence[tuple[PodView, str]]) -> str:
        if self._lenient:
            if not placed or sole_product(self.capacity()) is not None:
                return ""  # as admit_placed answers
            return self.refuses([pod for pod, _ in placed])
        admission = self.admit_placed(placed)
        return "" if admission.admitted else admission.reason

    def rejected(self, pods: Sequence[PodView], reason: str) -> None:
        tenant = self.tenant_of(pods[0]) or "<none>"
        logger.info("quota refused pods=%s tenant=%s reason=%s", _names(pods), tenant, reason)
        if self.metrics is not None:
            self.metrics.quota_rejections.labels(tenant=tenant).inc()

    # Preemption (runtime/preempting.py): what a tenant below its guarantee may reclaim.

    def reclaimable(self, pods: Sequence[PodView]) -> frozenset[str]:
        """Uids of other tenants' pods that these pending pods (one gang, or one pod) may
        evict regardless of priority: empty unless the pods' tenant stays within its guarantee
        with them, counted on the resources its guarantee names. From each other tenant above
        its guarantee on those resources, its units (gangs, lone pods) youngest first while it
        is still above: at most one unit's worth below its guarantee, as Kueue reclaims."""
        tenant = self._tenant(pods[0]) if pods else None
        if tenant is None:
            return frozenset()
        guaranteed = self.policy.tenants[tenant].guaranteed
        demand = gang_demand(pods, devices={p.uid: self._devices(p) for p in pods})
        names = sorted(r for r in demand if demand[r] > 0 and r in guaranteed)
        usage = self.ledger.current(tenant)
        if not names or any(usage.get(r, 0) + demand[r] > guaranteed[r] for r in names):
            return frozenset()
        out: set[str] = set()
        for other, units in self._units_by_tenant(tenant, names).items():
            limit = self.policy.tenants[other].guaranteed
            used = self.ledger.current(other)
            excess = {r: used.get(r, 0) - limit.get(r, 0) for r in names}
            for uids, amounts in units:
                if all(excess[r] <= 0 for r in names):
                    break
                out.update(uids)
                excess = {r: excess[r] - amounts.get(r, 0) for r in names}
        return frozenset(out)

    def _units_by_tenant(
        self, skip: str, names: Sequence[str]
    ) -> dict[str, list[tuple[list[str], dict[str, int]]]]:
        """Other tenants' counted units that use any of `names`, youngest first."""
        units: dict[tuple[str, str], tuple[list[str], dict[str, int]]] = {}
        for uid, entry in self._counted.items():
            if entry.tenant == skip or not any(entry.demand.get(r, 0) > 0 for r in names):
                continue
            unit = units.setdefault((entry.tenant, self.gang_key(self._pods[uid])), ([], {}))
            unit[0].append(uid)
            unit[1].update(add(unit[1], entry.demand))
        by_tenant: dict[str, list[tuple[list[str], dict[str, int]]]] = {}
        youngest = sorted(
            units.items(),
            key=lambda item: (-max(self.started.get(u, 0.0) for u in item[1][0]), item[0]),
        )
        for (tenant, _), unit in youngest:
            by_tenant.setdefault(tenant, []).append(unit)
        return by_tenant

    def nodes_changed(self) -> None:
        self._capacity = None

    def capacity_warnings(self) -> list[str]:
        """Guarantees the cluster cannot honour all at once, each reported once (logged at
        WARNING) until the policy or the nodes change it; returns the new ones."""
        current = capacity_warnings(self.policy, self.capacity()) if self._snapshot else []
        fresh = [w for w in current if w not in self._warned]
        self._warned = set(current)
        for warning in fresh:
            logger.warning("tenant quota %s", warning)
        return fresh

    def capacity(self) -> dict[str, int]:
        """What the cluster's nodes offer, in queue units (recomputed after node changes),
        with the DRA devices of the DeviceClasses the quota file maps."""
        snapshot = self._snapshot
        if snapshot is None:
            return {}
        if self._capacity is None or self._capacity_version != snapshot.dra.version:
            nodes = ((i.node.allocatable, i.node.labels) for i in snapshot.nodes)
            self._capacity = add(
                capacity_of(nodes),
                device_demand(
                    class_capacity(snapshot.dra, self.policy.device_classes),
                    self.policy.device_classes,
                ),
            )
            self._capacity_version = snapshot.dra.version
        return self._capacity

    def _demand(self, pod: PodView, product: str | None) -> dict[str, int]:
        """`pod_demand`, remembered per pod while its requests, annotations and node's GPU
        model stay the same (not for pods with DRA claims: their devices change). Compared by
        value, not identity: the watch's confirmation of a bind is a fresh parse with equal
        requests and annotations, and an in-place resize is a new, unequal `requests`."""
        devices = self._devices(pod)
        if devices:
            return pod_demand(pod, product, devices)
        known = self._demands.get(pod.uid)
        if (
            known is not None
            and known.product == product
            and known.requests == pod.requests
            and known.annotations == pod.annotations
        ):
            return known.demand
        demand = pod_demand(pod, product)
        if len(self._demands) >= DEMANDS_KEPT:
            self._demands.clear()
        self._demands[pod.uid] = _Demand(pod.requests, pod.annotations, product, demand)
        return demand

    def _devices(self, pod: PodView) -> dict[str, int]:
        """What the pod's DRA claims count toward its tenant's quota (deviceClasses)."""
        snapshot = self._snapshot
        if snapshot is None or not pod.resource_claims or not self.policy.device_classes:
            return {}
        return device_demand(claimed_devices(pod, snapshot.dra), self.policy.device_classes)

    def gang_key(self, pod: PodView) -> str:
        """The unit the tenant queues order: a PodGroup, or the pod itself."""
        group = pod_group_of(pod)
        return group if group is not None else f"pod:{pod.key}"

    def _product(self, node_name: str) -> str | None:
        info = self._snapshot.get(node_name) if self._snapshot is not None else None
        return info.node.labels.get(PRODUCT_LABEL) if info is not None else None

    def _publish(self, tenant: str) -> None:
        if self.metrics is None:
            return
        for node in self.policy.path(tenant):
            gpus = self.ledger.current(node.name).get(GPU, 0) / MILLI_PER_GPU
            gauge = self._gauges.get(node.name)
            if gauge is None:
                gauge = self._gauges[node.name] = self.metrics.tenant_gpus.labels(
                    tenant=node.name
                ).set
            gauge(gpus)

    def _publish_quotas(self) -> None:
        """Every tenant's GPU bounds, at start and after each reload (cleared first, so a
        tenant or a bound the new file drops leaves no stale series)."""
        if self.metrics is None:
            return
        self.metrics.tenant_quota_gpus.clear()
        for tenant in self.policy.tenants.values():
            for bound, amounts in (("guaranteed", tenant.guaranteed), ("max", tenant.max)):
                if GPU in amounts:
                    quota = amounts[GPU] / MILLI_PER_GPU
                    self.metrics.tenant_quota_gpus.labels(tenant=tenant.name, bound=bound).set(
                        quota
                    )


def _names(pods: Iterable[PodView]) -> str:
    keys = [p.key for p in pods]
    return ",".join(keys[:3]) + (f",+{len(keys) - 3}" if len(keys) > 3 else "")
