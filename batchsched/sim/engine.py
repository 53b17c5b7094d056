"""The discrete-event simulator: a virtual clock driving the live scheduler's snapshot and core.

Events are arrivals and departures on a heap ordered by time; at one instant departures go
first (their capacity is free for the pods arriving then), then arrivals in input order. After
each instant's events, one scheduling pass pops the active queue in the profile's QueueSort
order and runs one workload cycle per pod (`schedule_workload`, the live loop's) on the shared
`Snapshot`. A pod that does not fit waits in the unschedulable pool until a
departure frees a node it might fit on (kube-scheduler's queueing hint for NodeResourcesFit);
the simulator has no periodic flush of that pool, since nothing but departures changes the
cluster. A bound pod leaves `runtime` seconds later. Permit's "wait" counts as allowed: the
simulator binds at once (gang permits come with the gang plugins).

Known-unfit pods: between two departures the cluster only fills up, so a pod equal to one that
found no node (same spec but for name, uid and creation time) finds none either, and its cycle
would change nothing (a cycle that rejects every node leaves the runner's start index and random
generator as they were). Such a pod is marked unschedulable without a cycle. This holds only for
pods whose fit cannot grow as pods are added (no pod affinity, no spread constraints, no
PodGroup), for a profile without PostFilter plugins, and when nobody asks for the failure
message (whose node counts could differ); a departure forgets every such pod shape. In such a
run, when the profile also scores every node, a last PreFilter (`SimCandidates`) leaves out the
nodes without room for the pod, which changes no decision either. Both are checked against
full cycles in tests/sim/test_engine.py.

Lone-pod batching: as in the live loop, the handle keeps one pod's filter and score results for
the next pod of the same signature and evaluates again only the nodes changed in between
(framework/lone_batches.py); `batching=False` runs a full cycle for every pod instead, and
tests/sim/test_engine.py holds the two to the same placements.

Tenant quotas (`batchsched simulate --quota`, `tenants.py`): the live scheduler's tenant layer
on the virtual clock. The cycle asks its quota admission, as the live loop's does; each pass
pops the tenant queues in fair-share order; placements and departures move each tenant's
usage. A pod its quota refuses waits until some pod departs (usage only grows between
departures), on any node: whether it fits a freed node does not matter. Known-unfit shapes stay
a matter of nodes alone: a quota refusal never marks a shape, and a pod of a known-unfit shape
is first asked its own quota, so a copy in another tenant, or one its tenant's quota now
refuses, is counted as a quota hold, as its full cycle would have been.

Resource claims: the simulator plays the API's other actors (`claims.py`). A pod's claims made
from templates appear when it arrives; a placed pod's claims get the allocation Reserve
assumed and the pod as a consumer (PreBind's write); a departing pod's claims let it go (the
resourceclaim controller's part), so their devices are free for the pods after it.
"""

from __future__ import annotations

import dataclasses
import functools
import heapq
from collections.abc import Callable, Hashable, Sequence
from typing import Final, Protocol

from batchsched.cycle.cycle import schedule_workload
from batchsched.cycle.decision import Bind, Reject, Wait, Why
from batchsched.cycle.policies import SnapshotHandle
from batchsched.cycle.workload import Workload, pod_key
from batchsched.framework.interfaces import QueuedPod
from batchsched.framework.lone_batches import LoneBatches
from batchsched.framework.profile import Profile
from batchsched.framework.runner import ProfileRunner
from batchsched.framework.status import is_ok
from batchsched.gang.podgroup import LEGACY_POD_GROUP_LABEL, POD_GROUP_LABEL
from batchsched.model.pod import PodView
from batchsched.model.resources import NVIDIA_GPU
from batchsched.sim.candidates import SimCandidates
from batchsched.sim.claims import add_claims, bind_claims, free_devices, release_claims
from batchsched.sim.tenants import SimTenants
from batchsched.sim.workload import SimPod
from batchsched.snapshot import NodeInfo, Snapshot

