"""How long a gang or pod is expected to run: what backfill plans with. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from batchsched.config.documents import parse_duration

EXPECTED_RUNTIME_ANNOTATION: Final = "batchsched.io/expected-runtime"


class InvalidRuntime(ValueError):
    """An expected-runtime annotation that is not a positive duration; the message says so."""


def expected_runtime(
    annotations: Mapping[str, str], active_deadline_seconds: int | None
) -> float | None:
    """Seconds a gang or pod is expected to run: the annotation `batchsched.io/expected-runtime`
    ("90m", "2h30m"), else `activeDeadlineSeconds` (it cannot run longer), else None (unknown).
    """
    raw = annotations.get(EXPECTED_RUNTIME_ANNOTATION)
    if raw is not None:
        try:
            seconds = parse_duration(raw.strip())
        except ValueError:
            seconds = -1.0
        if seconds <= 0:
            raise InvalidRuntime(
                f"annotation {EXPECTED_RUNTIME_ANNOTATION}: expected a positive duration such as "
                f'"90m" or "2h30m", got {raw!r}'
            )
        return seconds
    if active_deadline_seconds is not None and active_deadline_seconds > 0:
        return float(active_deadline_seconds)
    return None
