"""The unit of scheduling: a lone pod, or the members of one gang still to place."""

from __future__ import annotations

from dataclasses import dataclass

from batchsched.gang.core import GangRequest, Reservation
from batchsched.gang.podgroup import PodGroupView
from batchsched.model.pod import PodView


@dataclass(frozen=True, slots=True)
class Workload:
    """What one cycle decides about.

    A lone pod has `gang` False and one pod. A gang has the members to place now (sorted by
    name), the members it holds already (reserved, waiting at Permit) and how many count
    toward its quorum besides (bound, binding or finished). `group` is None for a gang whose
    PodGroup is missing or invalid; `missing` then says why.
    """

    key: str  # the gang's namespace/name, or "pod:namespace/name"
    pods: tuple[PodView, ...]
    gang: bool = False
    group: PodGroupView | None = None
    reserved: tuple[Reservation, ...] = ()
    bound: int = 0
    missing: str = ""
    # Whether a gang short of members keeps its reservations while it waits (the live
    # scheduler's Permit); a forecast (`batchsched place`) holds nothing.
    hold: bool = True
    # A gang's member pods that exist (pending, reserved, bound or finished); None: all the
    # driver knows of are here. Fewer than minMember: preemption would evict for nothing.
    known_members: int | None = None

    @property
    def priority(self) -> int:
        return max(p.priority for p in self.pods)

    def gang_request(self) -> GangRequest:
        assert self.group is not None
        return GangRequest(self.group, self.pods, self.reserved, self.bound)


def pod_key(pod: PodView) -> str:
    """A lone pod's workload key (the backfill and preemption bookkeeping use the same)."""
    return f"pod:{pod.key}"
