"""Why a pod that could be placed waits anyway: its tenant's quota, or a reservation it would
delay. The scheduling loop and the gang cycle ask here before they place or bind.

Both checks are the pure ones (`queues.quota`, `batchsched.backfill`); this module gives them
the live inputs (usage, expected runtimes, start times) and turns a "no" into the user's
Event, log line and metric.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from batchsched.backfill import (
    NodeVerdicts,
    Running,
    vector,
)
from batchsched.expected_runtime import InvalidRuntime, gang_runtime, human_duration
from batchsched.framework.interfaces import QueuedPod
from batchsched.gang.core import eligible_nodes
from batchsched.gang.podgroup import pod_group_of
from batchsched.model.pod import PodView

if TYPE_CHECKING:
    from batchsched.runtime.scheduler import Scheduler

logger = logging.getLogger(__name__)


class BackfillWaits:
    def __init__(self, scheduler: Scheduler) -> None:
        self.s = scheduler
        self._reported: set[str] = set()  # objects whose bad runtime annotation was reported
        # The last `starting` result and its pods' uids: `held_back` is asked about it next.
        self._placing: tuple[list[Running], frozenset[str]] = ([], frozenset())

    # Quota

    def quota_refuses(self, queued: Sequence[QueuedPod], cycle: int) -> bool:
        """Refuse these pods (one gang's pending members, or one pod) when their tenant's
        quota does not allow them now: they wait unschedulable, and the user is told why."""
        tenants = self.s.tenants
        if tenants is None or not queued:
            return False
        pods = [q.pod for q in queued]
        admission = tenants.admit(pods)
        if admission.admitted:
            return False
        tenants.rejected(pods, admission.reason)
        if self.s.backfill is not None:
            self.s.backfill.unblock(self.key_of(pods[0]))
        message = f"quota: {admission.reason}"
        for q in queued:
            self.s.queue.requeue_unschedulable(q, cycle)
            self.s.report_failure(q.pod, message)
        self.s.counts.unschedulable += len(queued)
        return True

    def placed_refused(self, placed: Sequence[tuple[PodView, str]]) -> str:
        """Quota once the nodes are known (per-GPU-model maxes on a mixed cluster): why these
        placements may not stand, or ""."""
        tenants = self.s.tenants
        if tenants is None or not placed:
            return ""
        admission = tenants.admit_placed(placed)
        if admission.admitted:
            return ""
        pods = [pod for pod, _ in placed]
        tenants.rejected(pods, admission.reason)
        return f"quota: {admission.reason}"

    # Backfill

    def key_of(self, pod: PodView) -> str:
        group = pod_group_of(pod)
        return group if group is not None else f"pod:{pod.key}"

    def starting(self, placed: Sequence[tuple[PodView, str]]) -> list[Running]:
        now = self.s.clock.now()
        out = []
        for pod, node in placed:
            runtime = self.runtime_of(pod)
            out.append(
                Running(node, vector(pod.requests), None if runtime is None else now + runtime)
            )
        self._placing = (out, frozenset(pod.uid for pod, _ in placed))
        return out

    def held_back(self, key: str, priority: int, starting: Sequence[Running]) -> str:
        """Why these pods may not start now (a reservation they would delay), or ""."""
        backfill = self.s.backfill
        if backfill is None or not starting:
            return ""
        last, uids = self._placing
        reservation = backfill.conflict(
            key,
            priority,
            starting,
            self.s.cache.snapshot,
            self.ends_at,
            self.eligible,
            placing=uids if starting is last else (),
        )
        if reservation is None:
            return ""
        self.s.metrics.backfill_held.inc()
        wait = max(0.0, reservation.start - self.s.clock.now())
        nodes = ",".join(sorted(reservation.nodes)[:4])
        return (
            f"backfill: starting now would delay {reservation.key}, which holds a reservation "
            f"to start in {human_duration(wait)} on {nodes}"
        )

    def verdicts(self, pod: PodView) -> NodeVerdicts | None:
        """The BackfillReservations plugin's question: where must this pod not start now?"""
        backfill = self.s.backfill
        if backfill is None:
            return None
        runtime = self.runtime_of(pod)
        end = None if runtime is None else self.s.clock.now() + runtime
        return backfill.verdicts(
            self.key_of(pod),
            pod.priority,
            vector(pod.requests),
            end,
            self.s.cache.snapshot,
            self.ends_at,
            self.eligible,
        )

    def started(self, key: str, starting: Sequence[Running]) -> None:
        if self.s.backfill is not None:
            self.s.backfill.started(key, starting)

    def blocked(self, key: str, pods: Sequence[PodView]) -> None:
        backfill = self.s.backfill
        if backfill is None or not pods:
            return
        if self.preempting(key):
            backfill.unblock(key)  # its capacity is held while the victims go: no reservation
            return
        backfill.block(key, pods, self.runtime_of(pods[0]))

    def preempting(self, key: str) -> bool:
        preempting = self.s.preempting
        return preempting is not None and key in preempting.flights

    def runtime_of(self, pod: PodView) -> float | None:
        """The expected runtime: the PodGroup's annotation, the pod's, activeDeadlineSeconds."""
        key = pod_group_of(pod)
        group = self.s.gangs.group(key) if key is not None else None
        try:
            return gang_runtime(pod, group.annotations if group is not None else None)
        except InvalidRuntime as err:
            self._report_bad_runtime(key or pod.key, pod, str(err))
            return None

    def ends_at(self, pod: PodView) -> float | None:
        """When a running pod is expected to end, on the monotonic clock; None: unknown."""
        runtime = self.runtime_of(pod)
        if runtime is None:
            return None
        now = self.s.clock.now()
        tenants = self.s.tenants
        began = tenants.started.get(pod.uid) if tenants is not None else None
        if began is None:
            wall = pod.start_time or pod.creation_time
            began = now - max(0.0, self.s.clock.wall() - wall) if wall else now
        return began + runtime

    def eligible(self, pod: PodView) -> tuple[str, ...]:
        runner = self.s.runner_for(pod)
        return tuple(i.name for i in eligible_nodes(runner, pod, self.s.cache.snapshot))

    def _report_bad_runtime(self, key: str, pod: PodView, why: str) -> None:
        if key in self._reported:
            return
        self._reported.add(key)
        logger.warning("invalid expected runtime object=%s error=%s", key, why)
        self.s.metrics.invalid_annotations.labels(annotation="expected-runtime").inc()
        self.s.spawn(
            self.s.events.record(
                pod, "Warning", "InvalidAnnotation", "Scheduling", f"{why}; runtime unknown"
            )
        )
