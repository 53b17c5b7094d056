"""Where would these pending pods go on this cluster? Pure: views in, placements out."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from batchsched.framework.interfaces import QueuedPod
from batchsched.framework.profile import Profile
from batchsched.framework.runner import ProfileRunner
from batchsched.framework.status import is_ok
from batchsched.model.node import NodeView
from batchsched.model.pod import PodView
from batchsched.snapshot import Snapshot


@dataclass
class WhatIfResult:
    placements: dict[str, str | None] = field(default_factory=dict)
    reasons: dict[str, str] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)  # pod keys in the order they were tried

    def to_json(self) -> dict[str, dict[str, str | None] | dict[str, str]]:
        return {"placements": self.placements, "reasons": self.reasons}


def queue_order(pods: Sequence[PodView], profile: Profile) -> list[PodView]:
    """Pending pods in the order the queue would pop them (stable for equal keys)."""
    queued = [QueuedPod(pod, pod.creation_time) for pod in pods]

    def compare(a: QueuedPod, b: QueuedPod) -> int:
        if profile.queue_sort.less(a, b):
            return -1
        return 1 if profile.queue_sort.less(b, a) else 0

    return [q.pod for q in sorted(queued, key=functools.cmp_to_key(compare))]


def place_pending(
    nodes: Sequence[NodeView],
    pods: Sequence[PodView],
    profiles: Mapping[str, Profile],
    namespace_labels: Mapping[str, Mapping[str, str]] | None = None,
    seed: int = 0,
) -> WhatIfResult:
    """Schedule pending pods one by one; each placement is visible to the next."""
    snapshot = Snapshot(nodes, [p for p in pods if p.node_name], namespace_labels)
    pending = [p for p in pods if not p.node_name and not p.is_finished]
    runners = {name: ProfileRunner(profile, seed) for name, profile in profiles.items()}
    result = WhatIfResult()
    if not profiles:
        return result
    first = next(iter(profiles.values()))
    for pod in queue_order(pending, first):
        result.order.append(pod.key)
        node, reason = _place_one(pod, profiles, runners, snapshot)
        result.placements[pod.key] = node
        if reason:
            result.reasons[pod.key] = reason
    return result


def _place_one(
    pod: PodView,
    profiles: Mapping[str, Profile],
    runners: Mapping[str, ProfileRunner],
    snapshot: Snapshot,
) -> tuple[str | None, str]:
    profile = profiles.get(pod.scheduler_name)
    if profile is None:
        names = ", ".join(sorted(profiles))
        return (
            None,
            f"schedulerName {pod.scheduler_name!r} is not a profile of this scheduler ({names})",
        )
    for gate in profile.pre_enqueue:
        status = gate.pre_enqueue(pod)
        if not is_ok(status):
            return None, status.message()
    result = runners[pod.scheduler_name].schedule_one(pod, snapshot)
    if result.placed:
        return result.node_name, ""
    return None, result.message()
