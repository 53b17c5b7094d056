"""What the API's other actors do to ResourceClaims in a simulated cluster.

The simulator has no API server, so its drivers play three parts the live scheduler leaves to
others, on the snapshot's DRA state (`snapshot.dra`):

- the resourceclaim controller making a pod's claims from templates when the pod is created
  (`add_claims`: the simulated pod carries the claims made for it);
- DynamicResources' PreBind writing the allocation Reserve assumed and listing the pod in
  `status.reservedFor` (`bind_claims`; `DraState.set_claim` drops the assumed allocation once
  a claim shows one);
- the resourceclaim controller after the pod is gone (`release_claims`): the pod leaves
  `reservedFor`, a claim no pod uses any more is deallocated, and a claim made for the pod
  (the pod owns it) is deleted with it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace

from batchsched.dra.objects import ALL, Consumer, ResourceClaim
from batchsched.dra.state import DraState
from batchsched.model.pod import PodView

PODS_RESOURCE = "pods"


def add_claims(dra: DraState, claims: Iterable[ResourceClaim]) -> None:
    for claim in claims:
        dra.set_claim(claim)


def claim_keys(pod: PodView) -> list[str]:
    """The keys of the ResourceClaims the pod uses, in its order, each once; a template's
    claim only once its name is known (the pod's `status.resourceClaimStatuses`)."""
    keys: list[str] = []
    for entry in pod.resource_claims:
        name = pod.claim_statuses.get(entry.name, "") if entry.from_template else entry.claim_name
        key = f"{pod.namespace}/{name}"
        if name and key not in keys:
            keys.append(key)
    return keys


def bind_claims(dra: DraState, pod: PodView) -> None:
    """PreBind for a pod the cycle placed: each claim shows its allocation (the one Reserve
    assumed, or the one it had) and lists the pod among its consumers."""
    for key in claim_keys(pod):
        claim = dra.claims.get(key)
        if claim is None:
            continue
        allocation = claim.allocation
        assumed = dra.assumed.get(key)
        if allocation is None and assumed is not None and assumed[1] == pod.uid:
            allocation = assumed[0]
        if allocation is None or claim.reserved_for_pod(pod.uid):
            continue
        consumer = Consumer(PODS_RESOURCE, pod.name, pod.uid)
        dra.set_claim(
            replace(claim, allocation=allocation, reserved_for=(*claim.reserved_for, consumer))
        )


def release_claims(dra: DraState, pod: PodView) -> None:
    """The pod is gone: its claims let it go (the resourceclaim controller's part)."""
    for key in claim_keys(pod):
        claim = dra.claims.get(key)
        if claim is None:
            continue
        if claim.owner_uid == pod.uid:
            dra.remove_claim(key)  # the garbage collector deletes what the pod owned
            continue
        users = tuple(c for c in claim.reserved_for if c.uid != pod.uid)
        if users == claim.reserved_for:
            continue
        dra.set_claim(
            replace(claim, reserved_for=users, allocation=claim.allocation if users else None)
        )


def free_devices(dra: DraState, node_name: str, labels: Mapping[str, str]) -> int:
    """Devices the node reaches that no claim holds."""
    in_use = dra.in_use
    return sum(1 for d in dra.devices_for(node_name, labels) if d.id not in in_use)


def claim_devices(claim: ResourceClaim, device_class: str) -> int:
    """How many devices of `device_class` the claim holds, or asks for before allocation
    (each request's first alternative; allocation mode All counts nothing until allocated)."""
    if claim.allocation is not None:
        requests = {
            c.name for r in claim.requests for c in r.choices if c.device_class == device_class
        }
        return sum(
            1 for d in claim.allocation.devices if d.request in requests and not d.admin_access
        )
    total = 0
    for request in claim.requests:
        first = request.choices[0]
        if first.device_class == device_class and first.mode != ALL and not first.admin_access:
            total += first.count
    return total


def pod_devices(
    pod: PodView, claims: Mapping[str, ResourceClaim], device_class: str, seen: set[str]
) -> int:
    """Devices of `device_class` the pod's claims ask for, skipping claims in `seen` (a claim
    several pods share counts once, toward the first of them); adds the pod's claims to it."""
    total = 0
    for key in claim_keys(pod):
        claim = claims.get(key)
        if claim is not None and key not in seen:
            seen.add(key)
            total += claim_devices(claim, device_class)
    return total
