"""May this tenant start this gang now? Quota arithmetic, purely computational.

A gang is admitted when, after it starts:
1. its priority is inside every tenant's allowed range on its path;
2. no tenant on its path is above its `max` for any resource the max names;
3. it takes nobody's protected guarantee: whatever it uses beyond its own guarantee is
   borrowed, and borrowing must leave free, on the cluster, the idle guarantee of every
   tenant that does not lend (`lendIdle: false`) and is not on the gang's own path.

What a gang uses above its tenant's guarantee is `borrowed`: it is reclaimable (the preemption
work reclaims it for a tenant that comes back below its guarantee).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from queues.model import Amounts, QuotaPolicy, Tenant, describe
from queues.usage import UsageLedger


@dataclass(frozen=True, slots=True)
class Admission:
    admitted: bool
    reason: str = ""  # why not, in words a user understands
    borrowed: Mapping[str, int] = field(default_factory=dict)  # above the leaf's guarantee

    @property
    def reclaimable(self) -> bool:
        return any(amount > 0 for amount in self.borrowed.values())


def check_admission(
    policy: QuotaPolicy,
    ledger: UsageLedger,
    tenant: str,
    demand: Amounts,
    priority: int,
    capacity: Amounts,
    in_use: Amounts,
) -> Admission:
    """`capacity` is what the cluster offers tenants, `in_use` what every tenant uses now."""
    path = policy.path(tenant)
    for node in path:
        if not node.allows_priority(priority):
            return Admission(False, _priority_reason(node, priority))
    for node in path:
        over = _over_max(node, ledger.current(node.name), demand)
        if over:
            return Admission(False, over)
    leaf = path[-1]
    borrowed = _borrowed(leaf, ledger.current(leaf.name), demand)
    # An organisation above its guarantee borrows too, even for a team inside its own.
    if any(any(_borrowed(n, ledger.current(n.name), demand).values()) for n in path):
        protected = _protected_reason(policy, path, ledger, demand, capacity, in_use)
        if protected:
            return Admission(False, protected)
    return Admission(True, borrowed={r: a for r, a in borrowed.items() if a})


def never_refuses(policy: QuotaPolicy) -> bool:
    """Whether `check_admission` admits every demand of every tenant of `policy` whatever the
    usage: no priority range, no max, and no guarantee kept from borrowers (`lendIdle: false`)
    — the single unlimited tenant of a scheduler run without a quota file, for one. The live
    scheduler then skips the arithmetic on its per-pod path."""
    return all(
        tenant.min_priority is None
        and tenant.max_priority is None
        and not tenant.max
        and (tenant.lend_idle or not any(a > 0 for a in tenant.guaranteed.values()))
        for tenant in policy.tenants.values()
    )


def _priority_reason(tenant: Tenant, priority: int) -> str:
    low = "" if tenant.min_priority is None else str(tenant.min_priority)
    high = "" if tenant.max_priority is None else str(tenant.max_priority)
    return f"priority {priority} is outside tenant {tenant.name}'s allowed range {low}..{high}"


def _over_max(tenant: Tenant, usage: Mapping[str, int], demand: Amounts) -> str:
    for name, limit in tenant.max.items():
        want = demand.get(name, 0)
        if want and usage.get(name, 0) + want > limit:
            return (
                f"tenant {tenant.name} would exceed its max {describe(name, limit)}: "
                f"{describe(name, usage.get(name, 0))} in use + {describe(name, want)} requested"
            )
    return ""


def _borrowed(tenant: Tenant, usage: Mapping[str, int], demand: Amounts) -> dict[str, int]:
    """The part of `demand` that lands above the tenant's guarantee."""
    out = {}
    for name, want in demand.items():
        if want <= 0:
            continue
        room = max(0, tenant.guaranteed.get(name, 0) - usage.get(name, 0))
        out[name] = max(0, want - room)
    return out


def _protected_reason(
    policy: QuotaPolicy,
    path: tuple[Tenant, ...],
    ledger: UsageLedger,
    demand: Amounts,
    capacity: Amounts,
    in_use: Amounts,
) -> str:
    """Borrowing must leave the idle guarantee of non-lending tenants free. Counted at the
    highest level off the gang's path (an organisation's guarantee covers its teams')."""
    on_path = {t.name for t in path}
    protected: dict[str, int] = {}
    for tenant in policy.tenants.values():
        if tenant.name in on_path or tenant.lend_idle:
            continue
        parent = policy.tenants.get(tenant.parent) if tenant.parent is not None else None
        if parent is not None and parent.name not in on_path and not parent.lend_idle:
            continue  # the organisation's kept guarantee covers its team's
        usage = ledger.current(tenant.name)
        for name, amount in tenant.guaranteed.items():
            idle = max(0, amount - usage.get(name, 0))
            if idle:
                protected[name] = protected.get(name, 0) + idle
    for name, keep in protected.items():
        want = demand.get(name, 0)
        free = capacity.get(name, 0) - in_use.get(name, 0)
        if want and free - want < keep:
            return (
                f"borrowing {describe(name, want)} would take idle guaranteed quota that "
                f"tenants not lending it keep ({describe(name, keep)} reserved, "
                f"{describe(name, max(0, free))} free)"
            )
    return ""
