"""Priority preemption and quota reclaim: the pure planner (PostFilter) for pods and gangs."""

from batchsched.preemption.model import (
    DisruptionBudget,
    NoPlan,
    PreemptionPlan,
    PreemptionRequest,
    VictimGang,
)
from batchsched.preemption.planner import plan_preemption

__all__ = [
    "DisruptionBudget",
    "NoPlan",
    "PreemptionPlan",
    "PreemptionRequest",
    "VictimGang",
    "plan_preemption",
]