_DEPART: Final = 0
_ARRIVE: Final = 1
# Lone-pod signatures kept (framework/lone_batches.py KEPT: 64 in the live scheduler).
SIM_KEPT_SIGNATURES: Final = 128


class Observer(Protocol):
    """What the metrics see of a run; every call is at `now` on the virtual clock."""

    def arrived(self, pod: SimPod, now: float) -> None: ...

    def placed(self, pod: SimPod, info: NodeInfo, now: float) -> None: ...

    def departed(self, pod: SimPod, info: NodeInfo, now: float) -> None: ...

    def instant_done(self, now: float, waiting: int) -> None: ...


class Simulator:
    def __init__(
        self,
        snapshot: Snapshot,
        profile: Profile,
        observer: Observer,
        seed: int = 0,
        progress: Callable[[int], None] | None = None,
        record_reasons: bool = True,
        tenants: SimTenants | None = None,
        batching: bool = True,
    ) -> None:
        self.snapshot = snapshot
        self.profile = profile
        # Decisions alone matter to this run: no failure message is kept, no PostFilter runs.
        decisions_only = not record_reasons and not profile.post_filter
        self._unfit: set[Hashable] | None = set() if decisions_only else None
        scores_all = profile.percentage_of_nodes_to_score == 100
        cycle_profile = with_candidates(profile) if decisions_only and scores_all else profile
        self.runner = ProfileRunner(cycle_profile, seed)
        self._handle = SnapshotHandle(snapshot, self.runner)
        # The live scheduler's lone-pod batching (framework/lone_batches.py): the same
        # decisions as a full cycle per pod, for a fraction of the work on a trace whose pods
        # repeat a few hundred shapes. More signatures are kept than the live scheduler keeps:
        # the openb default trace has 151, and a batch pushed out is built again in full.
        self.lone_batches = LoneBatches(SIM_KEPT_SIGNATURES) if batching else None
        self._handle.lone_batches = self.lone_batches
        self.tenants = tenants
        if tenants is not None:
            self._handle.admission = tenants.layer
        self.observer = observer
        self.progress = progress
        # Aggregating kube-scheduler's failure message costs a pass over every node's status:
        # runs that only measure (the paper's method) can skip it.
        self.record_reasons = record_reasons
        self.attempts = 0  # scheduling cycles run
        self.known_unfit = 0  # pods settled as unschedulable without a cycle (see above)
        self.last_failure: dict[str, str] = {}  # uid -> why it is still waiting
        self.ignored: list[SimPod] = []  # another scheduler's pods, or gated by PreEnqueue
        self._events: list[tuple[float, int, int, SimPod]] = []
        self._seq = 0
        self._active: list[QueuedPod] = []
        self._unschedulable: dict[str, QueuedPod] = {}
        self._waiting: dict[str, SimPod] = {}
        self._quota_held: set[str] = set()  # parked uids whose last "no" was their quota's
        self._order = functools.cmp_to_key(self._compare)

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    def waiting_pods(self) -> list[SimPod]:
        return list(self._waiting.values())

    def run(self, pods: Sequence[SimPod]) -> None:
        """Play every arrival and the departures they cause until the heap is empty."""
        for pod in pods:
            self._push(pod.arrival, _ARRIVE, pod)
        handled = 0
        while self._events:
            now = self._events[0][0]
            if self.tenants is not None:
                self.tenants.at(now)
            freed: list[NodeInfo] = []
            while self._events and self._events[0][0] == now:
                _, kind, _, pod = heapq.heappop(self._events)
                if kind == _DEPART:
                    freed.append(self._depart(pod, now))
                else:
                    self._arrive(pod, now)
                    handled += 1
            if freed:
                self._requeue(freed, now)
            self._schedule_pass(now)
            self.observer.instant_done(now, len(self._waiting))
            if self.progress is not None:
                self.progress(handled)

    def _push(self, when: float, kind: int, pod: SimPod) -> None:
        heapq.heappush(self._events, (when, kind, self._seq, pod))
        self._seq += 1

    def _arrive(self, pod: SimPod, now: float) -> None:
        add_claims(self.snapshot.dra, pod.claims)
        self.observer.arrived(pod, now)
        if pod.pod.scheduler_name != self.profile.scheduler_name:
            self.ignored.append(pod)
            return
        for gate in self.profile.pre_enqueue:
            status = gate.pre_enqueue(pod.pod)
            if not is_ok(status):
                self.ignored.append(pod)
                self.last_failure[pod.pod.uid] = status.message()
                return
        self._waiting[pod.pod.uid] = pod
        self._active.append(QueuedPod(pod.pod, now))
        if self.tenants is not None:
            self.tenants.arrived(pod.pod)

    def _depart(self, pod: SimPod, now: float) -> NodeInfo:
        info = self.snapshot.node_of(pod.pod.uid)
        assert info is not None, f"{pod.pod.key} departs but is counted nowhere"
        self.snapshot.forget(pod.pod)
        if pod.pod.resource_claims:
            release_claims(self.snapshot.dra, pod.pod)
        if self._unfit:
            self._unfit.clear()  # capacity grew: any shape may fit again
        if self.tenants is not None:
            self.tenants.departed(pod.pod)
        self.observer.departed(pod, info, now)
        return info

    def _compare(self, a: QueuedPod, b: QueuedPod) -> int:
        less = self.profile.queue_sort.less
        if less(a, b):
            return -1
        return 1 if less(b, a) else 0

    def _schedule_pass(self, now: float) -> None:
        if not self._active:
            return
        queue = sorted(self._active, key=self._order) if len(self._active) > 1 else self._active
        self._active = []
        order = self.tenants.fair_order(queue) if self.tenants is not None else queue
        for queued in order:
            self._try(queued, now)

    def _try(self, queued: QueuedPod, now: float) -> None:
        """One pod's turn: its workload cycle, or the answer a pod of its shape got."""
        pod = queued.pod
        unfit = self._unfit
        key = unfit_key(pod) if unfit is not None else None
        if key is not None and unfit is not None and key in unfit:
            self.known_unfit += 1
            refused = self.tenants.layer.refuses([pod]) if self.tenants is not None else ""
            if refused:
                self._hold(queued, f"quota: {refused}", now)
            else:
                self._quota_held.discard(pod.uid)
                self._park(queued, now)
            return
        decision = schedule_workload(self._handle, Workload(pod_key(pod), (pod,)))
        self.attempts += 1
        if isinstance(decision, Bind | Wait) and decision.placed:
            self._place(queued, decision.placed[0].node, now)
            return
        assert isinstance(decision, Reject)
        if decision.why in (Why.QUOTA, Why.QUOTA_PLACED):
            self._hold(queued, decision.message, now)
            return
        result = decision.results.get(pod.uid)
        if key is not None and unfit is not None and result and result.failure is not None:
            unfit.add(key)  # no node passed its filters: nothing else failed
        if self.record_reasons:
            self.last_failure[pod.uid] = decision.message
        self._quota_held.discard(pod.uid)
        self._park(queued, now)

    def _place(self, queued: QueuedPod, node: str, now: float) -> None:
        uid = queued.pod.uid
        pod = self._waiting.pop(uid)
        self.last_failure.pop(uid, None)
        self._quota_held.discard(uid)
        info = self.snapshot.get(node)
        assert info is not None
        if pod.pod.resource_claims:
            bind_claims(self.snapshot.dra, pod.pod)
        if self.tenants is not None:
            self.tenants.placed(pod.pod, node, now - pod.arrival)
        self.observer.placed(pod, info, now)
        if pod.runtime is not None:
            self._push(now + pod.runtime, _DEPART, pod)

    def _hold(self, queued: QueuedPod, message: str, now: float) -> None:
        """Its tenant's quota refused it: it waits for a departure, wherever that is."""
        assert self.tenants is not None
        self.tenants.refused(queued.pod)
        self._quota_held.add(queued.pod.uid)
        if self.record_reasons:
            self.last_failure[queued.pod.uid] = message
        self._park(queued, now)

    def _park(self, queued: QueuedPod, now: float) -> None:
        # As kube-scheduler does, a pod back from an attempt queues behind those already there.
        self._unschedulable[queued.pod.uid] = QueuedPod(queued.pod, now, queued.attempts + 1)

    def _requeue(self, freed: list[NodeInfo], now: float) -> None:
        dra = self.snapshot.dra
        devices = {i.name: free_devices(dra, i.name, i.node.labels) for i in freed}
        for uid, queued in list(self._unschedulable.items()):
            pod = self._waiting[uid]
            held = uid in self._quota_held  # a departure lowered some tenant's usage
            if held or any(might_fit(pod, info, devices[info.name]) for info in freed):
                del self._unschedulable[uid]
                self._active.append(queued)


