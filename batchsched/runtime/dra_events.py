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
    """Queueing hints as kube-scheduler 1.34's: a claim made, changed or deleted helps the pods
    that use it; devices coming free (an allocation cleared, an allocated claim deleted) help
    every pod with claims; a full claim (256 consumers) losing one helps its users."""

    def __init__(self, cache: SchedulerCache, queue: SchedulingQueue) -> None:
        self.cache, self.queue = cache, queue

    def on_add(self, claim: ResourceClaim) -> None:
        self.cache.snapshot.dra.set_claim(claim)
        self.queue.move_where("ResourceClaimAdd", lambda pod: uses(pod, claim))

    def on_update(self, old: ResourceClaim, new: ResourceClaim) -> None:
        self.cache.snapshot.dra.set_claim(new)
        if old.allocation is not None and new.allocation is None:
            self.queue.move_where("ResourceClaimUpdate", _claims_pods)
            return
        # The resourceclaim controller churns reservedFor of shared claims of finished pods:
        # a consumer leaving matters only to a claim that was full.
        released = len(old.reserved_for) >= MAX_RESERVED_FOR > len(new.reserved_for)
        if released or new.deleting != old.deleting:
            self.queue.move_where("ResourceClaimUpdate", lambda pod: uses(pod, new))

    def on_delete(self, claim: ResourceClaim) -> None:
        self.cache.snapshot.dra.remove_claim(claim.key)
        if claim.allocation is not None:
            self.queue.move_where("ResourceClaimDelete", _claims_pods)
        else:
            self.queue.move_where("ResourceClaimDelete", lambda pod: uses(pod, claim))


def uses(pod: PodView, claim: ResourceClaim) -> bool:
    """Whether the pod names the claim, or the claim was made for it from a template."""
    if pod.namespace != claim.namespace or not pod.resource_claims:
        return False
    if claim.owner_uid and claim.owner_uid == pod.uid:
        return True
    named = {c.claim_name for c in pod.resource_claims if c.claim_name}
    return claim.name in named or claim.name in pod.claim_statuses.values()


def _claims_pods(pod: PodView) -> bool:
    """Only a pod with claims can be helped by a DRA object's change."""
    return bool(pod.resource_claims)
