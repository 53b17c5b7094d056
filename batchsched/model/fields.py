"""Small typed readers for API dicts; each failure names the field path."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

from batchsched.model.selectors import LABEL_OPERATORS, LabelSelector, Requirement


class FieldError(ValueError):
    """Raised by the readers; callers turn it into InvalidObject with the object's name."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}")


def as_map(value: object, field: str) -> Mapping[str, object]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise FieldError(field, f"expected a mapping, got {type(value).__name__}")
    return value


def as_list(value: object, field: str) -> Sequence[object]:
    if value is None:
        return ()
    if not isinstance(value, list | tuple):
        raise FieldError(field, f"expected a list, got {type(value).__name__}")
    return value


def as_str(value: object, field: str, default: str = "") -> str:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise FieldError(field, f"expected a string, got {value!r}")
    return str(value)


def as_int(value: object, field: str, default: int = 0) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, str) and value.lstrip("-").isdigit():
            return int(value)
        raise FieldError(field, f"expected an integer, got {value!r}")
    return value


def as_bool(value: object, field: str) -> bool:
    if value is None:
        return False
    if not isinstance(value, bool):
        raise FieldError(field, f"expected true or false, got {value!r}")
    return value


def str_map(value: object, field: str) -> dict[str, str]:
    return {str(k): as_str(v, f"{field}.{k}") for k, v in as_map(value, field).items()}


def timestamp(value: object, field: str) -> float:
    """RFC 3339 time (or a datetime YAML already parsed) as seconds since the epoch; 0 if absent."""
    if value is None or value == "":
        return 0.0
    if isinstance(value, datetime):
        moment = value if value.tzinfo else value.replace(tzinfo=UTC)
        return moment.timestamp()
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        except ValueError:
            pass
    raise FieldError(field, f"expected an RFC 3339 time, got {value!r}")


def requirement(value: object, field: str, operators: frozenset[str]) -> Requirement:
    raw = as_map(value, field)
    key = as_str(raw.get("key"), f"{field}.key")
    operator = as_str(raw.get("operator"), f"{field}.operator")
    if operator not in operators:
        raise FieldError(f"{field}.operator", f"unknown operator {operator!r}")
    values = tuple(
        as_str(v, f"{field}.values[{i}]")
        for i, v in enumerate(as_list(raw.get("values"), f"{field}.values"))
    )
    return Requirement(key, operator, values)


def label_selector(value: object, field: str) -> LabelSelector | None:
    """None when absent (selects nothing for pod affinity); an empty mapping selects all."""
    if value is None:
        return None
    raw = as_map(value, field)
    labels = tuple(sorted(str_map(raw.get("matchLabels"), f"{field}.matchLabels").items()))
    exprs = tuple(
        requirement(item, f"{field}.matchExpressions[{i}]", LABEL_OPERATORS)
        for i, item in enumerate(as_list(raw.get("matchExpressions"), f"{field}.matchExpressions"))
    )
    return LabelSelector(labels, exprs)
