"""The cost order of a victim set, and cheap arithmetic bounds that prune the search.

A cost is a tuple compared lexicographically, smaller is better:
(PDBs broken, victim pods, highest victim priority, GPUs lost, seconds run, nodes touched,
zones touched). The last two make a gang preemptor's victims sit on as few nodes, then
zones, as the rest allows.

Arithmetic here never decides that a preemptor fits (the framework does); it only rules out
sets that cannot possibly free enough, which is safe because plugins only ever ask for more.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from batchsched.model.pod import PodView
from batchsched.model.resources import CPU, EPHEMERAL_STORAGE, MEMORY, NVIDIA_GPU, PODS
from batchsched.preemption.model import DisruptionBudget
from batchsched.preemption.units import NodeFacts, Unit
from batchsched.snapshot import NodeInfo, Snapshot

Cost = tuple[int, ...]


def budgets_broken(units: Iterable[Unit], budgets: Sequence[DisruptionBudget]) -> int:
    """How many budgets the set evicts more pods of than status.disruptionsAllowed permits."""
    taken: dict[int, int] = {}
    for unit in units:
        for index, count in unit.budget_hits:
            taken[index] = taken.get(index, 0) + count
    return sum(1 for i, n in taken.items() if n > max(0, budgets[i].disruptions_allowed))


def plan_cost(units: Sequence[Unit], budgets: Sequence[DisruptionBudget]) -> Cost:
    nodes: set[str] = set()
    zones: set[str] = set()
    for unit in units:
        nodes |= unit.nodes
        zones |= unit.zones
    return (
        budgets_broken(units, budgets),
        sum(len(u.pods) for u in units),
        max((u.priority for u in units), default=0),
        sum(u.gpus for u in units),
        sum(u.run_s for u in units),
        len(nodes),
        len(zones),
    )


def evict_first(unit: Unit) -> tuple[int, ...]:
    """Sort key, cheapest to evict first (a unit that alone breaks a budget goes last)."""
    return (unit.breaks_alone, len(unit.pods), unit.priority, unit.gpus, unit.run_s)


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


def node_lower_bound(short: Mapping[str, int], facts: NodeFacts) -> Cost | None:
    """A cost no victim set on this node can beat, or None when even all units are too few.

    Each part bounds its own component, so the tuple bounds the cost lexicographically."""
    count = len(facts.pods)
    if not count:
        return None
    needed = 1
    for name, amount in short.items():
        sizes = sorted(facts.freed[name], reverse=True)
        got = 0
        for taken, size in enumerate(sizes, 1):
            got += size
            if got >= amount:
                needed = max(needed, taken)
                break
        else:
            return None
    if needed == count:
        pods, gpus, runs = sum(facts.pods), sum(facts.gpus), sum(facts.runs)
    else:
        pods = sum(sorted(facts.pods)[:needed])
        gpus = sum(sorted(facts.gpus)[:needed])
        runs = sum(sorted(facts.runs)[:needed])
    gpus = max(gpus, short.get(NVIDIA_GPU, 0))
    return (0, pods, facts.lowest_priority, gpus, runs, 1, 1)
