"""Config errors: every ConfigError issue names the YAML path it is about.

"profiles[0].plugins.score.enabled[1].name: ..."; pydantic's errors are translated once, here,
into the same form, with a "did you mean" for a misspelt key. The scheduler config and the
tenant quota file raise the same ConfigError.
"""

from __future__ import annotations

import difflib
import json
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Union, get_args, get_origin

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails


@dataclass(frozen=True, slots=True)
class Issue:
    path: str  # where in the YAML, e.g. "profiles[0].plugins.score.enabled[1].name"
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class ConfigError(ValueError):
    """A scheduler configuration that cannot be used; each issue names its YAML path."""

    def __init__(self, issues: Sequence[Issue], source: str = "") -> None:
        self.issues = tuple(issues)
        self.source = source  # the file the config came from, when there is one
        super().__init__(*self.issues)

    @classmethod
    def at(cls, path: str, message: str) -> ConfigError:
        return cls([Issue(path, message)])

    def __str__(self) -> str:
        prefix = f"{self.source}: " if self.source else ""
        return "\n".join(prefix + str(issue) for issue in self.issues)


def validation_issues(
    err: ValidationError,
    prefix: str = "",
    model: type[BaseModel] | None = None,
    hints: Mapping[str, str] | None = None,
) -> list[Issue]:
    """Pydantic's errors as YAML paths. `model` lets an unknown key suggest the known ones;
    `hints` explains keys that exist only in other versions of the document."""
    issues = []
    for detail in err.errors(include_url=False):
        loc = tuple(detail["loc"])
        issues.append(Issue(yaml_path(prefix, loc), _describe(detail, model, loc, hints or {})))
    return issues


def yaml_path(prefix: str, loc: Sequence[int | str]) -> str:
    text = prefix
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def quote(value: object) -> str:
    """A YAML scalar the way a user wrote it; containers by type only (they can be huge)."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return json.dumps(value, ensure_ascii=False)
    return f"a {type(value).__name__}"


def _describe(
    detail: ErrorDetails,
    model: type[BaseModel] | None,
    loc: tuple[int | str, ...],
    hints: Mapping[str, str],
) -> str:
    if detail["type"] == "extra_forbidden":
        name = str(loc[-1])
        if name in hints:
            return f'unknown field "{name}": {hints[name]}'
        return _unknown_field(name, model, loc[:-1])
    if detail["type"] == "missing":
        return "required field is missing"
    message = detail["msg"].removeprefix("Value error, ")
    message = f"{message[:1].lower()}{message[1:]}"
    value = detail.get("input")
    if isinstance(value, (dict, list)):  # a whole mapping or list: its path says enough
        return message
    if f"got {value!r}" in message:  # our own validators may have said it already
        return message
    return f"{message}, got {quote(value)}"


def _unknown_field(name: str, model: type[BaseModel] | None, parent: tuple[int | str, ...]) -> str:
    text = f'unknown field "{name}"'
    known = _fields_at(model, parent) if model is not None else []
    by_lower = {field.lower(): field for field in known}
    close = difflib.get_close_matches(name.lower(), list(by_lower), n=1, cutoff=0.7)
    if close:
        return f'{text}; did you mean "{by_lower[close[0]]}"?'
    return f"{text}; known fields: {', '.join(known)}" if known else text


def _fields_at(model: type[BaseModel], loc: tuple[int | str, ...]) -> list[str]:
    """The YAML keys a model accepts at `loc` (walking fields and list items), or none."""
    annotation: object = model
    for part in loc:
        annotation = _unwrap_optional(annotation)
        if isinstance(part, int):
            is_list = get_origin(annotation) in (list, tuple, Sequence)
            annotation = get_args(annotation)[0] if is_list else None
        elif isinstance(annotation, type) and issubclass(annotation, BaseModel):
            fields = annotation.model_fields.items()
            annotation = next((f.annotation for n, f in fields if (f.alias or n) == part), None)
        else:
            return []
    annotation = _unwrap_optional(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [info.alias or name for name, info in annotation.model_fields.items()]
    return []


def _unwrap_optional(annotation: object) -> object:
    if get_origin(annotation) in (Union, types.UnionType):
        rest = [arg for arg in get_args(annotation) if arg is not type(None)]
        return rest[0] if len(rest) == 1 else annotation
    return annotation
