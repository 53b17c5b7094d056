"""DeviceClass, ResourceSlice and ResourceClaim watch events into the snapshot's DRA state.

A change that can make room or make a claim ready (a slice added, a claim made or freed, a
class defined) moves the waiting pods back to the active queue, as kube-scheduler's
DynamicResources queueing hints do; a claim update that changes neither its allocation nor
its consumers (the driver's status, labels) moves nothing.
"""

from __future__ import annotations

from batchsched.cache import SchedulerCache
from batchsched.dra.objects import MAX_RESERVED_FOR, DeviceClass, ResourceClaim, ResourceSlice
from batchsched.model.pod import PodView
from batchsched.runtime.queue import SchedulingQueue


class DeviceClassEvents:
    def __init__(self, cache: SchedulerCache, queue: SchedulingQueue) -> None:
        self.cache, self.queue = cache, queue

    def on_add(self, device_class: DeviceClass) -> None:
        self.cache.snapshot.dra.set_class(device_class)
        self.queue.move_where("DeviceClassAdd", _claims_pods)

    def on_update(self, old: DeviceClass, new: DeviceClass) -> None:
        if new != old:
            self.cache.snapshot.dra.set_class(new)
            self.queue.move_where("DeviceClassUpdate", _claims_pods)

    def on_delete(self, device_class: DeviceClass) -> None:
        self.cache.snapshot.dra.remove_class(device_class.name)


class ResourceSliceEvents:
    def __init__(self, cache: SchedulerCache, queue: SchedulingQueue) -> None:
        self.cache, self.queue = cache, queue

    def on_add(self, resource_slice: ResourceSlice) -> None:
        self.cache.snapshot.dra.set_slice(resource_slice)
        self.queue.move_where("ResourceSliceAdd", _claims_pods)

    def on_update(self, old: ResourceSlice, new: ResourceSlice) -> None:
        if new != old:
            self.cache.snapshot.dra.set_slice(new)
            self.queue.move_where("ResourceSliceUpdate", _claims_pods)

    def on_delete(self, resource_slice: ResourceSlice) -> None:
        self.cache.snapshot.dra.remove_slice(resource_slice.name)


class ResourceClaimEvents:
    def __init__(self, cache: SchedulerCache, queue: SchedulingQueue) -> None:
        self.cache, self.queue = cache, queue

    def on_add(self, claim: ResourceClaim) -> None:
        self.cache.snapshot.dra.set_claim(claim)
        self.queue.move_where("ResourceClaimAdd", _claims_pods)

    def on_update(self, old: ResourceClaim, new: ResourceClaim) -> None:
        self.cache.snapshot.dra.set_claim(new)
        freed = old.allocation is not None and new.allocation is None
        # A consumer leaving helps a waiting pod only when the claim was full (256): the
        # resourceclaim controller churns reservedFor of shared claims of finished pods.
        released = len(old.reserved_for) >= MAX_RESERVED_FOR > len(new.reserved_for)
        if freed or released or new.deleting != old.deleting:
            self.queue.move_where("ResourceClaimUpdate", _claims_pods)

    def on_delete(self, claim: ResourceClaim) -> None:
        self.cache.snapshot.dra.remove_claim(claim.key)
        self.queue.move_where("ResourceClaimDelete", _claims_pods)


def _claims_pods(pod: PodView) -> bool:
    """Only a pod with claims can be helped by a DRA object's change."""
    return bool(pod.resource_claims)
