"""How long a gang or pod is expected to run: what backfill plans with. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from batchsched.configfile.document import parse_duration
from batchsched.model.pod import PodView

EXPECTED_RUNTIME_ANNOTATION: Final = "batchsched.io/expected-runtime"
# Written by the scheduler on a waiting PodGroup (or lone pod): its planned start, RFC 3339.
ESTIMATED_START_ANNOTATION: Final = "batchsched.io/estimated-start-time"


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


def gang_runtime(pod: PodView, group_annotations: Mapping[str, str] | None) -> float | None:
    """A pod's expected runtime: its PodGroup's annotation, else its own, else its
    `activeDeadlineSeconds`; InvalidRuntime names the bad annotation."""
    if group_annotations is not None:
        found = expected_runtime(group_annotations, None)
        if found is not None:
            return found
    return expected_runtime(pod.annotations, pod.active_deadline_seconds)


def human_duration(seconds: float) -> str:
    """ "45s", "12m", "1.5h": how long until something, in words a user reads at a glance."""
    if seconds < 90:
        return f"{seconds:.0f}s"
    if seconds < 5400:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.1f}h"
