"""The lean PriorityClass view: what pod priority resolution and preemption need."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from batchsched.model.errors import InvalidObject
from batchsched.model.fields import FieldError, as_bool, as_int, as_map, as_str


@dataclass(frozen=True, slots=True)
class PriorityClassView:
    name: str
    value: int
    global_default: bool
    preemption_policy: str


def parse_priority_class(obj: Mapping[str, object]) -> PriorityClassView:
    meta = as_map(obj.get("metadata"), "metadata")
    name = str(meta.get("name", "")) or "<unnamed>"
    try:
        return PriorityClassView(
            name=name,
            value=as_int(obj.get("value"), "value"),
            global_default=as_bool(obj.get("globalDefault"), "globalDefault"),
            preemption_policy=as_str(
                obj.get("preemptionPolicy"), "preemptionPolicy", "PreemptLowerPriority"
            ),
        )
    except FieldError as err:
        raise InvalidObject("PriorityClass", name, err.field, err.message) from err
