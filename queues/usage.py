"""What each tenant uses now, and what it used lately (decayed), on an explicit clock.

Usage is kept for every tenant on a path: admitting a gang of team "research/vision" adds to
"research/vision" and to "research", so checks against an organisation's max cost no sums.

The history is the exponentially decayed integral of usage (resource-seconds):
H(t) = integral of u(s) * exp(-(t - s) / tau) ds, with tau = half_life / ln 2, so what a tenant
used one half-life ago weighs half as much as what it uses now. `effective` is u + H / tau:
a tenant that has run at a steady rate u for long counts 2u, one that just started counts u,
and one that ran a lot yesterday still counts some of it today. No external database: the
ledger lives in the scheduler and is rebuilt from running pods on restart (history restarts
from zero then, which only forgives the past early).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from queues.model import Amounts, QuotaPolicy


@dataclass
class _Account:
    current: dict[str, int] = field(default_factory=dict)
    history: dict[str, float] = field(default_factory=dict)  # decayed resource-seconds
    updated: float = 0.0


class UsageLedger:
    """Current and decayed usage per tenant. Every method takes `now` (seconds, any epoch that
    only moves forward): the ledger never reads a clock."""

    def __init__(self, half_life_s: float, now: float = 0.0) -> None:
        if half_life_s <= 0:
            raise ValueError("half_life_s must be positive")
        self.tau = half_life_s / math.log(2)
        self._start = now
        self._accounts: dict[str, _Account] = {}
        self._versions: dict[str, int] = {}
        self.version = 0  # bumped by every change to any tenant

    def add(self, policy: QuotaPolicy, tenant: str, amounts: Amounts, now: float) -> None:
        """`tenant` (and its ancestors) started using `amounts`."""
        self._apply(policy, tenant, amounts, 1, now)

    def remove(self, policy: QuotaPolicy, tenant: str, amounts: Amounts, now: float) -> None:
        """`tenant` (and its ancestors) stopped using `amounts`."""
        self._apply(policy, tenant, amounts, -1, now)

    def current(self, tenant: str) -> Mapping[str, int]:
        account = self._accounts.get(tenant)
        return account.current if account is not None else {}

    def effective(self, tenant: str, now: float) -> dict[str, float]:
        """Usage now plus decayed history per unit of time (see the module docstring)."""
        account = self._accounts.get(tenant)
        if account is None:
            return {}
        history = self._decayed(account, now)
        names = set(account.current) | set(history)
        return {n: account.current.get(n, 0) + history.get(n, 0.0) / self.tau for n in names}

    def versions(self, policy: QuotaPolicy, tenant: str) -> tuple[int, ...]:
        """Change counters of the tenant's path: equal tuples mean unchanged current usage."""
        return tuple(self._versions.get(node.name, 0) for node in policy.path(tenant))

    def tenants(self) -> list[str]:
        return sorted(self._accounts)

    def _apply(
        self, policy: QuotaPolicy, tenant: str, amounts: Amounts, sign: int, now: float
    ) -> None:
        self.version += 1
        for node in policy.path(tenant):
            account = self._accounts.setdefault(node.name, _Account(updated=now))
            account.history = self._decayed(account, now)
            account.updated = now
            self._versions[node.name] = self._versions.get(node.name, 0) + 1
            for name, amount in amounts.items():
                left = account.current.get(name, 0) + sign * amount
                if left:
                    account.current[name] = left
                else:
                    account.current.pop(name, None)

    def _decayed(self, account: _Account, now: float) -> dict[str, float]:
        """History brought forward to `now`, usage since the last change included."""
        elapsed = max(0.0, now - account.updated)
        if elapsed == 0.0:
            return dict(account.history)
        keep = math.exp(-elapsed / self.tau)
        gained = self.tau * (1.0 - keep)
        names = set(account.current) | set(account.history)
        out = {}
        for name in names:
            value = account.history.get(name, 0.0) * keep + account.current.get(name, 0) * gained
            if value > 1e-9:
                out[name] = value
        return out
