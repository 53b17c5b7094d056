"""Which ResourceClaims a pod uses, and what they count toward its tenant's quota."""

from __future__ import annotations

from collections.abc import Iterable

from batchsched.dra.allocator import AllocationError, Matcher
from batchsched.dra.objects import ALL, Choice, ResourceClaim
from batchsched.dra.state import DraState
from batchsched.model.pod import PodView


def resolve_claims(pod: PodView, dra: DraState) -> list[ResourceClaim] | str:
    """The pod's claims as the snapshot knows them (with pending allocations), or why not."""
    found: list[ResourceClaim] = []
    seen: set[str] = set()
    for entry in pod.resource_claims:
        name = entry.claim_name
        if entry.from_template:
            if entry.name not in pod.claim_statuses:
                return (
                    f"waiting for the ResourceClaim of {entry.describe()} to be created "
                    "by the resourceclaim controller"
                )
            name = pod.claim_statuses[entry.name]
            if not name:
                continue  # the controller decided the pod needs none
        key = f"{pod.namespace}/{name}"
        claim = dra.claim(key)
        if claim is None:
            return f"ResourceClaim {key} not found"
        if claim.deleting:
            return f"ResourceClaim {key} is being deleted"
        if entry.from_template and claim.owner_uid != pod.uid:
            return f"ResourceClaim {key} was not created for this pod"
        if key not in seen:
            seen.add(key)
            found.append(claim)
    return found


def claimed_devices(pod: PodView, dra: DraState) -> dict[str, int]:
    """Devices the pod's claims hold or ask for, by DeviceClass: allocated devices where a
    claim is allocated, else each request's count (the first alternative of firstAvailable;
    allocation mode All counts once allocated). A claim shared by several pods counts toward
    the first pod it is reserved for, or toward any pod while it is reserved for none, so
    the devices are counted once however many pods share them."""
    claims = resolve_claims(pod, dra)
    if isinstance(claims, str):
        return {}
    out: dict[str, int] = {}
    for claim in claims:
        if claim.reserved_for and claim.reserved_for[0].uid != pod.uid:
            continue
        for device_class, count in _counts(claim).items():
            out[device_class] = out.get(device_class, 0) + count
    return out


def _counts(claim: ResourceClaim) -> dict[str, int]:
    classes = {c.name: c.device_class for r in claim.requests for c in r.choices}
    out: dict[str, int] = {}
    if claim.allocation is not None:
        for result in claim.allocation.devices:
            device_class = classes.get(result.request)
            if device_class is not None and not result.admin_access:
                out[device_class] = out.get(device_class, 0) + 1
        return out
    for request in claim.requests:
        first = request.choices[0]
        if first.mode != ALL and not first.admin_access:
            out[first.device_class] = out.get(first.device_class, 0) + first.count
    return out


def class_capacity(dra: DraState, classes: Iterable[str]) -> dict[str, int]:
    """How many devices of each DeviceClass the cluster's current slices publish."""
    matcher = Matcher(dra.classes)
    out: dict[str, int] = {}
    devices = dra.all_devices()
    for name in classes:
        if name not in dra.classes:
            continue
        choice = Choice(name="capacity", device_class=name)
        try:
            out[name] = sum(1 for d in devices if matcher.matches(choice, d))
        except AllocationError:
            out[name] = 0  # a class whose selector fails counts nothing (its pods wait)
    return out
