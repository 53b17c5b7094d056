"""From the pod the queue popped to the workload the cycle decides about.

A pod of no gang is its own workload. A gang member brings its gang: the members still
pending are taken out of the queue into the same cycle (deleted, bound or already counted
ones are dropped), with what the gang holds already (members reserved at Permit) and what
counts toward its quorum besides (bound, binding and finished members).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from batchsched.cycle.policies import Admission, Holds
from batchsched.cycle.workload import Workload, pod_key
from batchsched.framework.interfaces import QueuedPod
from batchsched.framework.lone_batches import LoneBatches
from batchsched.framework.runner import ProfileRunner
from batchsched.gang.core import Reservation
from batchsched.gang.podgroup import pod_group_of
from batchsched.model.pod import PodView
from batchsched.runtime.live import Live
from batchsched.snapshot import Snapshot

Batch = dict[str, QueuedPod]  # the workload's queue entries, by pod uid


def workload_of(live: Live, queued: QueuedPod) -> tuple[Workload, Batch] | None:
    """The workload `queued` starts, and its pods' queue entries; None when none of its
    pods is left to place."""
    pod = queued.pod
    key = pod_group_of(pod)
    if key is None:
        return Workload(pod_key(pod), (pod,)), {pod.uid: queued}
    gangs = live.gangs
    group = gangs.group(key)
    if group is None:
        missing = gangs.missing_reason(key)
        return Workload(key, (pod,), gang=True, missing=missing), {pod.uid: queued}
    queue, snapshot = live.queue, live.cache.snapshot
    batch = [queued, *queue.take(gangs.members.get(key, set()) - {pod.uid})]
    # Not deleted, not bound, and not counted already (a reserved or binding member).
    pending = [
        q
        for q in batch
        if not queue.was_deleted(q.pod.uid)
        and not q.pod.node_name
        and snapshot.node_of(q.pod.uid) is None
    ]
    for q in batch:
        if q not in pending:
            queue.done(q.pod.uid)
    if not pending:
        return None
    waiting = gangs.waiting.get(key)
    # A reserved member deleted since (the cache dropped it) holds nothing any more.
    reserved = tuple(
        r
        for r in (waiting.reservations() if waiting else ())
        if snapshot.node_of(r.pod.uid) is not None
    )
    # Members bound before, and those that already ran to the end, count: a member
    # recreated after the rest finished (a Job's retry) is placed on its own.
    bound = gangs.counted(key, snapshot) - len(reserved) + gangs.finished(key)
    pods = tuple(sorted((q.pod for q in pending), key=lambda p: p.name))
    known = len(gangs.members.get(key, ()))
    workload = Workload(
        key, pods, gang=True, group=group, reserved=reserved, bound=bound, known_members=known
    )
    return workload, {q.pod.uid: q for q in pending}


class LiveHandle:
    """The cycle's handle over the live scheduler's state (batchsched/cycle/policies.py)."""

    def __init__(self, live: Live, holds: Holds) -> None:
        self._live = live
        self._holds = holds
        # Lone pods' kept filter and score results; None while extenders answer per pod.
        self.lone_batches: LoneBatches | None = LoneBatches()

    @property
    def snapshot(self) -> Snapshot:
        return self._live.cache.snapshot

    @property
    def admission(self) -> Admission | None:
        return self._live.tenants

    @property
    def holds(self) -> Holds:
        return self._holds

    def runner_for(self, pod: PodView) -> ProfileRunner:
        return self._live.runner_for(pod)

    def waiting(self) -> Mapping[str, Sequence[Reservation]]:
        return self._live.gangs.reservations()

    def nominated_node(self, pod: PodView) -> str | None:
        """The node a lone preemptor's plan made room on, once every victim there went
        (cycle.py tries it there first); None otherwise."""
        preempting = self._live.preempting
        return preempting.nominated_node(pod) if preempting is not None else None
