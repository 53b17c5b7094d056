"""What the live scheduler does with a cycle's decision: every write, requeue and Event.

  Bind   -> count the placements on their nodes (assume), end a preemptor's hold, start the
            binding tasks; a gang also binds the members it held at Permit;
  Wait   -> hold the gang's new reservations until its quorum arrives or its timeout passes
            (one `Waiting` Event when the wait starts);
  Reject -> requeue its pods (unschedulable, or with backoff after an error), give up a
            gang's reservations, ask preemption (PostFilter) when more room could help, and
            tell the user why (PodScheduled condition and a FailedScheduling Event).
Other gangs whose reservations gave way to a complete gang go back to the queue first.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

from batchsched.cycle.decision import Bind, Decision, Reject, Wait, Why
from batchsched.cycle.workload import Workload
from batchsched.framework.runner import ProfileRunner
from batchsched.gang.podgroup import PodGroupView
from batchsched.gang.status import NotStarted
from batchsched.model.pod import PodView
from batchsched.runtime.backfill_waits import BackfillWaits
from batchsched.runtime.binding import Binding
from batchsched.runtime.gang_waits import GangWaits, group_ref
from batchsched.runtime.gangs import WaitingGang, WaitingMember
from batchsched.runtime.live import Live
from batchsched.runtime.workloads import Batch

logger = logging.getLogger(__name__)

_HELD = (Why.QUOTA_PLACED, Why.BACKFILL)


class Effects:
    def __init__(self, live: Live, binding: Binding, gangs: GangWaits, waits: BackfillWaits):
        self.live = live
        self.binding = binding
        self.gang_waits = gangs
        self.waits = waits

    def apply(
        self, workload: Workload, batch: Batch, decision: Decision, cycle: int, started: float
    ) -> None:
        """`cycle`: the queue's scheduling cycle when the workload was popped; `started`:
        when its cycle began (perf_counter)."""
        if isinstance(decision, Reject) and decision.why in (Why.QUOTA, Why.NO_GROUP):
            self._not_tried(workload, batch, decision, cycle)
            return
        self.live.counts.attempts += len(batch)
        if workload.gang:
            self._gang(workload, batch, decision, cycle, started)
        else:
            self._pod(workload, batch, decision, cycle, started)

    def _not_tried(self, workload: Workload, batch: Batch, decision: Reject, cycle: int) -> None:
        live = self.live
        for queued in batch.values():
            live.queue.requeue_unschedulable(queued, cycle)
            self.binding.report_failure(queued.pod, decision.message)
        if decision.why is Why.NO_GROUP:
            return
        pods = list(workload.pods)
        if live.tenants is not None:
            live.tenants.rejected(pods, decision.message.removeprefix("quota: "))
        if live.backfill is not None:
            live.backfill.unblock(workload.key)
        live.counts.unschedulable += len(pods)
        if workload.gang and workload.key in live.gangs.waiting:
            why = "the gang's tenant quota does not allow the rest of it"
            self.gang_waits.release([workload.key], why)

    def _count_held(self, workload: Workload, decision: Reject) -> None:
        live = self.live
        if decision.why is Why.QUOTA_PLACED and live.tenants is not None:
            live.tenants.rejected(list(workload.pods), decision.message.removeprefix("quota: "))
        elif decision.why is Why.BACKFILL:
            live.metrics.backfill_held.inc()

    # A lone pod

    def _pod(
        self, workload: Workload, batch: Batch, decision: Decision, cycle: int, started: float
    ) -> None:
        live = self.live
        queued = batch[workload.pods[0].uid]
        pod = queued.pod
        runner = live.runner_for(pod)
        live.metrics.algorithm_duration.observe(_since(started))
        if isinstance(decision, Bind):
            self.waits.started(workload.key, decision.starts)
            live.cache.assume(pod, decision.placed[0].node)
            self.preemptor_placed(workload.key)
            live.counts.scheduled += 1
            self.binding.start(queued, runner, decision.results[pod.uid], cycle_started=started)
            return
        assert isinstance(decision, Reject)
        if decision.why in _HELD:
            self._count_held(workload, decision)
            live.queue.requeue_unschedulable(queued, cycle)
            self.binding.report_failure(pod, decision.message)
            return
        message = decision.message
        error = decision.why is Why.ERROR
        live.observe("error" if error else "unschedulable", runner, _since(started))
        if error:
            live.counts.errors += 1
            logger.error("scheduling error pod=%s error=%s", pod.key, message)
            live.queue.requeue_backoff(queued)
        else:
            live.counts.unschedulable += 1
            logger.debug("unschedulable pod=%s reason=%s", pod.key, message)
            live.queue.requeue_unschedulable(queued, cycle)
            if decision.why is Why.UNSCHEDULABLE:  # not UNRESOLVABLE: no eviction can help
                message = self.post_filter(workload.key, [pod], None, runner, message)
            # After PostFilter: a preemptor gets no backfill reservation, so its plan's dry
            # runs and its cycle add no reservation to the backfill plan only to take it out.
            self.waits.blocked(workload.key, [pod])
        self.binding.report_failure(pod, message)

    # A gang

    def _gang(
        self, workload: Workload, batch: Batch, decision: Decision, cycle: int, started: float
    ) -> None:
        group = workload.group
        assert group is not None
        key = workload.key
        runner = self.live.runner_for(workload.pods[0])
        if isinstance(decision, Bind):
            why = f"a complete gang ({key}) needed their capacity"
            self.gang_waits.release(decision.released, why)
            self.waits.started(key, decision.starts)
            self.preemptor_placed(key)
            self._bind(group, decision, batch, runner, started)
        elif isinstance(decision, Wait):
            self._wait(group, decision, batch, runner, started)
        else:
            held = decision.why in _HELD
            preemptors: list[PodView] = []
            blocking = [] if held else [r.pod for r in workload.reserved] + list(workload.pods)
            if held:
                self._count_held(workload, decision)
            if decision.why is Why.UNSCHEDULABLE:
                # Preemption's candidates: every member still to place, the reserved ones
                # included (as pending pods: the rejection releases their reservations first).
                preemptors = list(workload.pods)
                waiting = self.live.gangs.waiting.get(key)
                if waiting is not None:
                    preemptors += [m.queued.pod for m in waiting.members]
            self._reject(group, decision, batch, cycle, runner, started, preemptors)
            if blocking:  # after PostFilter, as for a pod: a preemptor gets no reservation
                self.waits.blocked(key, blocking)

    def _observe_whole(self, group: PodGroupView, decision: Bind) -> None:
        """Time to whole, once per gang: only when no member is on a node but the ones this
        cycle placed and the waiting ones (a later elastic bind is not a new start)."""
        gangs = self.live.gangs
        waiting = gangs.waiting.get(group.key)
        new = {r.pod.uid for r in decision.placed}
        new |= {m.queued.pod.uid for m in waiting.members} if waiting is not None else set()
        snapshot = self.live.cache.snapshot
        on_nodes = {u for u in gangs.members.get(group.key, ()) if snapshot.node_of(u)}
        if on_nodes <= new and gangs.finished(group.key) == 0:
            elapsed = max(0.0, time.time() - group.creation_time)
            self.live.metrics.gang_time_to_whole.observe(elapsed)

    def _bind(
        self,
        group: PodGroupView,
        decision: Bind,
        batch: Batch,
        runner: ProfileRunner,
        started: float,
    ) -> None:
        live = self.live
        self._observe_whole(group, decision)
        members = live.gangs.take_waiting([group.key])
        live.gangs.rejections.pop(group.key, None)
        for reservation in decision.placed:
            uid = reservation.pod.uid
            live.cache.assume(batch[uid].pod, reservation.node)
            members.append(WaitingMember(batch[uid], decision.results[uid], reservation))
        live.observe("scheduled", runner, _since(started))
        live.counts.scheduled += len(decision.placed)
        for member in members:
            self.binding.start(member.queued, runner, member.result)
        placed = {r.pod.uid for r in decision.placed}
        for uid, queued in batch.items():
            if uid not in placed:  # elastic surplus without room: tried again later
                live.queue.requeue_unschedulable(queued, live.queue.scheduling_cycle())
                result = decision.results.get(uid)
                if result is not None:
                    self.binding.report_failure(queued.pod, result.message())
        live.gangs.dirty.add(group.key)
        # Each member gets its own Scheduled Event when bound, and the PodGroup's status says
        # Scheduled: no extra Event on the PodGroup (one API write per gang saved).
        logger.info("gang placed gang=%s members=%d", group.key, len(members))

    def _wait(
        self,
        group: PodGroupView,
        decision: Wait,
        batch: Batch,
        runner: ProfileRunner,
        started: float,
    ) -> None:
        live = self.live
        gang = live.gangs.waiting.get(group.key)
        if gang is None:
            now = live.clock.now()
            gang = WaitingGang(now + live.gangs.timeout_of(group.key), since=now)
            live.gangs.waiting[group.key] = gang
        for reservation in decision.placed:
            uid = reservation.pod.uid
            live.cache.assume(batch[uid].pod, reservation.node)
            gang.members.append(WaitingMember(batch[uid], decision.results[uid], reservation))
        live.observe("scheduled", runner, _since(started))
        live.gangs.dirty.add(group.key)
        # Why it has not started yet: members are missing. The Waiting Event says it once the
        # wait has lasted (GangWaits.announce): most gangs' last members are seconds behind
        # the first, and an Event per such wait was an API write per gang for nothing.
        live.gangs.rejections[group.key] = NotStarted(decision.message, short_of_members=True)

    def _reject(
        self,
        group: PodGroupView,
        decision: Reject,
        batch: Batch,
        cycle: int,
        runner: ProfileRunner,
        started: float,
        preemptors: Sequence[PodView],
    ) -> None:
        live = self.live
        self.gang_waits.release([group.key], "the gang no longer fits as a whole")
        live.observe("unschedulable", runner, _since(started))
        live.counts.unschedulable += len(batch)
        message = decision.message
        if preemptors:  # only for Why.UNSCHEDULABLE: a complete gang more room would help
            pods = sorted(preemptors, key=lambda p: p.name)
            message = self.post_filter(group.key, pods, group, runner, message)
        for queued in batch.values():
            live.queue.requeue_unschedulable(queued, cycle)
            # Each member's condition says why; the one Event on the gang below says it
            # for all of them (a 16-member gang retried on every cluster event made 16).
            self.binding.report_failure(queued.pod, message, event=False)
        live.gangs.dirty.add(group.key)
        short = decision.why is Why.INCOMPLETE
        live.gangs.rejections[group.key] = NotStarted(message, short_of_members=short)
        live.record(group_ref(group), "Warning", "FailedScheduling", "Scheduling", message)

    # Preemption (runtime/preempting.py): PostFilter, and the end of a preemptor's hold.

    def post_filter(
        self,
        key: str,
        pods: Sequence[PodView],
        group: PodGroupView | None,
        runner: ProfileRunner,
        message: str,
    ) -> str:
        """The failure message, with what preemption did about it."""
        live = self.live
        if live.preempting is None:
            return message
        decision = live.preempting.decide(key, pods, group, runner)  # pure: Preempt
        preemption = live.preempting.act(key, pods, group, decision)
        if live.backfill is not None and live.preempting_now(key):
            live.backfill.unblock(key)  # its capacity is held while the victims go
        return f"{message}; {preemption}" if preemption else message

    def preemptor_placed(self, key: str) -> None:
        if self.live.preempting is not None:
            self.live.preempting.placed(key)


def _since(started: float) -> float:
    return time.perf_counter() - started