def might_fit(pod: SimPod, info: NodeInfo, free_devices: int | None = None) -> bool:
    """Could the pod fit `info` now, by resources alone? Cheap, and generous when unsure.
    `free_devices`: how many DRA devices the node reaches that no claim holds; a pod whose
    claims all come from templates (none allocated yet) needs its GPU devices free there."""
    view = pod.pod
    if view.pod_affinity or view.pod_anti_affinity or view.spread_constraints:
        return True  # a departure may lift a pod-level constraint anywhere
    req = view.requests
    if info.alloc_milli_cpu - info.req_milli_cpu < req.milli_cpu:
        return False
    if info.alloc_memory - info.req_memory < req.memory:
        return False
    if info.alloc_pods - len(info.pods) < 1:
        return False
    for name, amount in req.scalar.items():
        if info.alloc_scalar.get(name, 0) - info.req_scalar.get(name, 0) < amount:
            return False
    short = free_devices is not None and pod.claim_gpus > free_devices
    if short and all(entry.from_template for entry in view.resource_claims):
        return False  # its claims are its own, unallocated: they need the devices free here
    return not pod.share_milli or info.alloc_scalar.get(NVIDIA_GPU, 0) > 0


def with_candidates(profile: Profile) -> Profile:
    """The profile with SimCandidates as its last PreFilter: for runs that keep no failure
    reasons and score every node, where it changes no decision (see its module)."""
    candidates = SimCandidates.for_filters({plugin.name for plugin in profile.filter})
    if candidates is None:
        return profile
    return dataclasses.replace(profile, pre_filter=(*profile.pre_filter, candidates))


