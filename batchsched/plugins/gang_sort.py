"""GangSort: priority first, then the age of the pod's gang (its PodGroup) or of the pod
itself, then the name; so one gang's members sit together in the queue instead of being
interleaved with another gang's (which would make both wait for each other's capacity)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar, Protocol

from batchsched.framework.interfaces import OrderKey, QueuedPod
from batchsched.framework.profile import Profile
from batchsched.framework.registry import NoArgs
from batchsched.gang.podgroup import pod_group_of


class GroupAges(Protocol):
    def created(self, key: str) -> float | None:
        """Creation time of PodGroup `key` ("ns/name"), None when unknown."""
        ...


class NoGroups:
    def created(self, key: str) -> float | None:
        return None


class GangSort:
    name: ClassVar[str] = "GangSort"

    def __init__(self, args: NoArgs | None = None, groups: GroupAges | None = None) -> None:
        self.groups: GroupAges = groups or NoGroups()

    def sort_key(self, queued: QueuedPod) -> tuple[int, float, str]:
        pod = queued.pod
        group = pod_group_of(pod)
        if group is not None:
            created = self.groups.created(group)
            return (-pod.priority, created if created is not None else pod.creation_time, group)
        return (-pod.priority, pod.creation_time, pod.key)

    def less(self, a: QueuedPod, b: QueuedPod) -> bool:
        key_a, key_b = self.sort_key(a), self.sort_key(b)
        if key_a != key_b:
            return key_a < key_b
        return a.enqueued_at < b.enqueued_at

    def order_key(self, qp: QueuedPod) -> OrderKey:
        return (*self.sort_key(qp), qp.enqueued_at)


def attach_group_ages(profiles: Mapping[str, Profile], ages: GroupAges) -> None:
    """Give every profile's GangSort the PodGroup ages it orders gangs by (the registry
    builds plugins without state; the runtime or the what-if run owns the PodGroups)."""
    for profile in profiles.values():
        if isinstance(profile.queue_sort, GangSort):
            profile.queue_sort.groups = ages
