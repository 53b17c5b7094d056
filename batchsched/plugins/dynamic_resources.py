"""DynamicResources: pods with ResourceClaims get devices the scheduler chose, written to the
claims before the pod binds (resource.k8s.io/v1, kube-scheduler's semantics).

- PreFilter resolves the pod's claims (a claim from a template waits until the resourceclaim
  controller has made it) and refuses, as unresolvable, a claim that cannot be allocated
  anywhere: missing, being deleted, made for another pod, full (256 consumers), of an
  unknown DeviceClass, or with admin access outside an admin namespace.
- Filter: claims allocated already must allow the node; the others must fit its free devices
  (batchsched.dra.allocator: kube's search, best NVLink/PCIe set first).
- Score: the worst connectivity among the pod's multi-device sets on the node (one NVLink
  island best), then packing (fewer free devices left).
- Reserve assumes the allocations in the snapshot, undo-logged inside a gang's trial, so a
  gang's members and their claims are placed whole or not at all; Unreserve gives them back.
- PreBind writes `status.allocation` and adds the pod to `status.reservedFor` through an
  injected writer (the runtime's API adapter); a failed write fails the binding, which
  unreserves the pod and requeues it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Final, Protocol

from batchsched.dra.allocator import (
    AllocationError,
    Found,
    Matcher,
    NodeDevices,
    allocations,
    search,
)
from batchsched.dra.objects import ADMIN_ACCESS_LABEL, MAX_RESERVED_FOR, Allocation, ResourceClaim
from batchsched.dra.resolve import resolve_claims
from batchsched.dra.state import DraState
from batchsched.framework.cycle_state import CycleState, StateKey
from batchsched.framework.interfaces import MAX_NODE_SCORE, PreFilterResult
from batchsched.framework.registry import NoArgs
from batchsched.framework.status import OK, SKIP, Status, error, unresolvable, unschedulable
from batchsched.model.pod import PodView
from batchsched.plugins.gpu_scoring import rank_normalize
from batchsched.snapshot import NodeInfo, Snapshot

NOT_ON_NODE: Final = "node(s) cannot reach the devices already allocated to the pod's claims"
NO_DEVICES: Final = "node(s) did not have enough free devices for the pod's claims"
MAX_CACHED: Final = 65536  # searches (and claim signatures) remembered before starting over


class ClaimWriter(Protocol):
    async def reserve(self, claim: ResourceClaim, allocation: Allocation, pod: PodView) -> None:
        """Make the claim carry `allocation` (writing it where the API shows none yet: it may
        be another gang member's, still in flight) and list `pod` in its reservedFor; raise
        when the API shows another allocation or the claim is gone."""
        ...


class NotConnected:
    async def reserve(self, claim: ResourceClaim, allocation: Allocation, pod: PodView) -> None:
        raise RuntimeError("no API server client attached to DynamicResources")


@dataclass(frozen=True, slots=True)
class PodClaims:
    dra: DraState
    allocated: tuple[ResourceClaim, ...]  # allocated already (or by an earlier gang member)
    pending: tuple[ResourceClaim, ...]  # still to allocate
    signature: int  # what the pending claims ask for, interned: pods alike share searches


@dataclass(frozen=True, slots=True)
class Reserved:
    allocations: tuple[tuple[str, Allocation], ...]  # what Reserve assumed, by claim key
    claims: tuple[ResourceClaim, ...]  # every claim of the pod, as Reserve saw it


CLAIMS_KEY: Final[StateKey[PodClaims]] = StateKey("PreFilterDynamicResources")
RESERVED_KEY: Final[StateKey[Reserved]] = StateKey("ReserveDynamicResources")


class DynamicResources:
    name: ClassVar[str] = "DynamicResources"

    def __init__(self, args: NoArgs | None = None, writer: ClaimWriter | None = None) -> None:
        self.writer: ClaimWriter = writer or NotConnected()
        self._matcher = Matcher({})
        self._version = -1
        # Searches by (what the claims ask for, node), valid while the node's DRA generation
        # holds: gang members and replicas ask alike, and most nodes do not change between
        # two pods (kube-scheduler's opportunistic batching, for devices).
        self._signatures: dict[tuple[object, ...], int] = {}
        self._found: dict[tuple[int, str], tuple[tuple[int, int], Found | None, int]] = {}
        self._not_on_node = unresolvable(NOT_ON_NODE).with_plugin(self.name)
        self._no_devices = unschedulable(NO_DEVICES).with_plugin(self.name)

    def pre_filter(
        self, state: CycleState, pod: PodView, snapshot: Snapshot
    ) -> tuple[PreFilterResult | None, Status]:
        if not pod.resource_claims:
            return None, SKIP
        dra = snapshot.dra
        if dra.version != self._version:
            self._matcher.reset(dra.classes)
            self._version = dra.version
        found = resolve_claims(pod, dra)
        if isinstance(found, str):
            return None, unresolvable(found)
        try:
            check_claims(pod, found, snapshot, self._matcher)
        except AllocationError as err:
            return None, unresolvable(str(err))
        allocated = tuple(c for c in found if c.allocation is not None)
        pending = tuple(c for c in found if c.allocation is None)
        state.write(CLAIMS_KEY, PodClaims(dra, allocated, pending, self._signature(pending)))
        return None, OK

    def _signature(self, pending: Sequence[ResourceClaim]) -> int:
        asked = tuple((c.requests, c.constraints) for c in pending)
        found = self._signatures.get(asked)
        if found is None:
            if len(self._signatures) >= MAX_CACHED:
                self._signatures.clear()
                self._found.clear()
            found = self._signatures[asked] = len(self._signatures)
        return found

    def _search(self, claims: PodClaims, node: NodeInfo) -> tuple[Found | None, int]:
        """The search for the pod's pending claims on `node` (cached), and how many devices
        the node would have free after it."""
        key = (claims.signature, node.name)
        # The node's own generation too: its labels (slices by node selector) and its GPU
        # topology (the NVLink islands sets are chosen by) are the search's inputs as well.
        generation = (claims.dra.generation(node.name), node.generation)
        cached = self._found.get(key)
        if cached is not None and cached[0] == generation:
            return cached[1], cached[2]
        devices = node_devices(claims.dra, node)
        found = search(claims.pending, devices, self._matcher)
        in_use = devices.in_use
        free = sum(1 for d in devices.reachable if d.id not in in_use)
        free_after = free - (found.devices if found is not None else 0)
        if len(self._found) >= MAX_CACHED:
            self._found.clear()
        self._found[key] = (generation, found, free_after)
        return found, free_after

    def filter(self, state: CycleState, pod: PodView, node: NodeInfo) -> Status:
        claims = state.read(CLAIMS_KEY)
        for claim in claims.allocated:
            assert claim.allocation is not None
            if not claim.allocation.allows(node.name, node.node.labels):
                return self._not_on_node
        if not claims.pending:
            return OK
        try:
            found, _ = self._search(claims, node)
        except AllocationError as err:
            return unresolvable(str(err))
        return OK if found is not None else self._no_devices

    def pre_score(
        self, state: CycleState, pod: PodView, snapshot: Snapshot, nodes: Sequence[NodeInfo]
    ) -> Status:
        """SKIPs Score for a pod with no claim left to allocate: it would score 0 everywhere
        (the runner and batches then call no Score of it for this pod)."""
        claims = state.get(CLAIMS_KEY)
        return OK if claims is not None and claims.pending else SKIP

    def score(self, state: CycleState, pod: PodView, node: NodeInfo) -> int:
        claims = state.get(CLAIMS_KEY)
        if claims is None or not claims.pending:
            return 0
        # Filter searched this node for these claims a moment ago: read what it found.
        cached = self._found.get((claims.signature, node.name))
        if cached is None or cached[1] is None:
            return 0
        return cached[1].quality * 1000 - min(cached[2], 999)

    def normalize_scores(
        self, state: CycleState, pod: PodView, nodes: Sequence[NodeInfo], scores: list[int]
    ) -> None:
        rank_normalize(scores, MAX_NODE_SCORE)

    def reserve(
        self, state: CycleState, pod: PodView, node_name: str, snapshot: Snapshot
    ) -> Status:
        if state.get(CLAIMS_KEY) is None:
            return OK
        dra = snapshot.dra
        info = snapshot.get(node_name)
        found = resolve_claims(pod, dra)
        if isinstance(found, str) or info is None:
            return unresolvable(found if isinstance(found, str) else f"node {node_name} is gone")
        pending = [c for c in found if c.allocation is None]
        for claim in found:
            if claim.allocation is not None and not claim.allocation.allows(
                node_name, info.node.labels
            ):
                return self._not_on_node
        made: tuple[tuple[str, Allocation], ...] = ()
        if pending:
            devices = node_devices(dra, info)
            try:
                chosen = search(pending, devices, self._matcher)
            except AllocationError as err:
                return unresolvable(str(err))
            if chosen is None:
                return self._no_devices
            made = allocations(pending, devices, chosen, self._matcher)
        for key, allocation in made:
            dra.assume(key, allocation, pod.uid)
        state.write(RESERVED_KEY, Reserved(made, tuple(found)))
        return OK

    def unreserve(
        self, state: CycleState, pod: PodView, node_name: str, snapshot: Snapshot
    ) -> None:
        reserved = state.get(RESERVED_KEY)
        if reserved is None:
            return
        for key, _ in reserved.allocations:
            snapshot.dra.forget(key, pod.uid)

    async def pre_bind(self, state: CycleState, pod: PodView, node_name: str) -> Status:
        reserved = state.get(RESERVED_KEY)
        if reserved is None:
            return OK  # no claims
        mine = dict(reserved.allocations)
        for claim in reserved.claims:
            allocation = mine.get(claim.key, claim.allocation)
            if allocation is None or (claim.reserved_for_pod(pod.uid) and claim.key not in mine):
                continue
            try:
                await self.writer.reserve(claim, allocation, pod)
            except Exception as err:  # the runtime unreserves and requeues the pod
                return error(f"writing the allocation of ResourceClaim {claim.key}: {err}")
        return OK


def check_claims(
    pod: PodView, claims: Sequence[ResourceClaim], snapshot: Snapshot, matcher: Matcher
) -> None:
    """Raise AllocationError for a claim no node can take this pod for."""
    admin_ok = snapshot.namespace_labels.get(pod.namespace, {}).get(ADMIN_ACCESS_LABEL) == "true"
    for claim in claims:
        if claim.allocation is not None:
            full = len(claim.reserved_for) >= MAX_RESERVED_FOR
            if full and not claim.reserved_for_pod(pod.uid):
                raise AllocationError(
                    f"ResourceClaim {claim.key} is in use by {MAX_RESERVED_FOR} consumers "
                    "already, the most it can have"
                )
            continue
        for request in claim.requests:
            for choice in request.choices:
                matcher.device_class(choice.device_class)
                if choice.admin_access and not admin_ok:
                    raise AllocationError(
                        f"ResourceClaim {claim.key} request {choice.name} asks for admin "
                        f"access, which needs the namespace label {ADMIN_ACCESS_LABEL}=true"
                    )


def node_devices(dra: DraState, node: NodeInfo) -> NodeDevices:
    reachable = dra.devices_for(node.name, node.node.labels)
    topology = node.gpu.topology if node.gpu is not None else None
    return NodeDevices(node.name, reachable, dra.in_use, topology, dra.everywhere, node.generation)
