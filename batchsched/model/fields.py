"""Small typed readers for API dicts; each failure names the field path."""

from __future__ import annotations

import re
import reprlib
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Final, cast

from batchsched.model.selectors import LABEL_OPERATORS, LabelSelector, Requirement

# An integer written as a string ("42", "-1"): ASCII digits only ("²" is a digit to
# str.isdigit() but not to int()), and few enough that int() does not refuse them.
_INT_TEXT: Final = re.compile(r"-?[0-9]{1,40}")

_SHORT: Final = reprlib.Repr()
_SHORT.maxlevel, _SHORT.maxstring, _SHORT.maxother, _SHORT.maxlong = 3, 100, 100, 100


class FieldError(ValueError):
    """Raised by the readers; callers turn it into InvalidObject with the object's name."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}")


def shown(value: object) -> str:
    """A bad value for an error message, as written but cut short: a few levels and items of a
    container (it can be huge, or nested too deep for repr()), a hundred characters of text."""
    try:
        return _SHORT.repr(value)
    except ValueError:  # an integer with more digits than Python will print
        return "a huge integer"


def metadata(obj: Mapping[str, object]) -> tuple[Mapping[str, object], str, str]:
    """(metadata, namespace, name) of an API object; FieldError when they have a bad shape."""
    meta = as_map(obj.get("metadata"), "metadata")
    name = as_str(meta.get("name"), "metadata.name") or "<unnamed>"
    namespace = as_str(meta.get("namespace"), "metadata.namespace") or "default"
    return meta, namespace, name


def object_name(obj: Mapping[str, object]) -> tuple[str, str]:
    """(namespace, name) for the error about an object, known even when its metadata is bad."""
    try:
        _, namespace, name = metadata(obj)
    except FieldError:
        return "default", "<unnamed>"
    return namespace, name


def as_map(value: object, field: str) -> Mapping[str, object]:
    if type(value) is dict:  # the common case, without the ABC check
        return value
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise FieldError(field, f"expected a mapping, got {type(value).__name__}")
    return value


def as_list(value: object, field: str) -> Sequence[object]:
    if type(value) is list:
        return value
    if value is None:
        return ()
    if not isinstance(value, list | tuple):
        raise FieldError(field, f"expected a list, got {type(value).__name__}")
    return value


def as_str(value: object, field: str, default: str = "") -> str:
    if type(value) is str:
        return value
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise FieldError(field, f"expected a string, got {shown(value)}")
    return str(value)


def as_int(value: object, field: str, default: int = 0) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, str) and _INT_TEXT.fullmatch(value):
            return int(value)
        raise FieldError(field, f"expected an integer, got {shown(value)}")
    return value


def as_bool(value: object, field: str) -> bool:
    if value is None:
        return False
    if not isinstance(value, bool):
        raise FieldError(field, f"expected true or false, got {shown(value)}")
    return value


def str_map(value: object, field: str) -> dict[str, str]:
    mapping = as_map(value, field)
    if all(type(k) is str and type(v) is str for k, v in mapping.items()):
        return dict(cast(Mapping[str, str], mapping))  # as read: no field path per entry
    return {str(k): as_str(v, f"{field}.{k}") for k, v in mapping.items()}


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
    raise FieldError(field, f"expected an RFC 3339 time, got {shown(value)}")


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
