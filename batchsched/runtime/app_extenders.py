"""The configured HTTP extenders, put into the profiles the live scheduler runs."""

from __future__ import annotations

from collections.abc import Mapping

from prometheus_client import CollectorRegistry, Counter, Histogram

from batchsched.config import SchedulerConfig
from batchsched.extenders.binding import ExtenderBinding
from batchsched.extenders.fetch import ExtenderSet
from batchsched.framework.profile import Profile
from batchsched.metrics import SchedulerMetrics
from batchsched.plugins.extenders import binder_of, verdict_source, with_extenders


class ExtenderMetrics:
    """Each call to an extender, counted by result and timed, in the scheduler's registry."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.requests = Counter(
            "batchsched_extender_requests_total",
            "Calls to HTTP extenders, by extender URL prefix, verb and result (ok; error: not "
            "reached, timed out, not HTTP 200 or not JSON; circuit_open: not called)",
            ["extender", "verb", "result"],
            registry=registry,
        )
        self.duration = Histogram(
            "batchsched_extender_request_duration_seconds",
            "How long a call to an HTTP extender took, by verb",
            ["verb"],
            registry=registry,
        )

    def observe(self, extender: str, verb: str, result: str, seconds: float) -> None:
        self.requests.labels(extender, verb, result).inc()
        if result != "circuit_open":
            self.duration.labels(verb).observe(seconds)


def profiles_with_extenders(
    config: SchedulerConfig, metrics: SchedulerMetrics | None = None
) -> dict[str, Profile]:
    """The config's profiles, with the Extenders plugin reading the verdicts an ExtenderSet
    fetches before each cycle when the config names extenders that filter or prioritize, and
    the ExtenderBinder first at Bind when one has a bindVerb."""
    profiles = config.build_profiles()
    if not config.extenders:
        return profiles
    observe = ExtenderMetrics(metrics.registry).observe if metrics is not None else None
    extenders = ExtenderSet.of(config.extenders, observe)
    binder = ExtenderBinding.of(config.extenders, observe)
    if extenders is None and binder is None:
        return profiles
    weight = extenders.weight if extenders is not None else 0
    return with_extenders(profiles, extenders, weight, binder)


def extender_set(profiles: Mapping[str, Profile]) -> ExtenderSet | None:
    source = verdict_source(profiles)
    return source if isinstance(source, ExtenderSet) else None


def rewire(old: Mapping[str, Profile], new: Mapping[str, Profile]) -> Mapping[str, Profile]:
    """Reloaded profiles keep the extenders the scheduler started with (the extenders are
    read at start; a reload changes plugins and weights, not extenders)."""
    extenders = extender_set(old)
    binder = binder_of(old)
    if extenders is None and binder is None:
        return new
    if extender_set(new) is not None or binder_of(new) is not None:
        return new
    weight = extenders.weight if extenders is not None else 0
    return with_extenders(new, extenders, weight, binder)


async def close_extenders(profiles: Mapping[str, Profile]) -> None:
    """Close the extenders' HTTP sessions (made again at the next call, if there is one)."""
    extenders = extender_set(profiles)
    if extenders is not None:
        await extenders.close()
    binder = binder_of(profiles)
    if isinstance(binder, ExtenderBinding):
        await binder.close()
