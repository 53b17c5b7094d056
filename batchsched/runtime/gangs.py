"""What the live scheduler knows about gangs: PodGroups, their member pods, and the members
that hold reservations while waiting at Permit for the rest of their gang.

Kept out of the pure core on purpose: this is watch-fed state with deadlines. The decision
of where a gang goes is `batchsched.gang.core.schedule_gang`.
"""

from __future__ import annotations

import logging
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from batchsched.framework.interfaces import QueuedPod
from batchsched.framework.runner import ScheduleResult
from batchsched.gang.core import Reservation
from batchsched.gang.encodings import kueue_group
from batchsched.gang.podgroup import (
    FAILED,
    FINISHED,
    PENDING,
    RUNNING,
    SCHEDULED,
    SCHEDULING,
    PodGroupView,
    pod_group_of,
)
from batchsched.gang.status import NotStarted
from batchsched.model.errors import InvalidObject
from batchsched.model.gang_ref import GangApi, gang_key, gang_refs
from batchsched.model.pod import PodView
from batchsched.snapshot import Snapshot

logger = logging.getLogger(__name__)

DEFAULT_SCHEDULE_TIMEOUT_S = 60.0
_TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})


@dataclass
class WaitingMember:
    queued: QueuedPod
    result: ScheduleResult  # its cycle's state and node, for binding or unreserving later
    reservation: Reservation


@dataclass
class WaitingGang:
    deadline: float  # monotonic; the reservations are released when it passes
    since: float = 0.0  # monotonic; when the first member was reserved
    announced: bool = False  # its Waiting Event was posted (runtime/gang_waits.py)
    members: list[WaitingMember] = field(default_factory=list)

    def reservations(self) -> tuple[Reservation, ...]:
        return tuple(m.reservation for m in self.members)


