"""The cost order of a victim set, and cheap arithmetic bounds that prune the search.

A cost is a tuple compared lexicographically, smaller is better. The first five are
kube-scheduler's DefaultPreemption order for picking a candidate (pickOneNodeForPreemption):
  1. victims beyond their PodDisruptionBudget (PDB violations),
  2. the highest victim priority,
  3. the sum of victim priorities, each offset by 2**31 as kube does (so every victim adds),
  4. victim pods,
  5. how long the longest-running victim of that highest priority has run (kube: the
     latest start time among them wins);
then ours, for what kube leaves tied: GPUs lost, seconds run summed over the victims, nodes
touched, zones touched. The last two make a gang preemptor's victims sit on as few nodes,
then zones, as the rest allows.

Arithmetic here never decides that a preemptor fits (the framework does); it only rules out
sets that cannot possibly free enough, which is safe because plugins only ever ask for more.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from batchsched.model.pod import PodView
from batchsched.model.resources import CPU, EPHEMERAL_STORAGE, MEMORY, NVIDIA_GPU, PODS
from batchsched.preemption.model import DisruptionBudget, budget_violations
from batchsched.preemption.units import NodeFacts, Unit
from batchsched.snapshot import NodeInfo, Snapshot

Cost = tuple[int, ...]


def budgets_broken(units: Iterable[Unit], budgets: Sequence[DisruptionBudget]) -> int:
    """Victims of the set beyond their budget's status.disruptionsAllowed."""
    taken: dict[int, int] = {}
    for unit in units:
        for index, count in unit.budget_hits:
            taken[index] = taken.get(index, 0) + count
    return budget_violations(taken, budgets)


def plan_cost(units: Sequence[Unit], budgets: Sequence[DisruptionBudget]) -> Cost:
    nodes: set[str] = set()
    zones: set[str] = set()
    for unit in units:
        nodes |= unit.nodes
        zones |= unit.zones
    top = max((u.priority for u in units), default=0)
    return (
        budgets_broken(units, budgets),
        top,
        sum(u.priority_sum for u in units),
        sum(len(u.pods) for u in units),
        max((u.top_run_s for u in units if u.priority == top), default=0),
        sum(u.gpus for u in units),
        sum(u.run_s for u in units),
        len(nodes),
        len(zones),
    )


def evict_first(unit: Unit) -> tuple[int, ...]:
    """Sort key, cheapest to evict first (a unit that alone breaks a budget goes last)."""
    return (
        unit.breaks_alone,
        unit.priority,
        unit.priority_sum,
        len(unit.pods),
        unit.top_run_s,
        unit.gpus,
        unit.run_s,
    )


def demand(pods: Iterable[PodView]) -> dict[str, int]:
    """What the pods ask of nodes, a pod slot each included."""
    total: dict[str, int] = {}
    for pod in pods:
        req = pod.requests
        for name in req.names():
            total[name] = total.get(name, 0) + req.get(name)
        total[PODS] = total.get(PODS, 0) + 1
    return total


def free_of(info: NodeInfo, names: Iterable[str]) -> dict[str, int]:
    """Allocatable minus requested, for the named resources (negative when over-committed)."""
    free: dict[str, int] = {}
    for name in names:
        if name == CPU:
            free[name] = info.alloc_milli_cpu - info.req_milli_cpu
        elif name == MEMORY:
            free[name] = info.alloc_memory - info.req_memory
        elif name == EPHEMERAL_STORAGE:
            free[name] = info.alloc_ephemeral - info.req_ephemeral
        elif name == PODS:
            free[name] = info.alloc_pods - len(info.pods)
        else:
            free[name] = info.alloc_scalar.get(name, 0) - info.req_scalar.get(name, 0)
    return free


def shortfall(info: NodeInfo, need: Mapping[str, int]) -> dict[str, int]:
    """What the node lacks of `need` right now; empty when the resources are there."""
    free = free_of(info, need)
    return {name: amount - free[name] for name, amount in need.items() if amount > free[name]}


def node_covers(node: str, short: Mapping[str, int], units: Iterable[Unit]) -> bool:
    """Whether evicting `units` frees at least `short` on `node` (a necessary condition)."""
    left = dict(short)
    for unit in units:
        for name, amount in unit.freed.get(node, {}).items():
            if name in left:
                left[name] -= amount
    return all(v <= 0 for v in left.values())


def cluster_free(snapshot: Snapshot, need: Mapping[str, int]) -> dict[str, int]:
    """Free resources summed over nodes, over-committed nodes counting as 0."""
    total = dict.fromkeys(need, 0)
    for info in snapshot.nodes:
        for name, amount in free_of(info, need).items():
            total[name] += max(0, amount)
    return total


def cluster_covers(short: Mapping[str, int], units: Iterable[Unit]) -> bool:
    """Whether evicting `units` frees at least `short` over the whole cluster."""
    left = dict(short)
    for unit in units:
        for amounts in unit.freed.values():
            for name, amount in amounts.items():
                if name in left:
                    left[name] -= amount
    return all(v <= 0 for v in left.values())


def fewest_covering(short: Mapping[str, int], freed: Callable[[str], Iterable[int]]) -> int | None:
    """The fewest victims whose freed amounts cover `short`, resource by resource (a bound:
    the same victims need not cover every resource); None when all of them are too few.
    `freed(name)` gives each victim's amount of that resource."""
    needed = 1
    for name, amount in short.items():
        got = 0
        for taken, size in enumerate(sorted(freed(name), reverse=True), 1):
            got += size
            if got >= amount:
                needed = max(needed, taken)
                break
        else:
            return None
    return needed


def node_lower_bound(short: Mapping[str, int], facts: NodeFacts) -> Cost | None:
    """A cost no victim set on this node can beat, or None when even all units are too few.

    Each part bounds its own component, so the tuple bounds the cost lexicographically."""
    count = len(facts.pods)
    if not count:
        return None
    needed = fewest_covering(short, lambda name: facts.freed[name])
    if needed is None:
        return None
    columns = (facts.priority_sums, facts.pods, facts.gpus, facts.runs)
    if needed == count:
        sums, pods, gpus, runs = (sum(c) for c in columns)
    else:
        sums, pods, gpus, runs = (sum(sorted(c)[:needed]) for c in columns)
    gpus = max(gpus, short.get(NVIDIA_GPU, 0))
    lowest = min(facts.priorities)
    return (0, lowest, sums, pods, _top_run_bound(facts, lowest, needed), gpus, runs, 1, 1)


def _top_run_bound(facts: NodeFacts, lowest: int, needed: int) -> int:
    """The longest run at the top priority, for a set whose top priority is `lowest` (a set
    with a higher one costs more already, whatever comes after the priority): all its units
    are of that priority, and it has at least `needed` of them."""
    runs = sorted(r for r, p in zip(facts.top_runs, facts.priorities, strict=True) if p == lowest)
    return runs[min(needed, len(runs)) - 1]
