"""The live gang cycle: a member comes up, its whole gang is placed or none of it is.

Steps, for the member popped from the queue:
  1. find its PodGroup (missing or invalid: the pod waits, with an Event saying why);
  2. take the gang's other pending members out of the queue into this cycle;
  3. run the pure `schedule_gang` on the snapshot, with the reservations of every waiting gang
     offered up for release (the no-deadlock rule);
  4. BIND: bind the reserved and new members together; WAIT: hold the reservations until the
     quorum arrives or scheduleTimeoutSeconds passes; REJECT: requeue every member and say why;
  5. release the gangs whose reservations gave way, sending their members back to the queue.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from batchsched.framework.interfaces import QueuedPod
from batchsched.framework.runner import ProfileRunner
from batchsched.gang.core import GangDecision, GangRequest, Outcome, schedule_gang
from batchsched.gang.podgroup import PodGroupView
from batchsched.kube.binder import ObjectRef
from batchsched.model.pod import PodView
from batchsched.runtime.gangs import WaitingGang, WaitingMember

if TYPE_CHECKING:
    from batchsched.runtime.scheduler import Scheduler

logger = logging.getLogger(__name__)


def group_ref(group: PodGroupView) -> ObjectRef:
    return ObjectRef(
        "scheduling.x-k8s.io/v1alpha1", "PodGroup", group.namespace, group.name, group.uid
    )


class GangCycle:
    def __init__(self, scheduler: Scheduler) -> None:
        self.s = scheduler
        self.gangs = scheduler.gangs

    def run(self, queued: QueuedPod, key: str) -> None:
        s = self.s
        pod = queued.pod
        runner = s.runner_for(pod)
        cycle = s.queue.scheduling_cycle()
        group = self.gangs.group(key)
        if group is None:
            s.queue.requeue_unschedulable(queued, cycle)
            s.report_failure(pod, self.gangs.missing_reason(key))
            return
        batch = [queued, *s.queue.take(self.gangs.members.get(key, set()) - {pod.uid})]
        # Not deleted, not bound, and not counted already (a reserved or binding member).
        snapshot = s.cache.snapshot
        live = [
            q
            for q in batch
            if not s.queue.was_deleted(q.pod.uid)
            and not q.pod.node_name
            and snapshot.node_of(q.pod.uid) is None
        ]
        for q in batch:
            if q not in live:
                s.queue.done(q.pod.uid)
        if not live:
            return
        if s.waits.quota_refuses(live, cycle):
            if key in self.gangs.waiting:
                self.release([key], "the gang's tenant quota does not allow the rest of it")
            return
        waiting = self.gangs.waiting.get(key)
        # A reserved member deleted since (the cache dropped it) holds nothing any more.
        reserved = tuple(
            r
            for r in (waiting.reservations() if waiting else ())
            if snapshot.node_of(r.pod.uid) is not None
        )
        request = GangRequest(
            group,
            tuple(sorted((q.pod for q in live), key=lambda p: p.name)),
            reserved,
            # Members bound before, and those that already ran to the end, count: a member
            # recreated after the rest finished (a Job's retry) is placed on its own.
            bound=self.gangs.counted(key, s.cache.snapshot)
            - len(reserved)
            + self.gangs.finished(key),
        )
        started = time.perf_counter()
        trial = s.cache.snapshot.begin_trial()
        decision = schedule_gang(
            request, s.cache.snapshot, runner, waiting=self.gangs.reservations()
        )
        s.counts.attempts += len(live)
        starting = s.waits.starting([(r.pod, r.node) for r in decision.placed])
        held = s.waits.placed_refused([(r.pod, r.node) for r in decision.placed])
        held = held or s.waits.held_back(key, max(q.pod.priority for q in live), starting)
        if held:  # it fits, but its quota or a reserved gang says no: nothing of it stays
            trial.discard()
            decision = GangDecision(key, Outcome.REJECT, unplaced=request.pending, message=held)
        else:
            trial.commit()
        self.release(decision.released, f"a complete gang ({key}) needed their capacity")
        by_uid = {q.pod.uid: q for q in live}
        elapsed = time.perf_counter() - started
        if decision.outcome is Outcome.BIND:
            s.waits.started(key, starting)
            s.preemptor_placed(key)
            self._bind(group, decision, by_uid, runner, elapsed)
        elif decision.outcome is Outcome.WAIT:
            self._wait(group, decision, by_uid, runner, elapsed)
        else:
            if not held:
                s.waits.blocked(key, [r.pod for r in reserved] + list(request.pending))
            # Preemption's candidates: every member still to place, the reserved ones included
            # (as pending pods: the rejection releases their reservations first).
            preemptors = [] if held else [q.pod for q in live]
            if waiting is not None and not held:
                preemptors += [m.queued.pod for m in waiting.members]
            self._reject(group, decision, live, cycle, runner, elapsed, preemptors)

    def _bind(
        self,
        group: PodGroupView,
        decision: GangDecision,
        by_uid: dict[str, QueuedPod],
        runner: ProfileRunner,
        elapsed: float,
    ) -> None:
        s = self.s
        members = self.gangs.take_waiting([group.key])
        for reservation in decision.placed:
            uid = reservation.pod.uid
            s.cache.assume(by_uid[uid].pod, reservation.node)
            members.append(WaitingMember(by_uid[uid], decision.results[uid], reservation))
        s.observe("scheduled", runner, elapsed)
        s.counts.scheduled += len(decision.placed)
        for member in members:
            s.spawn(s.bind(member.queued, runner, member.result))
        placed = {r.pod.uid for r in decision.placed}
        for uid, queued in by_uid.items():
            if uid not in placed:  # elastic surplus without room: tried again later
                s.queue.requeue_unschedulable(queued, s.queue.scheduling_cycle())
        self.gangs.dirty.add(group.key)
        # Each member gets its own Scheduled Event when bound, and the PodGroup's status says
        # Scheduled: no extra Event on the PodGroup (one API write per gang saved).
        logger.info("gang placed gang=%s members=%d", group.key, len(members))

    def _wait(
        self,
        group: PodGroupView,
        decision: GangDecision,
        by_uid: dict[str, QueuedPod],
        runner: ProfileRunner,
        elapsed: float,
    ) -> None:
        s = self.s
        gang = self.gangs.waiting.get(group.key)
        started_waiting = gang is None
        if gang is None:
            now = s.clock.now()
            gang = WaitingGang(now + self.gangs.timeout_of(group.key), since=now)
            self.gangs.waiting[group.key] = gang
        for reservation in decision.placed:
            uid = reservation.pod.uid
            s.cache.assume(by_uid[uid].pod, reservation.node)
            gang.members.append(WaitingMember(by_uid[uid], decision.results[uid], reservation))
        s.observe("scheduled", runner, elapsed)
        self.gangs.dirty.add(group.key)
        if started_waiting:  # one Event when the wait starts, not one per arriving member
            s.spawn(
                s.events.record(
                    group_ref(group), "Normal", "Waiting", "Scheduling", decision.message
                )
            )

    def _reject(
        self,
        group: PodGroupView,
        decision: GangDecision,
        live: list[QueuedPod],
        cycle: int,
        runner: ProfileRunner,
        elapsed: float,
        preemptors: list[PodView],
    ) -> None:
        s = self.s
        self.release([group.key], "the gang no longer fits as a whole")
        s.observe("unschedulable", runner, elapsed)
        s.counts.unschedulable += len(live)
        message = decision.message
        # PostFilter only for a complete gang: preempting for members that may never come
        # would evict for nothing.
        if preemptors and len(self.gangs.members.get(group.key, ())) >= group.min_member:
            pods = sorted(preemptors, key=lambda p: p.name)
            message = s.post_filter(group.key, pods, group, runner, message)
        for queued in live:
            s.queue.requeue_unschedulable(queued, cycle)
            s.report_failure(queued.pod, message)
        self.gangs.dirty.add(group.key)
        s.spawn(
            s.events.record(group_ref(group), "Warning", "FailedScheduling", "Scheduling", message)
        )

    def release(self, keys: tuple[str, ...] | list[str], why: str) -> None:
        """Give up the reservations of these waiting gangs; their members go back to the
        queue with backoff."""
        s = self.s
        for member in self.gangs.take_waiting(keys):
            pod, node = member.queued.pod, member.reservation.node
            if s.cache.snapshot.node_of(pod.uid) is not None:
                s.runner_for(pod).unreserve(member.result.state, pod, node, s.cache.snapshot)
            s.cache.forget(pod)
            s.queue.requeue_backoff(member.queued)
        for key in keys:
            group = self.gangs.group(key)
            logger.info("gang reservations released gang=%s why=%s", key, why)
            if group is not None:
                s.spawn(
                    s.events.record(
                        group_ref(group),
                        "Normal",
                        "ReservationReleased",
                        "Scheduling",
                        f"gang {key}: reservations released: {why}",
                    )
                )

    def expire(self, now: float) -> None:
        """Gangs that waited past scheduleTimeoutSeconds, or whose PodGroup was deleted."""
        timed_out = self.gangs.expired(now)
        if timed_out:
            self.release(timed_out, "members did not arrive within scheduleTimeoutSeconds")
        gone = sorted(self.gangs.deleted)
        if gone:
            self.release(gone, "the PodGroup was deleted")
        for key in self.gangs.newly_incomplete(self.s.cache.snapshot, now):
            self.report_incomplete(key)

    def report_incomplete(self, key: str) -> None:
        """A gang left bound below minMember past its timeout: say so, once. Its missing
        members stay in the queue and are placed as soon as room appears (they may preempt).
        The bound members are never deleted: they may be running, and a running pod is the
        user's (a gang that never ran would lose little, but telling the two apart races
        the kubelet; scheduler-plugins' Coscheduling never deletes either)."""
        s = self.s
        group = self.gangs.group(key)
        if group is None:
            return
        bound = self.gangs.counted(key, s.cache.snapshot) + self.gangs.finished(key)
        note = (
            f"gang {key}: only {bound} of minMember {group.min_member} members bound after "
            f"{self.gangs.timeout_of(key):g}s; the rest wait for room (the bound members are "
            "left running)"
        )
        logger.warning(
            "gang incomplete gang=%s bound=%d min_member=%d", key, bound, group.min_member
        )
        s.metrics.gang_incomplete.inc()
        s.spawn(s.events.record(group_ref(group), "Warning", "GangIncomplete", "Waiting", note))
