"""Invariants of the planner on random small clusters, and minimality against brute force."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from batchsched.model.pod import PodView
from batchsched.preemption import (
    DisruptionBudget,
    NoPlan,
    PreemptionPlan,
    PreemptionRequest,
    plan_preemption,
)
from batchsched.preemption.cost import plan_cost
from batchsched.preemption.units import Unit, collect
from batchsched.snapshot import Snapshot
from tests.preemption.scenario import (
    NOW,
    budget,
    cluster,
    fits_after,
    group,
    pod,
    request,
    runner,
)


@dataclass(frozen=True)
class Case:
    nodes: list[tuple[str, int]]
    running: list[PodView]
    req: PreemptionRequest
    zones: dict[str, str]

    def snapshot(self) -> Snapshot:
        return cluster(self.nodes, self.running, self.zones)


@st.composite
def _running(draw: st.DrawFn, nodes: list[tuple[str, int]]) -> list[PodView]:
    room = dict(nodes)
    running: list[PodView] = []
    for u in range(draw(st.integers(1, 6))):
        size = draw(st.sampled_from([1, 2, 4, 4]))
        members = draw(st.sampled_from([1, 1, 2, 3]))
        priority = draw(st.integers(0, 3))
        team = draw(st.sampled_from(["a", "b"]))
        gang = f"g{u}" if members > 1 else ""
        for m in range(members):
            spots = [n for n, free in room.items() if free >= size]
            if not spots:
                break
            node = draw(st.sampled_from(spots))
            room[node] -= size
            # Now and then a gang member of higher priority: the gang may not be a victim.
            bump = draw(st.sampled_from([0, 0, 0, 3])) if m else 0
            running.append(
                pod(f"u{u}-{m}", size, priority + bump, node, gang, labels={"team": team})
            )
    return running


@st.composite
def cases(draw: st.DrawFn) -> Case:
    nodes = [(f"n{i}", draw(st.sampled_from([4, 8]))) for i in range(draw(st.integers(1, 3)))]
    zones = {name: draw(st.sampled_from(["z1", "z2"])) for name, _ in nodes}
    running = draw(_running(nodes))
    priority = draw(st.integers(1, 5))
    size = draw(st.sampled_from([2, 4, 4, 8]))
    uids = [p.uid for p in running]
    young = draw(st.sets(st.sampled_from(uids), max_size=1)) if uids else set()
    started = {uid: NOW - (10 if uid in young else 1000 + i) for i, uid in enumerate(uids)}
    reclaimable = (
        frozenset(draw(st.sets(st.sampled_from(uids), max_size=2))) if uids else frozenset()
    )
    budgets = draw(
        st.lists(
            st.builds(budget, st.just("pdb"), st.integers(0, 1), team=st.sampled_from(["a", "b"])),
            max_size=1,
        )
    )
    if draw(st.booleans()):
        preemptor = [pod("high", size, priority)]
        grp = None
    else:
        preemptor = [pod(f"high-{i}", size, priority, gang="high") for i in range(2)]
        grp = group("high", 2)
    req = request(
        preemptor,
        running,
        grp,
        started=started,
        min_runtime_s=60,
        budgets=budgets,
        reclaimable=reclaimable,
    )
    return Case(nodes, running, req, zones)


def state_of(snapshot: Snapshot) -> list[tuple[object, ...]]:
    """Everything a scheduling cycle reads from a snapshot (generations aside)."""
    rows: list[tuple[object, ...]] = []
    for info in snapshot.nodes:
        gpu = info.gpu
        rows.append(
            (
                info.name,
                sorted(info.pods),
                info.requested,
                info.nz_milli_cpu,
                info.nz_memory,
                sorted(repr(port) for port in info.used_ports),
                None if gpu is None else (tuple(gpu.free), sorted(gpu.grants.items())),
                tuple(snapshot.node_of(uid) is info for uid in info.pods),
            )
        )
    rows.append((snapshot.pods_with_affinity, snapshot.pods_with_required_anti_affinity))
    return rows


def fits_without(case: Case, units: tuple[Unit, ...]) -> bool:
    victims = tuple(u.victim() for u in units)
    return fits_after(
        PreemptionPlan(victims, {}, 0), case.req, case.nodes, case.running, case.zones
    )


SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(cases())
def test_a_plan_is_safe_and_leaves_the_snapshot_as_it_was(case: Case) -> None:
    snapshot = case.snapshot()
    before = state_of(snapshot)
    plan = plan_preemption(case.req, snapshot, runner())
    assert state_of(snapshot) == before
    event(type(plan).__name__)
    if isinstance(plan, NoPlan):
        return
    top = case.req.priority
    for victim in plan.victim_pods():
        assert victim.priority < top or victim.uid in case.req.reclaimable
        assert NOW - case.req.started[victim.uid] >= case.req.min_runtime_s
    evicted = {p.uid for p in plan.victim_pods()}
    for victim in plan.victim_pods():
        gang = case.req.gang_of.get(victim.uid)
        members = {p.uid for p in case.running if gang and case.req.gang_of.get(p.uid) == gang}
        assert members <= evicted, f"gang {gang} left partly alive"
    assert fits_after(plan, case.req, case.nodes, case.running, case.zones)
    assert set(plan.placements) <= {p.uid for p in case.req.preemptor}


@SETTINGS
@given(cases())
def test_the_plan_is_the_cheapest_set_by_brute_force(case: Case) -> None:
    assume(not fits_without(case, ()))
    units = collect(case.req, case.snapshot()).units
    best: tuple[int, ...] | None = None
    for size in range(1, len(units) + 1):
        for chosen in combinations(units, size):
            cost = plan_cost(chosen, case.req.budgets)
            if (best is None or cost < best) and fits_without(case, chosen):
                best = cost
    plan = plan_preemption(case.req, case.snapshot(), runner())
    event(f"{'gang' if case.req.group else 'pod'} {'no plan' if best is None else 'plan'}")
    if best is None:
        assert isinstance(plan, NoPlan)
    else:
        assert isinstance(plan, PreemptionPlan), plan
        assert plan.cost == best
        assert plan.budget_violations == best[0]


def kube_order(
    units: tuple[Unit, ...], budgets: list[DisruptionBudget], started: dict[str, float]
) -> tuple[int, ...]:
    """kube-scheduler's pickOneNodeForPreemption criteria, read from the victim pods
    themselves (filterPodsWithPDBViolation for the violations), smaller first."""
    pods = [p for u in units for p in u.pods]
    allowed = [b.disruptions_allowed for b in budgets]
    violating = 0
    for victim in pods:
        hit = False
        for i, b in enumerate(budgets):
            if b.covers(victim):
                allowed[i] -= 1
                hit = hit or allowed[i] < 0
        violating += hit
    top = max(p.priority for p in pods)
    offset_sum = sum(p.priority + 2**31 for p in pods)
    earliest_top_start = min(started[p.uid] for p in pods if p.priority == top)
    return (violating, top, offset_sum, len(pods), int(-earliest_top_start))


@SETTINGS
@given(cases(), st.data())
def test_the_cost_order_refines_kube_schedulers_candidate_order(
    case: Case, data: st.DataObject
) -> None:
    units = collect(case.req, case.snapshot()).units
    assume(units)
    pick = st.lists(st.sampled_from(units), min_size=1, unique_by=id).map(tuple)
    first, second = data.draw(pick), data.draw(pick)
    budgets, started = list(case.req.budgets), dict(case.req.started)
    kube_first, kube_second = (kube_order(u, budgets, started) for u in (first, second))
    ours_first, ours_second = (plan_cost(u, budgets) for u in (first, second))
    if kube_first < kube_second:
        assert ours_first < ours_second
    elif kube_second < kube_first:
        assert ours_second < ours_first
    assert ours_first[:4] == kube_first[:4]