class GangTracker:
    """Fed by the PodGroup informer (as its handler) and by the pod handler (membership)."""

    def __init__(
        self,
        on_group_added: Callable[[], None] = lambda: None,
        default_timeout: float = DEFAULT_SCHEDULE_TIMEOUT_S,
    ) -> None:
        self.groups: dict[str, PodGroupView] = {}
        self.invalid: dict[str, str] = {}  # key -> why the PodGroup could not be read
        self.members: dict[str, set[str]] = defaultdict(set)  # key -> member pod uids
        self.waiting: dict[str, WaitingGang] = {}
        self.deleted: set[str] = set()  # groups deleted while members waited: to release
        self.dirty: set[str] = set()  # groups whose status should be written
        self.partial_since: dict[str, float] = {}  # bound below minMember since (monotonic)
        self.incomplete_reported: set[str] = set()  # partial gangs already told about
        self.quorum_reached: set[str] = set()  # gangs that had minMember bound at some point
        # key -> members deleted after they ran to the end, by phase (Succeeded, Failed)
        self.finished_gone: dict[str, Counter[str]] = {}
        self.phases: dict[str, str] = {}  # member uid -> its pod's phase
        self.schedule_start: dict[str, float] = {}  # key -> wall time it was first scheduled
        self.final: dict[str, str] = {}  # key -> Finished or Failed, which never change back
        # key -> why its last cycle did not start it: rejected, or waiting for members
        # (upstream and Volcano status say it)
        self.rejections: dict[str, NotStarted] = {}
        self.default_timeout = default_timeout
        self._on_group_added = on_group_added

    # PodGroup informer handler

    def on_add(self, group: PodGroupView) -> None:
        # No status write here: a PodGroup without status is Pending; writing it would cost
        # one API write per gang for nothing (and our own status write comes back as an
        # update).
        self.groups[group.key] = group
        self.invalid.pop(group.key, None)
        if group.api is GangApi.VOLCANO and group.recorded_phase in ("", "Pending"):
            # Volcano's controllers create the pods only once the group leaves Pending.
            self.dirty.add(group.key)
        self._on_group_added()

    def on_update(self, old: PodGroupView, new: PodGroupView) -> None:
        self.groups[new.key] = new
        self.invalid.pop(new.key, None)
        # Only a change that can make a gang fit sends waiting pods back: our own status and
        # annotation writes (estimated start, preemption progress) come back as updates too.
        if (old.min_member, old.min_resources, old.schedule_timeout_seconds) != (
            new.min_member,
            new.min_resources,
            new.schedule_timeout_seconds,
        ):
            self._on_group_added()

    def on_delete(self, group: PodGroupView) -> None:
        self.groups.pop(group.key, None)
        self.final.pop(group.key, None)  # a group recreated under the name starts afresh
        self.schedule_start.pop(group.key, None)
        self.quorum_reached.discard(group.key)
        self.finished_gone.pop(group.key, None)
        self.incomplete_reported.discard(group.key)
        self.partial_since.pop(group.key, None)
        self.rejections.pop(group.key, None)
        if group.key in self.waiting:
            self.deleted.add(group.key)

    def mark_invalid(
        self,
        raw: Mapping[str, object],
        error: Exception,
        api: GangApi = GangApi.SCHEDULER_PLUGINS,
    ) -> None:
        meta = raw.get("metadata")
        if isinstance(meta, Mapping):
            namespace = str(meta.get("namespace", "default"))
            key = gang_key(api, namespace, str(meta.get("name", "")))
            self.invalid[key] = str(error)
            self.groups.pop(key, None)

    # Membership, from the pod handler

    def note_pod(self, pod: PodView) -> None:
        key = pod_group_of(pod)
        if key is not None:
            kueue = key.startswith(GangApi.KUEUE.prefix)
            if kueue and (key not in self.members or key in self.invalid):
                # Its first member describes it; one whose count was unreadable is read
                # again from the next member to arrive.
                self._note_kueue_group(pod, key)
            self.members[key].add(pod.uid)
            if self.phases.get(pod.uid) != pod.phase:
                self.phases[pod.uid] = pod.phase
                self.dirty.add(key)  # running/succeeded/failed counts move

    def forget_pod(self, pod: PodView) -> None:
        key = pod_group_of(pod)
        phase = self.phases.pop(pod.uid, None)
        if key is not None and phase in _TERMINAL_PHASES and key in self.groups:
            # A finished member garbage-collected (or deleted) still ran: it keeps counting.
            self.finished_gone.setdefault(key, Counter())[phase] += 1
        if key is not None and key in self.members:
            self.members[key].discard(pod.uid)
            if not self.members[key]:
                del self.members[key]
                if key.startswith(GangApi.KUEUE.prefix):  # a group of pods: gone with them
                    self.groups.pop(key, None)
                    self.invalid.pop(key, None)

    def _note_kueue_group(self, pod: PodView, key: str) -> None:
        """A Kueue plain-pod group has no object: its first member describes it."""
        name = gang_refs(pod.labels, pod.annotations, pod.scheduling_group)[0].name
        try:
            self.groups[key] = kueue_group(pod, name)
        except InvalidObject as err:
            self.invalid[key] = str(err)
            return
        self.invalid.pop(key, None)
        self._on_group_added()

    def queue_of(self, pod: PodView) -> str:
        """The queue the pod's gang names in its producer's API (Volcano's spec.queue,
        Kueue's queue-name label); "" when none."""
        key = pod_group_of(pod)
        group = self.groups.get(key) if key is not None else None
        return group.queue if group is not None else ""

    # Questions the scheduling loop asks

    def group(self, key: str) -> PodGroupView | None:
        return self.groups.get(key)

    def missing_reason(self, key: str) -> str:
        if key in self.invalid and key.startswith(GangApi.KUEUE.prefix):
            return f"Kueue pod group {key} is not scheduled: {self.invalid[key]}"
        if key in self.invalid:
            return f"PodGroup {key} is invalid and is not scheduled: {self.invalid[key]}"
        if key.startswith(GangApi.KUEUE.prefix):
            return f"Kueue pod group {key} is not known yet"
        return f"PodGroup {key} not found; the pod waits for it to be created"

    def counted(self, key: str, snapshot: Snapshot) -> int:
        """Members the snapshot counts on a node: bound, binding, or reserved and waiting."""
        return sum(1 for uid in self.members.get(key, ()) if snapshot.node_of(uid) is not None)

    def reservations(self) -> dict[str, tuple[Reservation, ...]]:
        return {key: gang.reservations() for key, gang in self.waiting.items()}

    def timeout_of(self, key: str) -> float:
        group = self.groups.get(key)
        if group is not None and group.schedule_timeout_seconds is not None:
            return float(group.schedule_timeout_seconds)
        return self.default_timeout

    def expired(self, now: float) -> list[str]:
        return [key for key, gang in self.waiting.items() if gang.deadline <= now]

    def created(self, key: str) -> float | None:
        """GangSort's question: the PodGroup's creation time."""
        group = self.groups.get(key)
        return group.creation_time if group is not None else None

    def settled(self, key: str, now: float, grace: float) -> bool:
        """Whether a status write for `key` is worth it now: a gang that started waiting less
        than `grace` ago usually completes within it, so its short-lived "Scheduling" phase
        is not written (one status write per gang instead of two, under a burst)."""
        gang = self.waiting.get(key)
        return gang is None or now - gang.since >= grace

    def status_of(
        self, key: str, snapshot: Snapshot, wall: float | None = None
    ) -> dict[str, object]:
        """PodGroup status as scheduler-plugins' API has it: the phase, how many members are
        scheduled, running, succeeded and failed, and when scheduling started (`wall`: now,
        seconds since the epoch, remembered the first time the gang is scheduled). Phases
        move Pending -> Scheduling -> Scheduled -> Running, and end in Finished (minMember
        members succeeded) or Failed (a member failed and the gang cannot make it up)."""
        group = self.groups[key]
        waiting = len(self.waiting[key].members) if key in self.waiting else 0
        phases = [self.phases.get(uid, "") for uid in self.members.get(key, ())]
        running = phases.count("Running")
        succeeded, failed = self._ended(key, phases)
        scheduled = self.counted(key, snapshot) - waiting + succeeded + failed
        status: dict[str, object] = {
            "phase": self._phase(
                key, group.min_member, scheduled, waiting, (running, succeeded, failed)
            ),
            "scheduled": scheduled,
            "running": running,
            "succeeded": succeeded,
            "failed": failed,
        }
        if scheduled and wall is not None and key not in self.schedule_start:
            # A start the object shows (a former leader wrote it) stands: a new leader's own
            # time would rewrite every started gang's status on a failover.
            self.schedule_start[key] = _wall_of(group.recorded_start) or wall
        if key in self.schedule_start:
            status["scheduleStartTime"] = rfc3339(self.schedule_start[key])
        return status

    def _phase(
        self, key: str, need: int, scheduled: int, waiting: int, counts: tuple[int, int, int]
    ) -> str:
        running, succeeded, failed = counts
        if key in self.final:
            return self.final[key]
        if succeeded >= need:
            self.final[key] = FINISHED
        elif failed and failed + running + succeeded >= need:
            self.final[key] = FAILED
        if key in self.final:
            return self.final[key]
        if running + succeeded >= need:
            return RUNNING
        if scheduled >= need:
            return SCHEDULED
        return SCHEDULING if waiting or scheduled else PENDING

    def finished(self, key: str) -> int:
        """Members that ran to the end (Succeeded or Failed): they count toward the quorum,
        as they were bound once and their gang did start."""
        phases = [self.phases.get(uid, "") for uid in self.members.get(key, ())]
        return sum(self._ended(key, phases))

    def _ended(self, key: str, phases: list[str]) -> tuple[int, int]:
        """(succeeded, failed) members: those seen, plus those deleted after they ended. A
        replica that was not watching when they went knows them from the PodGroup's status,
        which the leader writes with the same counts: the larger of the two stands."""
        gone = self.finished_gone.get(key, Counter())
        succeeded = phases.count("Succeeded") + gone["Succeeded"]
        failed = phases.count("Failed") + gone["Failed"]
        group = self.groups.get(key)
        if group is not None:
            succeeded = max(succeeded, group.recorded_succeeded)
            failed = max(failed, group.recorded_failed)
        return succeeded, failed

    def newly_incomplete(self, snapshot: Snapshot, now: float) -> list[str]:
        """Gangs bound below minMember for longer than their timeout (a binding failed and
        the missing members found no room since), each reported once per episode. Bound,
        binding and finished members count; a gang that recovered or holds nothing is
        cleared. The scheduler never deletes them: see docs/operations.md, "What the
        scheduler never does to a running pod"."""
        overdue = []
        for key, group in self.groups.items():
            if key in self.quorum_reached:
                continue  # it started whole once: members that end or go are its own affair
            counted = 0 if key in self.waiting else self.counted(key, snapshot)
            have = counted + self.finished(key)
            if have >= group.min_member:
                self.quorum_reached.add(key)
            if counted == 0 or have >= group.min_member:
                self.partial_since.pop(key, None)
                self.incomplete_reported.discard(key)
                continue
            since = self.partial_since.setdefault(key, now)
            if now - since > self.timeout_of(key) and key not in self.incomplete_reported:
                self.incomplete_reported.add(key)
                overdue.append(key)
        return overdue

    def take_waiting(self, keys: Iterable[str]) -> list[WaitingMember]:
        released: list[WaitingMember] = []
        for key in keys:
            gang = self.waiting.pop(key, None)
            self.deleted.discard(key)
            if gang is not None:
                released.extend(gang.members)
                self.dirty.add(key)
        return released


def rfc3339(wall: float) -> str:
    return datetime.fromtimestamp(wall, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _wall_of(text: str) -> float | None:
    """Seconds since the epoch of an RFC 3339 time; None when empty or unreadable."""
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() if text else None
    except ValueError:
        return None
