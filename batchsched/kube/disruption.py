"""PodDisruptionBudgets (policy/v1) on the wire: the informer's ResourceSpec, the parse into
the planner's `DisruptionBudget`, and the handler that keeps the current set.

Only what preemption weighs is read: the selector and `status.disruptionsAllowed`, which
the disruption controller keeps current (and the Eviction API decrements as it evicts). A
budget whose status was never written (no controller), or was written for an older
generation of its spec (status.observedGeneration < metadata.generation: the controller has
not caught up), allows nothing, as the Eviction API treats it (429 "still being processed").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from batchsched.kube.informer import ResourceSpec
from batchsched.model.errors import InvalidObject
from batchsched.model.fields import (
    FieldError,
    as_int,
    as_map,
    label_selector,
    metadata,
    object_name,
)
from batchsched.model.selectors import IN, LabelSelector, Requirement
from batchsched.preemption.model import DisruptionBudget

__all__ = ["PDBS", "DisruptionBudgets", "parse_disruption_budget"]

PDBS: Final = ResourceSpec("PodDisruptionBudget", "/apis/policy/v1/poddisruptionbudgets")
# policy/v1: a null selector selects no pod. `In` with no values never matches any label set.
SELECTS_NOTHING: Final = LabelSelector(match_expressions=(Requirement("", IN, ()),))


def parse_disruption_budget(obj: Mapping[str, object]) -> DisruptionBudget:
    """Read a PodDisruptionBudget as `kubectl get -o yaml` prints it; `InvalidObject` names the
    bad field."""
    namespace, name = object_name(obj)
    try:
        meta, namespace, name = metadata(obj)
        spec = as_map(obj.get("spec"), "spec")
        status = as_map(obj.get("status"), "status")
        selector = label_selector(spec.get("selector"), "spec.selector")
        allowed = as_int(status.get("disruptionsAllowed"), "status.disruptionsAllowed")
        generation = as_int(meta.get("generation"), "metadata.generation")
        observed = as_int(status.get("observedGeneration"), "status.observedGeneration")
    except FieldError as err:
        raise InvalidObject(
            "PodDisruptionBudget", f"{namespace}/{name}", err.field, err.message
        ) from err
    return DisruptionBudget(
        namespace=namespace,
        name=name,
        selector=SELECTS_NOTHING if selector is None else selector,
        disruptions_allowed=max(0, allowed) if observed >= generation else 0,
    )


class DisruptionBudgets:
    """The PDB informer's handler: the budgets in force, by namespace/name."""

    def __init__(self) -> None:
        self._by_key: dict[str, DisruptionBudget] = {}

    def on_add(self, budget: DisruptionBudget) -> None:
        self._by_key[f"{budget.namespace}/{budget.name}"] = budget

    def on_update(self, old: DisruptionBudget, new: DisruptionBudget) -> None:
        self.on_add(new)

    def on_delete(self, budget: DisruptionBudget) -> None:
        self._by_key.pop(f"{budget.namespace}/{budget.name}", None)

    def budgets(self) -> tuple[DisruptionBudget, ...]:
        """Budgets that select some pod, in a stable order (the planner is deterministic)."""
        return tuple(
            self._by_key[key]
            for key in sorted(self._by_key)
            if self._by_key[key].selector is not SELECTS_NOTHING
        )
