"""The tenant model the scheduler orders and admits gangs by: pure data, no I/O.

A tenant is a node of a tree at most two levels deep (organisation -> team); a flat list of
tenants is a tree of roots. Pods map to a leaf tenant by namespace or by the value of a queue
label. Every tenant may have:

- `weight`: its share of the cluster relative to its siblings, for fair-share ordering;
- `guaranteed`: what it can always get (its idle part may be lent to others when `lend_idle`);
- `max`: what it may never exceed (a resource not named has no limit);
- an allowed priority range for its pods.

Amounts are `Amounts`, a plain mapping from resource name to an integer in the queue unit of
that resource: millicores for `cpu`, bytes for `memory`, **milli-GPUs** for `nvidia.com/gpu`
(a whole GPU is 1000, so a pod asking for a share of one GPU counts what it asks for), and
the API's whole units for any other resource. GPUs of one model have their own key,
`nvidia.com/gpu@<product>` with the node label `nvidia.com/gpu.product`'s value, so a quota can
say "at most 16 H100s" next to "at most 64 GPUs overall".
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final

from batchsched.model.resources import CPU, MEMORY, NVIDIA_GPU

Amounts = Mapping[str, int]

GPU: Final = NVIDIA_GPU
QUEUE_LABEL: Final = "batchsched.io/queue"
MILLI_PER_GPU: Final = 1000
EMPTY: Final[Amounts] = {}


def flavor_key(product: str) -> str:
    """The quota key of one GPU model, e.g. "nvidia.com/gpu@NVIDIA-H100-80GB-HBM3"."""
    return f"{GPU}@{product}"


def add(a: Amounts, b: Amounts) -> dict[str, int]:
    out = dict(a)
    for name, amount in b.items():
        out[name] = out.get(name, 0) + amount
    return out


def subtract(a: Amounts, b: Amounts) -> dict[str, int]:
    out = dict(a)
    for name, amount in b.items():
        out[name] = out.get(name, 0) - amount
    return out


def total(vectors: Iterable[Amounts]) -> dict[str, int]:
    out: dict[str, int] = {}
    for vector in vectors:
        for name, amount in vector.items():
            out[name] = out.get(name, 0) + amount
    return out


def describe(name: str, amount: int) -> str:
    """An amount in the unit a user wrote it in: "3.5 nvidia.com/gpu", "12 cpu", "64Gi memory"."""
    if name == CPU:
        return f"{amount / 1000:g} cpu"
    if name == MEMORY:
        return f"{amount / 2**30:g}Gi memory"
    if name == GPU or name.startswith(GPU + "@"):
        return f"{amount / MILLI_PER_GPU:g} {name}"
    return f"{amount} {name}"


@dataclass(frozen=True, slots=True)
class Tenant:
    name: str  # a root's name, or "parent/child" for a team under an organisation
    parent: str | None = None
    weight: float = 1.0
    guaranteed: Amounts = field(default_factory=dict)
    max: Amounts = field(default_factory=dict)  # a resource not named: no limit
    lend_idle: bool = True  # others may borrow its idle guarantee
    min_priority: int | None = None
    max_priority: int | None = None
    namespaces: frozenset[str] = frozenset()
    queues: frozenset[str] = frozenset()  # values of the queue label that map here

    def allows_priority(self, priority: int) -> bool:
        if self.min_priority is not None and priority < self.min_priority:
            return False
        return self.max_priority is None or priority <= self.max_priority


@dataclass(frozen=True, slots=True)
class QuotaPolicy:
    """Every tenant by name (parents listed before their children), and how pods map."""

    tenants: Mapping[str, Tenant]
    default_tenant: str | None = None  # None: a pod that maps to no tenant is rejected
    queue_label: str = QUEUE_LABEL
    half_life_s: float = 24 * 3600.0  # how fast past usage is forgiven in fair-share order
    reservations: int = 4  # gangs at the head that get a backfill reservation (bf_max_job_test)
    starvation_s: float = 3600.0  # a gang waiting longer always gets a reservation
    # DRA DeviceClass -> the quota resource its devices count as (queues.demand.device_demand)
    device_classes: Mapping[str, str] = field(default_factory=dict)
    _by_namespace: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)
    _by_queue: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)
    _paths: Mapping[str, tuple[Tenant, ...]] = field(
        default_factory=dict, compare=False, repr=False
    )

    def __post_init__(self) -> None:
        by_namespace: dict[str, str] = {}
        by_queue: dict[str, str] = {}
        for tenant in self.tenants.values():
            if tenant.parent is not None and tenant.parent not in self.tenants:
                raise ValueError(f"tenant {tenant.name}: parent {tenant.parent} is not a tenant")
            for namespace in tenant.namespaces:
                by_namespace.setdefault(namespace, tenant.name)
            for queue in tenant.queues:
                by_queue.setdefault(queue, tenant.name)
        if self.default_tenant is not None and self.default_tenant not in self.tenants:
            raise ValueError(f"defaultTenant {self.default_tenant} is not a tenant")
        object.__setattr__(self, "_by_namespace", by_namespace)
        object.__setattr__(self, "_by_queue", by_queue)
        object.__setattr__(self, "_paths", {name: self._walk(name) for name in self.tenants})

    def tenant_of(self, namespace: str, labels: Mapping[str, str]) -> str | None:
        """The tenant a pod (or PodGroup) belongs to: its queue label first, then its
        namespace, then the default tenant; None when it belongs nowhere."""
        queue = labels.get(self.queue_label)
        if queue is not None and queue in self._by_queue:
            return self._by_queue[queue]
        found = self._by_namespace.get(namespace)
        return found if found is not None else self.default_tenant

    def path(self, name: str) -> tuple[Tenant, ...]:
        """The tenant and its ancestors, root first."""
        return self._paths[name]

    def _walk(self, name: str) -> tuple[Tenant, ...]:
        chain: list[Tenant] = []
        current: str | None = name
        while current is not None:
            if len(chain) > len(self.tenants):
                raise ValueError(f"tenant {name}: its parents form a cycle")
            tenant = self.tenants[current]
            chain.append(tenant)
            current = tenant.parent
        return tuple(reversed(chain))

    def children(self, name: str | None) -> list[Tenant]:
        """The roots (name None) or a tenant's children, in configuration order."""
        return [t for t in self.tenants.values() if t.parent == name]

    def is_leaf(self, name: str) -> bool:
        return not any(t.parent == name for t in self.tenants.values())


def single_tenant_policy() -> QuotaPolicy:
    """No quota file: every pod in one unlimited tenant, so ordering is priority then age."""
    return QuotaPolicy({"default": Tenant("default")}, default_tenant="default")
