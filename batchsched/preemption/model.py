"""What the preemption planner is asked and what it answers: frozen values, no I/O.

The runtime builds a `PreemptionRequest` from its cache (start times, PodDisruptionBudgets,
gang membership, the tenants' reclaimable pods) and hands it to `plan_preemption` with the
cycle's snapshot; the answer is a `PreemptionPlan` to execute or a `NoPlan` that says why
evicting cannot help.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from batchsched.gang.podgroup import PodGroupView
from batchsched.model.pod import PodView
from batchsched.model.resources import NVIDIA_GPU
from batchsched.model.selectors import LabelSelector

__all__ = [
    "LONE_POD_PREFIX",
    "BudgetExcess",
    "DisruptionBudget",
    "NoPlan",
    "PreemptionPlan",
    "PreemptionRequest",
    "VictimGang",
    "budget_violations",
    "budgets_exceeded",
    "gpus_of",
]

# Victim units that are not in a gang are keyed "pod:<namespace>/<name>".
LONE_POD_PREFIX = "pod:"


def gpus_of(pod: PodView) -> int:
    """Whole GPUs the pod holds (its nvidia.com/gpu request)."""
    return pod.requests.scalar.get(NVIDIA_GPU, 0)


@dataclass(frozen=True, slots=True)
class DisruptionBudget:
    """A policy/v1 PodDisruptionBudget, parsed at the edge.

    `selector` follows policy/v1: an empty selector selects every pod of the namespace. The
    edge drops budgets whose selector is null (they select nothing).
    """

    namespace: str
    name: str
    selector: LabelSelector
    disruptions_allowed: int  # status.disruptionsAllowed

    def covers(self, pod: PodView) -> bool:
        return pod.namespace == self.namespace and self.selector.matches(pod.labels)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def budget_violations(taken: Mapping[int, int], budgets: Sequence[DisruptionBudget]) -> int:
    """Purely computational: victims beyond their budget, kube-scheduler's "PDB violations".

    `taken`: budget index -> victims it covers. A budget allowing `a` disruptions that covers
    `n` victims has n - a of them violating it (kube counts violating victims, not budgets;
    a pod under two budgets cannot be evicted at all, so the overlap is not weighed)."""
    return sum(max(0, n - max(0, budgets[i].disruptions_allowed)) for i, n in taken.items())


@dataclass(frozen=True, slots=True)
class BudgetExcess:
    """A budget that evicting the victims would break: it covers more than it allows."""

    budget: DisruptionBudget
    covered: int  # victims it covers

    def describe(self) -> str:
        allowed = self.budget.disruptions_allowed
        return (
            f"PodDisruptionBudget {self.budget.key} ({_count(self.covered, 'victim')} "
            f"covered, {_count(allowed, 'disruption')} allowed)"
        )


def budgets_exceeded(
    victims: Sequence[PodView], budgets: Sequence[DisruptionBudget]
) -> tuple[BudgetExcess, ...]:
    """Purely computational: the budgets whose status.disruptionsAllowed is below the number
    of victims they cover (the Eviction API would refuse one of those evictions)."""
    found = []
    for budget in budgets:
        covered = sum(1 for p in victims if budget.covers(p))
        if covered > max(0, budget.disruptions_allowed):
            found.append(BudgetExcess(budget, covered))
    return tuple(found)


@dataclass(frozen=True, slots=True)
class PreemptionRequest:
    preemptor: tuple[PodView, ...]  # one pod, or a gang's members still to place
    group: PodGroupView | None  # the gang's PodGroup (minMember), None for a pod
    bound_members: int  # the preemptor gang's members already bound
    now: float  # same clock as `started`
    started: Mapping[str, float]  # uid -> when the pod started using its node
    min_runtime_s: float  # victims younger than this are spared
    budgets: Sequence[DisruptionBudget]
    gang_of: Mapping[str, str]  # uid -> gang key, for every counted pod in a gang
    gang_min_member: Mapping[str, int]  # gang key -> minMember
    # Pods borrowing above their tenant's guarantee that THIS preemptor may reclaim
    # regardless of priority (its tenant is below its guarantee); the runtime computes it.
    reclaimable: frozenset[str] = frozenset()
    # Pods placed by this scheduler whose binding no watch event has confirmed yet: not yet
    # running, never victims (spared as young), so a gang just placed is not undone at once.
    unconfirmed: frozenset[str] = frozenset()

    @property
    def priority(self) -> int:
        """A gang preempts with its most important member's priority (mixed members)."""
        return max((p.priority for p in self.preemptor), default=0)

    @property
    def who(self) -> str:
        if self.group is not None:
            return f"gang {self.group.key}"
        return f"pod {self.preemptor[0].key}" if self.preemptor else "nothing"


@dataclass(frozen=True, slots=True)
class VictimGang:
    """A unit evicted whole: every counted member of a gang, or one lone pod."""

    key: str  # gang key, or "pod:<ns>/<name>" for a lone pod
    pods: tuple[PodView, ...]
    priority: int  # highest member priority

    @property
    def gpus(self) -> int:
        return sum(gpus_of(p) for p in self.pods)

    def describe(self) -> str:
        """'gang ml/low-7 (8 pods, 8 GPUs) on node-12' or 'pod ml/x (2 GPUs) on node-3'."""
        nodes = ", ".join(sorted({p.node_name for p in self.pods if p.node_name})) or "no node"
        if self.key.startswith(LONE_POD_PREFIX):
            name = self.key[len(LONE_POD_PREFIX) :]
            return f"pod {name} ({_count(self.gpus, 'GPU')}) on {nodes}"
        size = f"{_count(len(self.pods), 'pod')}, {_count(self.gpus, 'GPU')}"
        return f"gang {self.key} ({size}) on {nodes}"


@dataclass(frozen=True, slots=True)
class PreemptionPlan:
    victims: tuple[VictimGang, ...]
    placements: Mapping[str, str]  # preemptor uid -> nominated node
    # Victims beyond their PodDisruptionBudget (only when nothing else works; the runtime
    # does not start such a plan: the Eviction API would refuse it).
    budget_violations: int
    # See preemption/cost.py: smaller is better, compared in order.
    cost: tuple[int, ...] = field(default=())

    def victim_pods(self) -> tuple[PodView, ...]:
        return tuple(p for v in self.victims for p in v.pods)

    def describe(self) -> str:
        """One line for Events and PodGroup status, e.g. "preempting gang ml/low-7 (8 pods,
        8 GPUs) on node-12 for 1 pod nominated to node-12"."""
        parts = "; ".join(v.describe() for v in self.victims)
        nodes = sorted(set(self.placements.values()))
        text = (
            f"preempting {parts} for {_count(len(self.placements), 'pod')} nominated to "
            f"{', '.join(nodes)}"
        )
        if self.budget_violations:
            text += f", {_count(self.budget_violations, 'victim')} beyond a PodDisruptionBudget"
        return text


@dataclass(frozen=True, slots=True)
class NoPlan:
    reason: str  # why preemption cannot help, in words


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
