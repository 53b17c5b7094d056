"""Which tenant goes next: below-guarantee tenants first, then weighted dominant share.

For one tenant, at every level of its path (organisation, then team):
1. a tenant whose next gang would still fit inside its guarantee comes before one that would
   have to borrow (guarantees are promises, borrowing is a favour);
2. among equals, the lower weighted dominant share goes first: the largest, over resources,
   of effective usage / cluster capacity, divided by the tenant's weight (DRF with weights).
   Effective usage includes decayed history (queues.usage), so a tenant that ran a lot
   yesterday yields today.

Within a tenant, gangs go by priority, then age (`gang_order`). Purely computational.
"""

from __future__ import annotations

from collections.abc import Mapping

from queues.model import Amounts, QuotaPolicy, Tenant
from queues.usage import UsageLedger

RankKey = tuple[tuple[int, float], ...]


def within_guarantee(tenant: Tenant, usage: Mapping[str, int], demand: Amounts) -> bool:
    """Whether `demand` on top of `usage` stays inside the tenant's guarantee: every resource
    the guarantee names, and the demand asks for, stays at or under it."""
    named = [r for r, amount in demand.items() if amount > 0 and r in tenant.guaranteed]
    if not named:
        return False
    return all(usage.get(r, 0) + demand[r] <= tenant.guaranteed[r] for r in named)


def dominant_share(effective: Mapping[str, float], capacity: Amounts, weight: float) -> float:
    """max over resources of usage / capacity, divided by weight; resources the cluster does
    not have are left out (nothing to share)."""
    share = 0.0
    for name, used in effective.items():
        cap = capacity.get(name, 0)
        if cap > 0 and used > 0:
            share = max(share, used / cap)
    return share / weight


def rank_key(
    policy: QuotaPolicy,
    ledger: UsageLedger,
    tenant: str,
    demand: Amounts,
    capacity: Amounts,
    now: float,
) -> RankKey:
    """Smaller goes first. One (borrows?, share) pair per level, root first."""
    key = []
    for node in policy.path(tenant):
        borrows = 0 if within_guarantee(node, ledger.current(node.name), demand) else 1
        share = dominant_share(ledger.effective(node.name, now), capacity, node.weight)
        key.append((borrows, share))
    return tuple(key)


def gang_order(priority: int, created: float, name: str) -> tuple[int, float, str]:
    """Within a tenant: higher priority first, then older, then by name."""
    return (-priority, created, name)
