"""The live facts a `PreemptionRequest` carries, read from the cache and the gang tracker.

Start times are on the monotonic clock the request's `now` uses. The best source first:
status.startTime (the kubelet's), then when this scheduler saw the pod start using capacity
(the tenant layer's record), then its creation time. Computed on demand: a request reads only
the pods it weighs, and a snapshot holds thousands.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

from batchsched.gang.podgroup import PodGroupView
from batchsched.model.pod import PodView
from batchsched.preemption.model import DisruptionBudget, PreemptionRequest
from batchsched.runtime.gangs import GangTracker
from batchsched.runtime.live import Live
from batchsched.snapshot import Snapshot


def live_request(
    s: Live,
    pods: Sequence[PodView],
    group: PodGroupView | None,
    reclaimable: frozenset[str],
    min_runtime_s: float,
    budgets: Sequence[DisruptionBudget],
) -> PreemptionRequest:
    """The planner's question for `pods` (a gang: its members still to place), from the
    scheduler's cache, clock, gang tracker and tenant layer."""
    snapshot = s.cache.snapshot
    now = s.clock.now()
    seen = s.tenants.started if s.tenants is not None else {}
    gang_of, min_member = gang_membership(s.gangs, snapshot)
    return PreemptionRequest(
        preemptor=tuple(pods),
        group=group,
        bound_members=s.gangs.counted(group.key, snapshot) if group is not None else 0,
        now=now,
        started=started_times(snapshot, now, s.clock.wall(), seen),
        min_runtime_s=min_runtime_s,
        budgets=tuple(budgets),
        gang_of=gang_of,
        gang_min_member=min_member,
        reclaimable=reclaimable,
        unconfirmed=s.cache.assumed_uids(),
    )


def started_at(pod: PodView, now: float, wall: float, seen: Mapping[str, float]) -> float:
    """Purely computational: when `pod` started, on the monotonic clock (`now` <-> `wall`)."""
    if pod.start_time > 0:
        return now - max(0.0, wall - pod.start_time)
    found = seen.get(pod.uid)
    if found is not None:
        return found
    if pod.creation_time > 0:
        return now - max(0.0, wall - pod.creation_time)
    return now


class _StartedTimes(Mapping[str, float]):
    """uid -> start, for every pod the snapshot counts."""

    def __init__(
        self, snapshot: Snapshot, now: float, wall: float, seen: Mapping[str, float]
    ) -> None:
        self._snapshot = snapshot
        self._now = now
        self._wall = wall
        self._seen = seen

    def __getitem__(self, uid: str) -> float:
        info = self._snapshot.node_of(uid)
        if info is None:
            raise KeyError(uid)
        return started_at(info.pods[uid], self._now, self._wall, self._seen)

    def __iter__(self) -> Iterator[str]:
        return (uid for info in self._snapshot.nodes for uid in info.pods)

    def __len__(self) -> int:
        return sum(len(info.pods) for info in self._snapshot.nodes)


def started_times(
    snapshot: Snapshot, now: float, wall: float, seen: Mapping[str, float]
) -> Mapping[str, float]:
    return _StartedTimes(snapshot, now, wall, seen)


def gang_membership(
    gangs: GangTracker, snapshot: Snapshot
) -> tuple[dict[str, str], dict[str, int]]:
    """(uid -> gang key for every counted gang member, gang key -> minMember). A gang whose
    PodGroup is unknown counts its members as its minMember: all of them go or none."""
    gang_of: dict[str, str] = {}
    counted: dict[str, int] = {}
    for key, uids in gangs.members.items():
        for uid in uids:
            if snapshot.node_of(uid) is not None:
                gang_of[uid] = key
                counted[key] = counted.get(key, 0) + 1
    min_member = {}
    for key, count in counted.items():
        group = gangs.group(key)
        min_member[key] = group.min_member if group is not None else count
    return gang_of, min_member


def any_lower(snapshot: Snapshot, priority: int) -> bool:
    """Purely computational: whether any counted pod has a lower priority (a victim could
    exist); stops at the first."""
    return any(p.priority < priority for info in snapshot.nodes for p in info.pods.values())
