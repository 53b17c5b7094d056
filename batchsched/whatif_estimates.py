"""When could the pods that `batchsched place` left unplaced start? Pure, like the what-if.

Running pods leave at their expected end: the `batchsched.io/expected-runtime` annotation (the
pod's, else its PodGroup's) or `activeDeadlineSeconds`, counted from `status.startTime`
(else creation; pods the what-if just placed start now). Unplaced gangs and pods are then
reserved in queue order on that timeline (`batchsched.backfill.Planner`), each on top of the
ones before it, as the live scheduler's reservations are.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from batchsched.backfill import (
    GangDemand,
    Planner,
    Running,
    vector,
)
from batchsched.expected_runtime import InvalidRuntime, gang_runtime
from batchsched.framework.runner import ProfileRunner
from batchsched.gang.core import eligible_nodes
from batchsched.gang.podgroup import PodGroupView, pod_group_of
from batchsched.model.pod import PodView
from batchsched.snapshot import Snapshot


def runtime_of(pod: PodView, groups: Mapping[str, PodGroupView]) -> float | None:
    key = pod_group_of(pod)
    group = groups.get(key) if key is not None else None
    try:
        return gang_runtime(pod, group.annotations if group is not None else None)
    except InvalidRuntime:
        return None  # the live scheduler reports it; here the runtime is simply unknown


def estimate_starts(
    snapshot: Snapshot,
    unplaced: Sequence[Sequence[PodView]],
    placed_now: frozenset[str],
    runners: Mapping[str, ProfileRunner],
    groups: Mapping[str, PodGroupView],
    now: float,
) -> dict[str, float | None]:
    """Seconds from `now` until each unplaced unit (a gang's members, or one pod) could start,
    by pod key; None when it could not start even after everything that ends has ended."""
    allocatable = {
        i.name: vector(i.node.allocatable, i.node.allocatable.pods) for i in snapshot.nodes
    }
    running = []
    for info in snapshot.nodes:
        for pod in info.pods.values():
            runtime = runtime_of(pod, groups)
            began = now if pod.uid in placed_now else (pod.start_time or pod.creation_time or now)
            ends = None if runtime is None else began + runtime
            running.append(Running(info.name, vector(pod.requests), ends))
    planner = Planner(allocatable, running, now)
    out: dict[str, float | None] = {}
    for members in unplaced:
        runner = runners.get(members[0].scheduler_name)
        if runner is None:
            continue
        nodes = tuple(i.name for i in eligible_nodes(runner, members[0], snapshot))
        demand = GangDemand(
            members[0].key,
            tuple(vector(p.requests) for p in members),
            nodes,
            runtime_of(members[0], groups),
        )
        reservation = planner.reserve(demand)
        start = None if reservation is None else max(0.0, reservation.start - now)
        for pod in members:
            out[pod.key] = start
    return out
