"""The lean PriorityClass view: what pod priority resolution and preemption need."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from batchsched.model.errors import InvalidObject
from batchsched.model.fields import FieldError, as_bool, as_int, as_str, metadata, object_name


@dataclass(frozen=True, slots=True)
class PriorityClassView:
    name: str
    value: int
    global_default: bool
    preemption_policy: str


def parse_priority_class(obj: Mapping[str, object]) -> PriorityClassView:
    _, name = object_name(obj)
    try:
        _, _, name = metadata(obj)
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
