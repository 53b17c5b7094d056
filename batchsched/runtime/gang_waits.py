"""Gangs waiting at Permit: their reservations given up, their timers, and gangs left short.

A waiting gang's reserved members go back to the queue (with backoff) when a complete gang
needs their capacity, when the gang no longer fits as a whole, when its quota no longer allows
the rest, when scheduleTimeoutSeconds passes, or when its PodGroup is deleted. A gang left
bound below minMember past its timeout is reported once, and its bound members are left alone.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from batchsched.gang.podgroup import PodGroupView
from batchsched.kube.binder import ObjectRef
from batchsched.model.gang_ref import GangApi
from batchsched.runtime.live import Live

logger = logging.getLogger(__name__)

# A gang waiting for members this long gets its Waiting Event; one whose last members arrive
# sooner gets none (as its PodGroup gets no "Scheduling" status write: app_housekeeping.py).
WAIT_EVENT_AFTER_S = 2.0


def group_ref(group: PodGroupView) -> ObjectRef:
    """What Events about a gang are posted on: its PodGroup, in the API it came from; a Kueue
    group has no object, so its first member pod stands for it."""
    if group.api is GangApi.KUEUE:
        return ObjectRef("v1", "Pod", group.namespace, group.event_pod, "")
    return ObjectRef(group.api.value, "PodGroup", group.namespace, group.name, group.uid)


class GangWaits:
    def __init__(self, live: Live) -> None:
        self.live = live

    def release(self, keys: Sequence[str], why: str) -> None:
        """Give up the reservations of these waiting gangs; their members go back to the
        queue with backoff."""
        live = self.live
        snapshot = live.cache.snapshot
        for member in live.gangs.take_waiting(keys):
            pod, node = member.queued.pod, member.reservation.node
            if snapshot.node_of(pod.uid) is not None:
                live.runner_for(pod).unreserve(member.result.state, pod, node, snapshot)
            live.cache.forget(pod)
            live.queue.requeue_backoff(member.queued)
        for key in keys:
            group = live.gangs.group(key)
            logger.info("gang reservations released gang=%s why=%s", key, why)
            if group is not None:
                note = f"gang {key}: reservations released: {why}"
                live.record(group_ref(group), "Normal", "ReservationReleased", "Scheduling", note)

    def expire(self, now: float) -> None:
        """Gangs that waited past scheduleTimeoutSeconds, or whose PodGroup was deleted."""
        gangs = self.live.gangs
        timed_out = gangs.expired(now)
        if timed_out:
            self.release(timed_out, "members did not arrive within scheduleTimeoutSeconds")
        gone = sorted(gangs.deleted)
        if gone:
            self.release(gone, "the PodGroup was deleted")
        for key in gangs.newly_incomplete(self.live.cache.snapshot, now):
            self.report_incomplete(key)
        self.announce(now)

    def announce(self, now: float) -> None:
        """One Waiting Event per wait that has lasted `WAIT_EVENT_AFTER_S`, saying why it
        waits as the gang's last cycle said it (members missing)."""
        gangs = self.live.gangs
        for key, gang in gangs.waiting.items():
            if gang.announced or now - gang.since < WAIT_EVENT_AFTER_S:
                continue
            gang.announced = True
            group, held = gangs.group(key), gangs.rejections.get(key)
            if group is not None and held is not None:
                note = held.message
                self.live.record(group_ref(group), "Normal", "Waiting", "Scheduling", note)

    def report_incomplete(self, key: str) -> None:
        """A gang left bound below minMember past its timeout: say so, once. Its missing
        members stay in the queue and are placed as soon as room appears (they may preempt).
        The bound members are never deleted: they may be running, and a running pod is the
        user's (a gang that never ran would lose little, but telling the two apart races
        the kubelet; scheduler-plugins' Coscheduling never deletes either)."""
        live = self.live
        group = live.gangs.group(key)
        if group is None:
            return
        bound = live.gangs.counted(key, live.cache.snapshot) + live.gangs.finished(key)
        note = (
            f"gang {key}: only {bound} of minMember {group.min_member} members bound after "
            f"{live.gangs.timeout_of(key):g}s; the rest wait for room (the bound members are "
            "left running)"
        )
        logger.warning(
            "gang incomplete gang=%s bound=%d min_member=%d", key, bound, group.min_member
        )
        live.metrics.gang_incomplete.inc()
        live.record(group_ref(group), "Warning", "GangIncomplete", "Waiting", note)
