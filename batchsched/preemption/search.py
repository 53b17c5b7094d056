"""The cheapest set of victim units that lets the preemptor fit.

Exact when there are few units (at most EXACT_LIMIT): every subset that could free enough,
cheapest first, until the framework says one fits. Beyond that, or when the exact search
would ask the framework too often, greedy add-then-reprieve: add units cheapest first
until the preemptor fits (a binary search over the prefix), then put back every unit,
costliest first, whose absence is not needed.

Both assume that evicting more never makes the preemptor fit less (true for resources,
ports and GPUs; a preemptor whose affinity needs a victim to stay is the exception, and
the final answer is still checked by the framework).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from batchsched.preemption.cost import Cost, evict_first
from batchsched.preemption.units import Unit

# 2**12 subsets take about 40 ms to cost in CPython; more than that is greedy's job.
EXACT_LIMIT: Final = 12
# Framework questions one exact search may ask before handing over to greedy.
MAX_EXACT_CHECKS: Final = 128

Check = Callable[[Sequence[Unit]], bool]
CostOf = Callable[[Sequence[Unit]], Cost]


@dataclass(frozen=True, slots=True)
class Found:
    units: tuple[Unit, ...]
    cost: Cost


def cheapest(
    units: Sequence[Unit],
    fits: Check,
    could_fit: Check,
    cost_of: CostOf,
    domains: Sequence[frozenset[str]] = (),
) -> Found:
    """The cheapest fitting subset; `fits(units)` must already be known to hold.

    `could_fit` is an arithmetic necessary condition (cheap); `fits` asks the framework.
    `domains` (sets of node names) give greedy extra orders that try one domain first."""
    if len(units) <= EXACT_LIMIT:
        found = _exact(units, fits, could_fit, cost_of)
        if found is not None:
            return found
    best: Found | None = None
    for order in _orders(units, domains):
        found = _greedy(order, fits, could_fit, cost_of)
        if best is None or found.cost < best.cost:
            best = found
    assert best is not None
    return best


def _exact(units: Sequence[Unit], fits: Check, could_fit: Check, cost_of: CostOf) -> Found | None:
    ranked: list[tuple[Cost, int, tuple[Unit, ...]]] = []
    for mask in range(1, 1 << len(units)):
        chosen = tuple(u for i, u in enumerate(units) if mask >> i & 1)
        if could_fit(chosen):
            ranked.append((cost_of(chosen), mask, chosen))
    ranked.sort(key=lambda item: (item[0], item[1]))
    failed: list[int] = []
    for cost, mask, chosen in ranked:
        # A subset of a set that did not fit cannot fit either.
        if any(mask & ~f == 0 for f in failed):
            continue
        if len(failed) >= MAX_EXACT_CHECKS:
            return None
        if fits(chosen):
            return Found(chosen, cost)
        failed.append(mask)
    return None


def _orders(units: Sequence[Unit], domains: Sequence[frozenset[str]]) -> list[list[Unit]]:
    base = sorted(units, key=evict_first)
    orders = [base]
    for domain in domains:
        inside = [u for u in base if u.nodes <= domain]
        if inside:
            orders.append(inside + [u for u in base if not u.nodes <= domain])
    return orders


def _greedy(order: list[Unit], fits: Check, could_fit: Check, cost_of: CostOf) -> Found:
    def ok(chosen: Sequence[Unit]) -> bool:
        return could_fit(chosen) and fits(chosen)

    low, high = 1, len(order)  # the whole order fits
    while low < high:
        middle = (low + high) // 2
        if ok(order[:middle]):
            high = middle
        else:
            low = middle + 1
    chosen = order[:low]
    for unit in sorted(chosen, key=evict_first, reverse=True):
        rest = [u for u in chosen if u is not unit]
        if rest and ok(rest):
            chosen = rest
    return Found(tuple(chosen), cost_of(chosen))
