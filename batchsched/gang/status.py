"""A gang's status in the terms of the API that described it. Pure.

The runtime computes one status per gang in scheduler-plugins' terms (GangTracker.status_of:
phase Pending, Scheduling, Scheduled, Running, Finished or Failed, and member counts); this
module says what that is in each API:

- scheduler-plugins: as computed.
- upstream (scheduling.k8s.io/v1alpha2): the `PodGroupScheduled` condition, as kube-scheduler
  1.36 writes it: True with reason Scheduled once minCount members are placed, False with
  reason Unschedulable and the scheduler's message while it cannot be; never back from True
  to False (members added later do not make a started group unscheduled).
- Volcano: phase Inqueue until it runs, then Running, Completed, or Unknown (failed: minMember
  can no longer be met); running/succeeded/failed counts; one condition, Scheduled or
  Unschedulable (reason NotEnoughResources or NotEnoughTasks). Inqueue from the start, not
  Pending: Volcano's job controller (and the training operator's Volcano mode) create a job's
  pods only once its PodGroup has left Pending, which Volcano's own enqueue step does; here
  quota and room are judged when the pods are scheduled, so every group is admitted at once.
- Kueue plain-pod groups: nothing (there is no object; the pods' conditions and Events say it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from batchsched.gang.podgroup import (
    FAILED,
    FINISHED,
    PENDING,
    RUNNING,
    SCHEDULED,
    SCHEDULING,
    PodGroupView,
)
from batchsched.model.gang_ref import GangApi

K8S_CONDITION: Final = "PodGroupScheduled"
_VOLCANO_PHASES: Final = {
    PENDING: "Inqueue",
    SCHEDULING: "Inqueue",
    SCHEDULED: "Inqueue",
    RUNNING: "Running",
    FINISHED: "Completed",
    FAILED: "Unknown",
}
_STARTED: Final = frozenset({SCHEDULED, RUNNING, FINISHED, FAILED})


@dataclass(frozen=True, slots=True)
class StatusWrite:
    """What to write: `status` as a patch of the object's status. `merge_conditions`: the
    conditions list merges by type (a built-in type's strategic merge patch), so conditions
    other writers own are kept."""

    status: Mapping[str, object]
    merge_conditions: bool = False

    def fingerprint(self) -> dict[str, object]:
        """The status without transition times: what says whether a write repeats the last."""
        conditions = self.status.get("conditions")
        if not isinstance(conditions, list):
            return dict(self.status)
        timeless = [
            {k: v for k, v in c.items() if k != "lastTransitionTime"}
            for c in conditions
            if isinstance(c, Mapping)
        ]
        return {**self.status, "conditions": timeless}


@dataclass(frozen=True, slots=True)
class NotStarted:
    """Why a gang's last cycle did not start it: its message, and whether the reason is that
    members are missing (waiting for them, or too few to try) rather than room."""

    message: str
    short_of_members: bool = False


def status_write(
    group: PodGroupView, status: Mapping[str, object], held: NotStarted | None, now: str
) -> StatusWrite | None:
    """`status`: scheduler-plugins' terms; `held`: why the gang's last cycle did not start
    it (None when it did, or none ran); `now`: RFC 3339, for transition times. None: nothing
    to write for this API now."""
    api = group.api
    if api is GangApi.SCHEDULER_PLUGINS:
        return StatusWrite(status)
    if api is GangApi.KUBERNETES:
        return _k8s(group, str(status.get("phase", "")), held, now)
    if api is GangApi.VOLCANO:
        return _volcano(status, held, group.min_member, now)
    return None


def shows(group: PodGroupView, write: StatusWrite) -> bool:
    """Whether the PodGroup, as last read, already shows what `write` would write: then the
    write would change nothing but the API server's load. Only scheduler-plugins' status is
    compared (its fields are the ones we write, and a status that is absent reads as Pending
    with no member counted: the state a PodGroup starts in without a controller); other APIs
    decide what to skip in `status_write`."""
    if group.api is not GangApi.SCHEDULER_PLUGINS or write.merge_conditions:
        return False
    recorded: dict[str, object] = {
        "phase": group.recorded_phase or PENDING,
        "scheduled": group.recorded_scheduled,
        "running": group.recorded_running,
        "succeeded": group.recorded_succeeded,
        "failed": group.recorded_failed,
    }
    if group.recorded_start:
        recorded["scheduleStartTime"] = group.recorded_start
    return dict(write.status) == recorded


def _k8s(group: PodGroupView, phase: str, held: NotStarted | None, now: str) -> StatusWrite | None:
    if phase in _STARTED:
        if group.scheduled == "True":
            return None  # as it stands (a new leader would rewrite only the transition time)
        value, reason, message = "True", "Scheduled", f"{group.min_member} pod(s) placed together"
    elif held is not None and group.scheduled != "True":
        value, reason, message = "False", "Unschedulable", held.message
    else:
        return None
    condition = {
        "type": K8S_CONDITION,
        "status": value,
        "reason": reason,
        "message": message,
        # The time the status last changed; what we last wrote is remembered by the writer,
        # so a repeat of the same status is not written again with a new time.
        "lastTransitionTime": now,
    }
    return StatusWrite({"conditions": [condition]}, merge_conditions=True)


def _volcano(
    status: Mapping[str, object], held: NotStarted | None, min_member: int, now: str
) -> StatusWrite:
    phase = str(status.get("phase", ""))
    if phase in _STARTED:
        condition = {"type": "Scheduled", "status": "True", "reason": "Scheduled"}
        condition["message"] = f"{min_member} pod(s) placed together"
    elif held is not None:
        condition = {
            "type": "Unschedulable",
            "status": "True",
            "reason": "NotEnoughTasks" if held.short_of_members else "NotEnoughResources",
            "message": held.message,
        }
    else:
        condition = {}
    written: dict[str, object] = {
        "phase": _VOLCANO_PHASES.get(phase, "Inqueue"),
        "running": status.get("running", 0),
        "succeeded": status.get("succeeded", 0),
        "failed": status.get("failed", 0),
    }
    if condition:
        written["conditions"] = [{**condition, "lastTransitionTime": now}]
    return StatusWrite(written)