def unfit_key(pod: PodView) -> Hashable | None:
    """Everything that decides where a pod fits, i.e. all of it but its name, uid and creation
    time; None for a pod whose fit can grow as other pods are placed (pod affinity, topology
    spread, a gang member waiting for its quorum, a claim other pods may allocate first), or
    whose spec does not hash. Claims from templates count by template: what they ask for."""
    if pod.pod_affinity is not None or pod.spread_constraints:
        return None
    if any(not entry.from_template for entry in pod.resource_claims):
        return None
    if POD_GROUP_LABEL in pod.labels or LEGACY_POD_GROUP_LABEL in pod.labels:
        return None
    req = pod.requests
    key = (
        pod.namespace,
        tuple(sorted(pod.labels.items())),
        tuple(sorted(pod.annotations.items())),
        pod.scheduler_name,
        pod.node_name,
        pod.priority,
        pod.priority_class_name,
        pod.preemption_policy,
        pod.phase,
        pod.deleting,
        (req.milli_cpu, req.memory, req.ephemeral_storage, req.pods),
        tuple(sorted(req.scalar.items())),
        tuple(sorted(pod.node_selector.items())),
        pod.node_affinity,
        pod.pod_anti_affinity,
        pod.tolerations,
        pod.host_ports,
        pod.images,
        pod.scheduling_gates,
        tuple((entry.name, entry.template_name) for entry in pod.resource_claims),
    )
    try:
        hash(key)
    except TypeError:
        return None
    return key
