"""Live reload of the KubeSchedulerConfiguration (`batchsched run --config FILE`).

The file is polled by content, as the quota file is (runtime/quota_reload.py): a ConfigMap
mount swaps its `..data` symlink rather than rewriting the file, so a SHA-256 of the bytes
read through the path is the signal, not the mtime.

A changed file is parsed and validated in full, every profile's plugins built with their args,
before anything changes; then the new profiles are swapped in. The swap is one synchronous
assignment on the event loop, and a scheduling cycle (Scheduler.schedule_one) is synchronous
too, so it lands between cycles: a cycle runs wholly on the old or wholly on the new profiles.
Pods already in their binding cycle finish with the profile they were placed by. A changed
`extenders:` list comes with new extender clients (runtime/app_extenders.py); a cycle whose
extenders were swapped while they answered asks the new ones before it runs.

What one scheduling queue and the process are built around cannot change live: the set of
scheduler names and the queueSort plugin with its args. A file that changes them is rejected
like a bad one. Top-level settings read only at start-up (leaderElection, clientConnection,
backoff, parallelism, queueStatus) are applied on the next restart; a reload that changes
them says so.

Results are reported on the scheduler's Lease (the object `kubectl describe` shows for the
scheduler as a whole; the quota file's Events go there too): a Normal `SchedulerConfigReloaded`
or a Warning `InvalidSchedulerConfig` with the full error, an INFO or ERROR log line, and
`batchsched_config_reload_total{result="success"|"error"}`. Each distinct content is
reported once, however many polls see it.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Final

from batchsched.config import ConfigError, SchedulerConfig, load_config
from batchsched.config.errors import Issue
from batchsched.framework.profile import Profile
from batchsched.kube.binder import ObjectRef
from batchsched.metrics import SchedulerMetrics
from batchsched.runtime.file_poll import PolledFile, Resolve
from batchsched.runtime.live import Recorder

logger = logging.getLogger(__name__)

DEFAULT_POLL_INTERVAL_S: Final = 5.0
RELOADED: Final = "SchedulerConfigReloaded"
INVALID: Final = "InvalidSchedulerConfig"
ACTION: Final = "LoadSchedulerConfig"
_START_UP_ONLY: Final = (
    "leader_election",
    "client_connection",
    "parallelism",
    "pod_initial_backoff_seconds",
    "pod_max_backoff_seconds",
    "queue_status",  # the leader's queue status writer is built at start
)

Apply = Callable[[SchedulerConfig, Mapping[str, Profile]], None]
# (config in force, changed config) -> the changed config's profiles, or ConfigError.
Build = Callable[[SchedulerConfig, SchedulerConfig], Mapping[str, Profile]]


def _profiles(current: SchedulerConfig, config: SchedulerConfig) -> Mapping[str, Profile]:
    return config.build_profiles()


def restart_needed(old: SchedulerConfig, new: SchedulerConfig) -> list[str]:
    """Why `new` cannot replace `old` in a running scheduler (empty: it can)."""
    problems = []
    old_names = [p.scheduler_name for p in old.profiles]
    new_names = [p.scheduler_name for p in new.profiles]
    if sorted(old_names) != sorted(new_names):
        problems.append(
            f"the scheduler names changed ({', '.join(old_names)} -> {', '.join(new_names)})"
        )
    old_sort, new_sort = _queue_sort(old), _queue_sort(new)
    if old_sort != new_sort:
        problems.append(
            f"the queueSort plugin or its args changed ({old_sort[0]} -> {new_sort[0]})"
        )
    return problems


def _queue_sort(config: SchedulerConfig) -> tuple[str, object]:
    profile = config.profiles[0]
    name = profile.plugins["queueSort"][0].name
    return name, profile.plugin_args.get(name)


def start_up_only_changes(old: SchedulerConfig, new: SchedulerConfig) -> list[str]:
    """Fields that changed but are read only when the process starts."""
    return [f for f in _START_UP_ONLY if getattr(old, f) != getattr(new, f)]


class ConfigReloader(PolledFile[tuple[SchedulerConfig, Mapping[str, Profile]]]):
    """Holds the config in force; `check_once` swaps in a changed, valid file."""

    def __init__(
        self,
        path: Path,
        current: SchedulerConfig,
        *,
        apply: Apply,
        recorder: Recorder,
        regarding: ObjectRef,
        metrics: SchedulerMetrics,
        interval: float = DEFAULT_POLL_INTERVAL_S,
        resolve: Resolve | None = None,
        build: Build = _profiles,
    ) -> None:
        super().__init__(
            path,
            interval=interval,
            recorder=recorder,
            regarding=regarding,
            action=ACTION,
            resolve=resolve,
        )
        self.current = current
        self._apply = apply
        self._build = build
        self._metrics = metrics
        # The file was parsed at start-up; a failure here is reported by the next poll.
        with contextlib.suppress(ConfigError):
            self._digest = self._read()[0]

    def _error(self, issues: list[Issue]) -> ConfigError:
        return ConfigError(issues, str(self.path))

    def _load(self, text: str) -> tuple[SchedulerConfig, Mapping[str, Profile]]:
        try:
            config = load_config(text)
            problems = restart_needed(self.current, config)
            if problems:
                raise ConfigError([Issue("", f"needs a restart: {p}") for p in problems])
            profiles = self._build(self.current, config)
        except ConfigError as err:
            err.source = str(self.path)
            raise
        return config, profiles

    async def _accepted(
        self, loaded: tuple[SchedulerConfig, Mapping[str, Profile]], digest: str
    ) -> None:
        config, profiles = loaded
        later = start_up_only_changes(self.current, config)
        self._apply(config, profiles)
        self.current = config
        self._metrics.config_reloads.labels(result="success").inc()
        described = "; ".join(
            f"{p.scheduler_name} score={','.join(p.describe().get('score', []))}"
            for p in config.profiles
        )
        logger.info(
            "scheduler config reloaded file=%s digest=%s profiles=%s restart_only_changed=%s",
            self.path,
            digest[:12],
            described,
            ",".join(later) or "none",
        )
        note = f"scheduler config {self.path} reloaded: {described}"
        if later:
            note += f"; changed fields that apply on the next restart: {', '.join(later)}"
        await self._record("Normal", RELOADED, note)

    async def _rejected(self, err: ConfigError) -> None:
        self._metrics.config_reloads.labels(result="error").inc()
        self._metrics.config_errors.labels(source="scheduler").inc()
        message = str(err).replace("\n", "; ")
        logger.error("scheduler config rejected, keeping the one in force error=%s", message)
        await self._record("Warning", INVALID, f"kept the scheduler config in force: {message}")
