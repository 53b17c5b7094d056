"""Hypothesis: admitting only what check_admission admits, no tenant ever exceeds its max, and
borrowing never takes the idle guarantee of a tenant that does not lend it (DESIGN.md, 4)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from hypothesis import given, settings
from hypothesis import strategies as st

from queues.model import GPU, Amounts, QuotaPolicy, Tenant, flavor_key, total
from queues.quota import check_admission
from queues.usage import UsageLedger

H100 = flavor_key("NVIDIA-H100-80GB-HBM3")
CAPACITY: Amounts = {GPU: 32_000, H100: 16_000, "cpu": 256_000}
STEPS = {GPU: 1000, H100: 1000, "cpu": 8000}  # amounts are drawn in these steps


@st.composite
def amounts(draw: st.DrawFn, most: float) -> dict[str, int]:
    """Some of the resources, each up to `most` of the cluster's capacity."""
    names = draw(st.sets(st.sampled_from(sorted(STEPS))))
    top = {n: int(CAPACITY[n] * most) // STEPS[n] for n in names}
    return {n: draw(st.integers(0, top[n])) * STEPS[n] for n in sorted(names)}


@st.composite
def tenant(draw: st.DrawFn, name: str, parent: str | None) -> Tenant:
    guaranteed = draw(amounts(0.4))
    limit = draw(amounts(0.8))
    limit = {n: max(a, guaranteed.get(n, 0)) for n, a in limit.items()}  # as the config checks
    return Tenant(
        name, parent=parent, guaranteed=guaranteed, max=limit, lend_idle=draw(st.booleans())
    )


@st.composite
def policies(draw: st.DrawFn) -> QuotaPolicy:
    tenants: dict[str, Tenant] = {}
    for i in range(draw(st.integers(1, 3))):
        root = f"org{i}"
        org = draw(tenant(root, None))
        teams = [draw(tenant(f"{root}/team{j}", root)) for j in range(draw(st.integers(0, 3)))]
        # As the config has it: an organisation guarantees at least what its teams do.
        floor = total(t.guaranteed for t in teams)
        guaranteed = {n: max(org.guaranteed.get(n, 0), floor.get(n, 0)) for n in STEPS}
        limit = {n: max(a, guaranteed[n]) for n, a in org.max.items()}
        tenants[root] = replace(org, guaranteed=guaranteed, max=limit)
        tenants.update((t.name, t) for t in teams)  # zero teams: a flat tenant
    return QuotaPolicy(tenants)


@dataclass(frozen=True, slots=True)
class Admit:
    leaf: int  # index into the policy's leaves
    demand: dict[str, int]


@dataclass(frozen=True, slots=True)
class Release:
    which: int  # index into what runs


def _demand(gpus: int, on_h100: bool, cpu: int) -> dict[str, int]:
    out = {GPU: gpus * 1000, "cpu": cpu * 1000}
    if on_h100:
        out[H100] = gpus * 1000
    return {n: a for n, a in out.items() if a}


demands = st.builds(
    _demand, st.integers(0, 12), st.booleans(), st.sampled_from((0, 1, 8, 64))
).filter(bool)
steps = st.lists(
    st.one_of(
        st.builds(Admit, st.integers(0, 20), demands),
        st.builds(Release, st.integers(0, 50)),
    ),
    min_size=1,
    max_size=40,
)


def _usage(
    policy: QuotaPolicy, running: list[tuple[str, dict[str, int]]]
) -> dict[str, dict[str, int]]:
    """Every tenant's usage summed from what runs, without the ledger."""
    out: dict[str, dict[str, int]] = {name: {} for name in policy.tenants}
    for leaf, demand in running:
        for node in policy.path(leaf):
            for name, amount in demand.items():
                out[node.name][name] = out[node.name].get(name, 0) + amount
    return out


def _kept_idle(
    policy: QuotaPolicy, path: set[str], usage: dict[str, dict[str, int]]
) -> dict[str, int]:
    """The idle guarantee that tenants off the path keep (do not lend), counted once: an
    organisation that keeps its own covers its teams' (their usage is its usage; a team that
    used its organisation's guarantee got it back by preemption inside the organisation)."""
    kept: dict[str, int] = {}
    for t in policy.tenants.values():
        if t.name in path or t.lend_idle:
            continue
        parent = policy.tenants[t.parent] if t.parent is not None else None
        if parent is not None and parent.name not in path and not parent.lend_idle:
            continue
        for n, a in t.guaranteed.items():
            kept[n] = kept.get(n, 0) + max(0, a - usage[t.name].get(n, 0))
    return kept


@settings(max_examples=300, deadline=None)
@given(policies(), steps)
def test_no_tenant_ever_exceeds_its_max_nor_borrows_a_kept_guarantee(
    policy: QuotaPolicy, plan: list[Admit | Release]
) -> None:
    leaves = [name for name in policy.tenants if policy.is_leaf(name)]
    ledger = UsageLedger(half_life_s=600.0)
    running: list[tuple[str, dict[str, int]]] = []
    admitted = 0
    for now, step in enumerate(plan):
        if isinstance(step, Release):
            if running:
                leaf, demand = running.pop(step.which % len(running))
                ledger.remove(policy, leaf, demand, float(now))
            continue
        leaf = leaves[step.leaf % len(leaves)]
        in_use = {n: sum(d.get(n, 0) for _, d in running) for n in CAPACITY}
        admission = check_admission(policy, ledger, leaf, step.demand, 0, CAPACITY, in_use)
        fits = all(in_use[n] + a <= CAPACITY[n] for n, a in step.demand.items())
        if not (admission.admitted and fits):  # placement refuses what the cluster lacks
            continue
        admitted += 1
        ledger.add(policy, leaf, step.demand, float(now))
        running.append((leaf, step.demand))
        usage = _usage(policy, running)
        for t in policy.tenants.values():
            assert dict(ledger.current(t.name)) == {n: a for n, a in usage[t.name].items() if a}
            for name, limit in t.max.items():
                assert usage[t.name].get(name, 0) <= limit, (t.name, name)
        path = policy.path(leaf)
        borrows = any(
            usage[node.name].get(n, 0) > node.guaranteed.get(n, 0)
            for node in path
            for n in step.demand
        )
        if not borrows:
            continue
        free = {n: CAPACITY[n] - in_use[n] - step.demand.get(n, 0) for n in CAPACITY}
        kept = _kept_idle(policy, {t.name for t in path}, usage)
        for name, idle in kept.items():
            if step.demand.get(name, 0):
                assert free[name] >= idle, (leaf, name, free[name], idle)
