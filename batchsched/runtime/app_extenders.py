"""The configured HTTP extenders, put into the profiles the live scheduler runs, and changed
by a config reload: a reload whose `extenders:` list is unchanged keeps the running clients
(their circuit breakers and connections); one that changed it gets new clients, and the old
ones are closed when the loop stops (a call in flight on them finishes first)."""

from __future__ import annotations

import binascii
import ssl
import weakref
from collections.abc import Mapping, Sequence

from prometheus_client import CollectorRegistry, Counter, Histogram

from batchsched.config import ConfigError, SchedulerConfig
from batchsched.extenders.binding import ExtenderBinding
from batchsched.extenders.client import ssl_context
from batchsched.extenders.fetch import ExtenderSet
from batchsched.extenders.settings import ExtenderSettings
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


# One ExtenderMetrics per scheduler registry: a reload that makes new clients counts on it too.
_METRICS: weakref.WeakKeyDictionary[SchedulerMetrics, ExtenderMetrics] = weakref.WeakKeyDictionary()


def _extender_metrics(metrics: SchedulerMetrics) -> ExtenderMetrics:
    found = _METRICS.get(metrics)
    if found is None:
        found = _METRICS[metrics] = ExtenderMetrics(metrics.registry)
    return found


def profiles_with_extenders(
    config: SchedulerConfig, metrics: SchedulerMetrics | None = None
) -> dict[str, Profile]:
    """The config's profiles, with the Extenders plugin reading the verdicts an ExtenderSet
    fetches before each cycle when the config names extenders that filter or prioritize, and
    the ExtenderBinder first at Bind when one has a bindVerb."""
    profiles = config.build_profiles()
    if not config.extenders:
        return profiles
    check_tls(config.extenders)
    observe = _extender_metrics(metrics).observe if metrics is not None else None
    extenders = ExtenderSet.of(config.extenders, observe)
    binder = ExtenderBinding.of(config.extenders, observe)
    if extenders is None and binder is None:
        return profiles
    weight = extenders.weight if extenders is not None else 0
    return with_extenders(profiles, extenders, weight, binder)


def check_tls(extenders: Sequence[ExtenderSettings]) -> None:
    """Each tlsConfig's files and data load (the clients read them when made): a ConfigError
    naming the entry, not a traceback, at start-up and at a reload."""
    for i, settings in enumerate(extenders):
        try:
            ssl_context(settings)
        except (OSError, ssl.SSLError, binascii.Error, ValueError) as err:
            raise ConfigError.at(f"extenders[{i}].tlsConfig", str(err)) from err


def reloaded_profiles(
    old: SchedulerConfig, new: SchedulerConfig, metrics: SchedulerMetrics | None = None
) -> dict[str, Profile]:
    """A reloaded config's profiles, before the swap: with new extender clients when its
    `extenders:` list changed, without extenders when it did not (the swap then keeps the
    running ones). Raises ConfigError, as parsing does, for a tlsConfig that does not load."""
    if new.extenders == old.extenders:
        return new.build_profiles()
    return profiles_with_extenders(new, metrics)


def extender_set(profiles: Mapping[str, Profile]) -> ExtenderSet | None:
    source = verdict_source(profiles)
    return source if isinstance(source, ExtenderSet) else None


def rewire(old: Mapping[str, Profile], new: Mapping[str, Profile]) -> Mapping[str, Profile]:
    """Reloaded profiles whose config left `extenders:` as it was keep the running ones."""
    extenders = extender_set(old)
    binder = binder_of(old)
    if extenders is None and binder is None:
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
