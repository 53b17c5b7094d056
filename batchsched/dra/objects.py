"""DeviceClass, ResourceSlice and ResourceClaim (resource.k8s.io/v1) as the allocator sees them.

Frozen views, read by batchsched.dra.parse. Opaque driver configuration is kept as the JSON
text it came in: the scheduler copies it into an allocation and never reads it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from batchsched.dra.device import Device, DeviceId
from batchsched.model.selectors import NodeSelectorTerm

EXACT_COUNT: Final = "ExactCount"
ALL: Final = "All"
ALLOCATION_MODES: Final = frozenset({EXACT_COUNT, ALL})
# The most consumers one claim can be reserved for (API validation).
MAX_RESERVED_FOR: Final = 256
# A pod's generated claims carry this annotation: the name of the pod's claim entry.
POD_CLAIM_NAME_ANNOTATION: Final = "resource.kubernetes.io/pod-claim-name"
# Namespaces where a claim may ask for admin access to devices in use carry this label.
ADMIN_ACCESS_LABEL: Final = "resource.kubernetes.io/admin-access"


@dataclass(frozen=True, slots=True)
class OpaqueConfig:
    """Driver configuration for some requests (all, when `requests` is empty)."""

    driver: str
    parameters_json: str
    requests: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class DeviceClass:
    name: str
    selectors: tuple[str, ...] = ()  # CEL expressions, all must hold
    config: tuple[OpaqueConfig, ...] = ()


@dataclass(frozen=True, slots=True)
class ResourceSlice:
    """Some devices of one pool. Which nodes reach them: `node_name`, or `all_nodes`, or the
    nodes `node_selector` selects (exactly one is set)."""

    name: str
    driver: str
    pool: str
    generation: int
    slice_count: int  # resourceSliceCount: how many slices the pool's generation has
    node_name: str = ""
    all_nodes: bool = False
    node_selector: tuple[NodeSelectorTerm, ...] = ()
    devices: tuple[Device, ...] = ()

    def reaches(self, node_name: str, labels: Mapping[str, str] | None = None) -> bool:
        if self.node_name:
            return self.node_name == node_name
        if self.all_nodes:
            return True
        return any(term.matches(node_name, labels or {}) for term in self.node_selector)


@dataclass(frozen=True, slots=True)
class Choice:
    """What one request (or one of its firstAvailable alternatives) asks for."""

    name: str  # the request's name, or "<request>/<subrequest>" for an alternative
    device_class: str
    selectors: tuple[str, ...] = ()
    mode: str = EXACT_COUNT
    count: int = 1
    admin_access: bool = False


@dataclass(frozen=True, slots=True)
class DeviceRequest:
    """`exactly` is one choice; `firstAvailable` lists alternatives tried in order."""

    name: str
    choices: tuple[Choice, ...]
    first_available: bool = False


@dataclass(frozen=True, slots=True)
class MatchAttribute:
    """All devices of `requests` (every request of the claim when empty) share `attribute`."""

    attribute: str  # fully qualified, e.g. "resource.kubernetes.io/pcieRoot"
    requests: tuple[str, ...] = ()

    def covers(self, request: str) -> bool:
        # A constraint names a request (covering each of its alternatives) or one alternative.
        return (
            not self.requests
            or request in self.requests
            or request.split("/", 1)[0] in self.requests
        )


@dataclass(frozen=True, slots=True)
class AllocatedDevice:
    request: str
    driver: str
    pool: str
    device: str
    admin_access: bool = False

    @property
    def id(self) -> DeviceId:
        return DeviceId(f"{self.driver}/{self.pool}/{self.device}")


@dataclass(frozen=True, slots=True)
class Allocation:
    devices: tuple[AllocatedDevice, ...]
    node_selector: tuple[NodeSelectorTerm, ...] = ()  # empty: every node
    config: tuple[tuple[str, OpaqueConfig], ...] = ()  # (source, config): FromClass/FromClaim

    def allows(self, node_name: str, labels: Mapping[str, str] | None = None) -> bool:
        if not self.node_selector:
            return True
        return any(term.matches(node_name, labels or {}) for term in self.node_selector)


@dataclass(frozen=True, slots=True)
class Consumer:
    """One entry of `status.reservedFor` (pods: resource "pods", apiGroup "")."""

    resource: str
    name: str
    uid: str
    api_group: str = ""


@dataclass(frozen=True, slots=True)
class ResourceClaim:
    namespace: str
    name: str
    uid: str
    resource_version: str = ""
    requests: tuple[DeviceRequest, ...] = ()
    constraints: tuple[MatchAttribute, ...] = ()
    config: tuple[OpaqueConfig, ...] = ()
    allocation: Allocation | None = None
    reserved_for: tuple[Consumer, ...] = ()
    deleting: bool = False
    pod_claim_name: str = ""  # set on claims generated from a pod's template
    owner_uid: str = ""  # the controlling owner (the pod, for generated claims)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def reserved_for_pod(self, uid: str) -> bool:
        return any(c.resource == "pods" and c.uid == uid for c in self.reserved_for)
