"""DynamicResourcesGuard (off by default): a pod with `spec.resourceClaims` is refused, never
bound, for clusters where another component must own claim allocation.

A profile that disables DynamicResources does not allocate Dynamic Resource Allocation
(resource.k8s.io/v1) claims, and a pod bound with its claims unallocated never starts on a
real node: the kubelet waits for an allocation no one writes. With this guard enabled, such a
pod is refused at PreFilter as
UnschedulableAndUnresolvable, before any node is looked at, with a reason that names its
claims; the runtime reports it like any pod that fits nowhere (PodScheduled=False and a
FailedScheduling Event). A gang with such a member cannot reach its quorum through it, so the
gang waits whole instead of binding part of itself.
"""

from __future__ import annotations

from typing import ClassVar

from batchsched.framework.cycle_state import CycleState
from batchsched.framework.interfaces import PreFilterResult
from batchsched.framework.registry import NoArgs
from batchsched.framework.status import OK, Status, unresolvable
from batchsched.model.pod import PodView
from batchsched.snapshot import Snapshot


def refusal(pod: PodView) -> str:
    """The reason shown to the user, e.g. "pod has Dynamic Resource Allocation claims
    [gpu (ResourceClaim shared-gpu)]: this scheduler profile does not allocate DRA claims
    (DynamicResourcesGuard) and will not bind this pod; use a scheduler that does"."""
    claims = ", ".join(claim.describe() for claim in pod.resource_claims)
    return (
        f"pod has Dynamic Resource Allocation claims [{claims}]: this scheduler profile does "
        "not allocate DRA claims (DynamicResourcesGuard) and will not bind this pod; use a "
        "scheduler that does"
    )


class DynamicResourcesGuard:
    name: ClassVar[str] = "DynamicResourcesGuard"

    def __init__(self, args: NoArgs | None = None) -> None:
        pass

    def pre_filter(
        self, state: CycleState, pod: PodView, snapshot: Snapshot
    ) -> tuple[PreFilterResult | None, Status]:
        if not pod.resource_claims:
            return None, OK
        return None, unresolvable(refusal(pod))
