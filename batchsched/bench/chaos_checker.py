"""The chaos soak's independent checker: invariants over what the API server shows.

Purely computational, and independent of the scheduler: it reads raw API objects (dicts as
the watch delivers them) and shares no code with batchsched but quantity parsing. Its I/O
shell (chaos_watch.py) feeds it pods, nodes, PodGroups and Events from its own watches,
straight to the API server; `tick` runs the timed checks, `finish` the final ones.

Checked all the time (DESIGN.md invariants 1, 2, 5 and 7):
- over-commit: the non-terminal pods bound to a node (terminating ones included, as
  kube-scheduler counts them) never request more cpu, memory, pods or any extended resource
  than the node's allocatable;
- partial-gang: a gang never stays with some members bound but fewer than minMember bound or
  finished for longer than its scheduleTimeoutSeconds + slack (a gang the bench itself broke,
  by deleting a running member, is exempt until it is whole again or empty);
- running-pod-deleted: a bound, non-terminal pod that gets a deletionTimestamp or disappears,
  and that the bench did not delete, has a `Preempted` Event from the scheduler within
  `event_grace_s` (the scheduler posts it after the eviction);
- bound-twice: a pod's nodeName, once set, never changes for the same uid.
At the end:
- gang-unfinished: every gang the bench expects has all members Succeeded (a gang with a
  member the bench made fail: all members terminal).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final

from batchsched.bench.chaos_pods import (
    TERMINAL,
    PodState,
    amounts,
    clock,
    finished_by_itself,
    occupies,
    parse_pod,
    str_at,
)

# What batchsched posts on each victim it evicts (runtime/preempting.py), and as whom.
PREEMPTED_REASON: Final = "Preempted"
SCHEDULER_CONTROLLER: Final = "gpu-scheduler"


@dataclass(frozen=True)
class Violation:
    kind: str
    at: float  # wall clock, seconds
    subject: str
    detail: str


@dataclass
class GangState:
    min_member: int | None = None  # from the PodGroup, else what the bench expects
    timeout_s: float | None = None
    members: dict[str, str] = field(default_factory=dict)  # pod name -> current uid
    # Members whose pod finished by itself (Succeeded, or Failed before any deletion) and is
    # gone since: a victim's grace period can end in Succeeded, and that member did its work.
    finished: dict[str, str] = field(default_factory=dict)
    expected: tuple[str, ...] = ()
    may_fail: bool = False
    partial_since: float | None = None
    reported: bool = False
    bench_degraded: bool = False


@dataclass
class Suspect:
    pod: PodState
    at: float
    how: str


class Checker:
    def __init__(
        self,
        *,
        slack_s: float = 30.0,
        event_grace_s: float = 60.0,
        default_timeout_s: float = 60.0,
    ) -> None:
        self.slack_s = slack_s
        self.event_grace_s = event_grace_s
        self.default_timeout_s = default_timeout_s
        self.violations: list[Violation] = []
        self.pods: dict[str, PodState] = {}  # by uid
        self.nodes: dict[str, dict[str, int]] = {}  # name -> allocatable (milli)
        self.on_node: dict[str, set[str]] = {}  # node -> uids of non-terminal bound pods
        self.gangs: dict[str, GangState] = {}
        self.bench_deleted: set[str] = set()
        self.preempted: dict[str, float] = {}  # victim uid -> when its Event was seen
        self.suspects: dict[str, Suspect] = {}
        self.announced_victims: set[str] = set()
        self.bind_times: list[float] = []  # every first binding of a uid, in order seen
        self.bound_at: dict[str, float] = {}
        self.names_seen: dict[str, set[str]] = {}  # pod key -> every uid it had
        self.seen_at: dict[str, float] = {}  # uid -> when first seen
        self._overcommitted: set[str] = set()
        self._deferred: set[str] | None = None  # nodes to check once a relist is applied

    # Inputs

    def expect_gang(
        self, key: str, members: Iterable[str], min_member: int, *, may_fail: bool
    ) -> None:
        gang = self.gangs.setdefault(key, GangState())
        gang.expected = tuple(members)
        gang.may_fail = may_fail
        if gang.min_member is None:
            gang.min_member = min_member

    def deleted_by_bench(self, uid: str) -> None:
        """Call before the bench's DELETE goes out."""
        self.bench_deleted.add(uid)

    def node_event(self, kind: str, obj: Mapping[str, object], now: float) -> None:
        name = str_at(obj, "metadata", "name")
        if kind == "DELETED":
            self.nodes.pop(name, None)
            return
        status = obj.get("status")
        allocatable = status.get("allocatable") if isinstance(status, Mapping) else None
        self.nodes[name] = amounts(allocatable if isinstance(allocatable, Mapping) else {})
        self._check_node(name, now)

    def group_event(self, kind: str, obj: Mapping[str, object]) -> None:
        key = f"{str_at(obj, 'metadata', 'namespace')}/{str_at(obj, 'metadata', 'name')}"
        if kind == "DELETED":
            return  # its members are still checked against what it said
        spec = obj.get("spec")
        spec = spec if isinstance(spec, Mapping) else {}
        gang = self.gangs.setdefault(key, GangState())
        if isinstance(spec.get("minMember"), int):
            gang.min_member = int(spec["minMember"])
        timeout = spec.get("scheduleTimeoutSeconds")
        gang.timeout_s = float(timeout) if isinstance(timeout, int) else None

    def event_seen(self, obj: Mapping[str, object], now: float) -> None:
        """An Event (events.k8s.io/v1 or core/v1): only the scheduler's `Preempted` count."""
        if obj.get("reason") != PREEMPTED_REASON:
            return
        controller = obj.get("reportingController") or obj.get("reportingComponent")
        if controller != SCHEDULER_CONTROLLER:
            return
        regarding = obj.get("regarding") or obj.get("involvedObject")
        uid = regarding.get("uid") if isinstance(regarding, Mapping) else None
        if isinstance(uid, str) and uid:
            self.preempted.setdefault(uid, now)
            if self.suspects.pop(uid, None) is not None:
                self.announced_victims.add(uid)

    def pod_event(self, kind: str, obj: Mapping[str, object], now: float) -> None:
        new = parse_pod(obj)
        old = self.pods.get(new.uid)
        if kind == "DELETED":
            self._gone(old or new, now, "deleted")
            return
        self._update(old, new, now)

    def pods_relisted(self, objs: Iterable[Mapping[str, object]], now: float) -> None:
        """A fresh list after a broken watch: pods not in it went while we did not look."""
        listed = {}
        for obj in objs:
            pod = parse_pod(obj)
            listed[pod.uid] = pod
        # Nodes are compared with their pods once the whole list is in: half-way, a pod that
        # finished while we did not look would still count next to its successor.
        self._deferred = set()
        try:
            for uid in [u for u in self.pods if u not in listed]:
                self._gone(self.pods[uid], now, "gone (seen on relist)")
            for pod in listed.values():
                self._update(self.pods.get(pod.uid), pod, now)
        finally:
            touched, self._deferred = self._deferred, None
        for node in sorted(touched):
            self._check_node(node, now)

    # Transitions

    def _update(self, old: PodState | None, new: PodState, now: float) -> None:
        self.pods[new.uid] = new
        self.names_seen.setdefault(new.key, set()).add(new.uid)
        self.seen_at.setdefault(new.uid, now)
        if old is not None and old.node and new.node != old.node:
            self._violate(
                "bound-twice", now, new.key, f"uid {new.uid} moved from {old.node} to {new.node}"
            )
        if new.node and new.uid not in self.bound_at:
            self.bound_at[new.uid] = now
            self.bind_times.append(now)
        if old is not None and not old.deleting and new.deleting and occupies(old):
            self._suspect(old, now, "got a deletionTimestamp")
        self._place(old, new, now)
        self._gang_changed(new, now)

    def _gone(self, pod: PodState, now: float, how: str) -> None:
        known = self.pods.pop(pod.uid, None)
        if known is not None and not known.deleting and occupies(known):
            self._suspect(known, now, how)
        if known is not None:
            self._unplace(known)
            self._node_changed(known.node, now)
            self._gang_changed(known, now, gone=True)

    def _suspect(self, pod: PodState, now: float, how: str) -> None:
        if pod.uid in self.bench_deleted:
            return
        if pod.uid in self.preempted:
            self.announced_victims.add(pod.uid)
            return
        self.suspects.setdefault(pod.uid, Suspect(pod, now, how))

    def _place(self, old: PodState | None, new: PodState, now: float) -> None:
        if old is not None:
            self._unplace(old)
        if occupies(new):
            self.on_node.setdefault(new.node, set()).add(new.uid)
        for node in {new.node, old.node if old is not None else ""} - {""}:
            self._node_changed(node, now)

    def _unplace(self, pod: PodState) -> None:
        uids = self.on_node.get(pod.node)
        if uids is not None:
            uids.discard(pod.uid)

    def _node_changed(self, node: str, now: float) -> None:
        if not node:
            return
        if self._deferred is not None:
            self._deferred.add(node)
        else:
            self._check_node(node, now)

    def _over(self, node: str) -> list[str]:
        allocatable = self.nodes.get(node)
        if allocatable is None:
            return []  # not known (yet): nothing to compare with
        used: dict[str, int] = {}
        for uid in self.on_node.get(node, ()):
            for name, amount in self.pods[uid].requests.items():
                used[name] = used.get(name, 0) + amount
        return [
            f"{name} {used[name] / 1000:g} > {allocatable.get(name, 0) / 1000:g}"
            for name in sorted(used)
            if used[name] > allocatable.get(name, 0)
        ]

    def _check_node(self, node: str, now: float) -> None:
        """One violation per episode: from the change that over-commits a node until one that
        leaves it within its allocatable."""
        over = self._over(node)
        if not over:
            self._overcommitted.discard(node)
        elif node not in self._overcommitted:
            self._overcommitted.add(node)
            pods = [self.pods[u] for u in self.on_node.get(node, ())]
            held = ", ".join(
                f"{p.key} uid={p.uid[:8]} {p.phase} seen bound {clock(self.bound_at.get(p.uid, 0))}"
                for p in sorted(pods, key=lambda p: self.bound_at.get(p.uid, 0))
            )
            self._violate("over-commit", now, node, "; ".join(over) + f" ({held})")

    def _gang_changed(self, pod: PodState, now: float, *, gone: bool = False) -> None:
        if pod.gang is None:
            return
        gang = self.gangs.setdefault(pod.gang, GangState())
        name = pod.key.rsplit("/", 1)[1]
        if gone:
            if gang.members.get(name) == pod.uid:
                del gang.members[name]
                if finished_by_itself(pod):
                    gang.finished[name] = pod.phase
            if pod.uid in self.bench_deleted and occupies(pod):
                gang.bench_degraded = True  # the bench broke it: exempt until whole or empty
        else:
            gang.members[name] = pod.uid
        self._gang_quorum(gang, now)

    def _gang_quorum(self, gang: GangState, now: float) -> None:
        """Some members bound, fewer than minMember bound or finished: the timer runs. That
        covers a gang bound in part and one preempted or deleted in part alike."""
        states = [self.pods[uid] for uid in gang.members.values() if uid in self.pods]
        bound = sum(1 for p in states if occupies(p))
        gone = sum(1 for name in gang.finished if name not in gang.members)
        have = bound + gone + sum(1 for p in states if p.phase in TERMINAL)
        need = gang.min_member or len(gang.expected) or 1
        if bound == 0 or have >= need:
            gang.partial_since = None
            gang.reported = False
            gang.bench_degraded = False
        elif not gang.bench_degraded and gang.partial_since is None:
            gang.partial_since = now

    # Timed and final checks

    def tick(self, now: float) -> None:
        for uid, suspect in list(self.suspects.items()):
            if now - suspect.at > self.event_grace_s:
                del self.suspects[uid]
                self._deleted_violation(suspect)
        for key, gang in self.gangs.items():
            if gang.partial_since is None or gang.reported:
                continue
            limit = (gang.timeout_s or self.default_timeout_s) + self.slack_s
            if now - gang.partial_since > limit:
                gang.reported = True
                self._violate("partial-gang", now, key, self._gang_summary(gang, limit))

    def finish(self, now: float) -> None:
        self.tick(now)
        for suspect in self.suspects.values():
            self._deleted_violation(suspect)
        self.suspects.clear()
        for key, gang in sorted(self.gangs.items()):
            if gang.expected and not self.gang_done(gang):
                self._violate("gang-unfinished", now, key, self._gang_summary(gang, None))

    def gang_done(self, gang: GangState) -> bool:
        phases = [self._member_phase(gang, name) for name in gang.expected]
        if gang.may_fail:
            return all(p in TERMINAL for p in phases)
        return all(p == "Succeeded" for p in phases)

    def _member_phase(self, gang: GangState, name: str) -> str:
        uid = gang.members.get(name)
        pod = self.pods.get(uid) if uid is not None else None
        if pod is not None:
            return pod.phase
        return gang.finished.get(name, "missing")

    def _gang_summary(self, gang: GangState, limit: float | None) -> str:
        counts: dict[str, int] = {}
        names = gang.expected or tuple(gang.members)
        for name in names:
            uid = gang.members.get(name)
            pod = self.pods.get(uid) if uid is not None else None
            if pod is not None:
                state = pod.phase + ("/bound" if pod.node else "")
            else:
                state = f"{gang.finished[name]}/gone" if name in gang.finished else "missing"
            counts[state] = counts.get(state, 0) + 1
        within = f" for more than {limit:g}s" if limit is not None else ""
        return f"minMember {gang.min_member}{within}: " + ", ".join(
            f"{n} {s}" for s, n in sorted(counts.items())
        )

    def _deleted_violation(self, suspect: Suspect) -> None:
        pod = suspect.pod
        self._violate(
            "running-pod-deleted",
            suspect.at,
            pod.key,
            f"uid {pod.uid} on {pod.node} ({pod.phase}) {suspect.how}; not deleted by the "
            f"bench, no {PREEMPTED_REASON} Event within {self.event_grace_s:g}s",
        )

    def _violate(self, kind: str, at: float, subject: str, detail: str) -> None:
        self.violations.append(Violation(kind, at, subject, detail))

    # Queries for the report

    def first_binding_after(self, at: float) -> float | None:
        i = bisect.bisect_right(self.bind_times, at)
        return self.bind_times[i] if i < len(self.bind_times) else None

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for v in self.violations:
            out[v.kind] = out.get(v.kind, 0) + 1
        return out
