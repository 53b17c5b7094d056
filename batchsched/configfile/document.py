"""The strict base of every config document, and Go durations as config files write them."""

from __future__ import annotations

import math
import re
from typing import Final

from pydantic import BaseModel, ConfigDict, model_validator
from pydantic.alias_generators import to_camel

from batchsched.model.fields import shown


class Document(BaseModel):
    """Strict as kube's decoder: exact camelCase keys, no coercion, unknown keys rejected."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, alias_generator=to_camel)

    @model_validator(mode="before")
    @classmethod
    def _null_is_unset(cls, data: object) -> object:
        # Go's decoder reads `key: null` (or a bare `key:`) as "not given"; so do we.
        if isinstance(data, dict):
            return {key: value for key, value in data.items() if value is not None}
        return data


# ASCII digits, as Go's time.ParseDuration reads them (\d would take "٣" too).
_DURATION_PART: Final = re.compile(r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(ns|us|µs|ms|s|m|h)")
_UNIT_SECONDS: Final = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1, "m": 60, "h": 3600}


def parse_duration(value: object) -> float:
    """A Go duration string ("15s", "1m30s", "500ms") in seconds, as metav1.Duration accepts."""
    body = value.lstrip("+-") if isinstance(value, str) else ""
    if body != "0" and not re.fullmatch(rf"(?:{_DURATION_PART.pattern})+", body):
        raise ValueError(
            f'expected a duration such as "15s", "1m30s" or "500ms", got {shown(value)}'
        )
    seconds = sum(float(n) * _UNIT_SECONDS[unit] for n, unit in _DURATION_PART.findall(body))
    if not math.isfinite(seconds):  # float() reads 400 digits as inf rather than refuse them
        raise ValueError(f"duration out of range, got {shown(value)}")
    return -seconds if str(value).startswith("-") else seconds
