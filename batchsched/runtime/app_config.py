"""The KubeSchedulerConfiguration side of `batchsched run`: the config in force (what /configz
shows), its reload from the --config file, and the swap of the profiles the scheduler runs.

The registry builds plugins without I/O; the app gives some of them their live collaborators
(the binding client, the ResourceClaim writer, PodGroup ages, the backfill reservations).
A reloaded profile's plugins are new objects, so each takes those collaborators over from the
plugin of its type in the profile it replaces.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Final

from kubernetes_asyncio.client import ApiClient

from batchsched.config import SchedulerConfig
from batchsched.framework.profile import Profile
from batchsched.framework.runner import ProfileRunner
from batchsched.metrics import SchedulerMetrics
from batchsched.plugins.default_binder import BindingClient, DefaultBinder
from batchsched.runtime.app_extenders import (
    profiles_with_extenders as profiles_with_extenders,  # re-exported for app.py
)
from batchsched.runtime.app_extenders import reloaded_profiles, rewire
from batchsched.runtime.app_options import RunOptions
from batchsched.runtime.config_reload import ConfigReloader
from batchsched.runtime.quota_reload import lease_ref, uid_resolver
from batchsched.runtime.scheduler import Scheduler

# The attributes the app sets on registry-built plugins (DefaultBinder.client,
# DynamicResources.writer, GangSort.groups, BackfillReservations.guard).
WIRED: Final = ("client", "writer", "groups", "guard")


def attach_binding_client(profiles: Mapping[str, Profile], client: BindingClient) -> None:
    """DefaultBinder is built by the registry without I/O; give it the real client here."""
    for profile in profiles.values():
        for plugin in profile.bind:
            if isinstance(plugin, DefaultBinder):
                plugin.client = client


def plugins_of(profile: Profile) -> Iterator[object]:
    yield profile.queue_sort
    for point in (
        profile.pre_enqueue,
        profile.pre_filter,
        profile.filter,
        profile.post_filter,
        profile.pre_score,
        profile.reserve,
        profile.permit,
        profile.pre_bind,
        profile.bind,
        profile.post_bind,
    ):
        yield from point
    yield from (scorer.plugin for scorer in profile.score)


def carry_wiring(old: Mapping[str, Profile], new: Mapping[str, Profile]) -> None:
    """Give each new plugin the collaborators the old plugin of its type had."""
    wired: dict[type, object] = {}
    for profile in old.values():
        for plugin in plugins_of(profile):
            wired.setdefault(type(plugin), plugin)
    for profile in new.values():
        for plugin in plugins_of(profile):
            before = wired.get(type(plugin))
            for attribute in WIRED if before is not None else ():
                if hasattr(before, attribute):
                    setattr(plugin, attribute, getattr(before, attribute))


def swap_profiles(
    scheduler: Scheduler, profiles: Mapping[str, Profile], seed: int, keep_extenders: bool = True
) -> None:
    """Put new profiles in force; called on the event loop, so between two cycles. With
    `keep_extenders`, they get the running extenders; otherwise they come with their own and
    the running ones are retired (closed when the loop stops)."""
    old = scheduler.live.profiles
    if keep_extenders:
        profiles = rewire(old, profiles)
    else:
        scheduler.retired.append(old)
    carry_wiring(old, profiles)
    scheduler.live.profiles = profiles
    scheduler.live.runners = {name: ProfileRunner(p, seed) for name, p in profiles.items()}


class ConfigFile:
    """The config in force and, with --config, its reload."""

    def __init__(
        self,
        config: SchedulerConfig,
        options: RunOptions,
        api: ApiClient,
        scheduler: Scheduler,
        metrics: SchedulerMetrics,
    ) -> None:
        self.initial = config
        self.reloader: ConfigReloader | None = None
        if options.config is None:
            return
        lease = config.leader_election
        self.reloader = ConfigReloader(
            options.config,
            config,
            apply=lambda new, profiles: swap_profiles(
                scheduler, profiles, options.seed, new.extenders == self.current.extenders
            ),
            build=lambda current, new: reloaded_profiles(current, new, metrics),
            recorder=scheduler.events,
            regarding=lease_ref(lease.resource_namespace, lease.resource_name),
            metrics=metrics,
            interval=options.config_poll_interval,
            resolve=uid_resolver(api),
        )

    @property
    def current(self) -> SchedulerConfig:
        """What the scheduler runs: the last good config the file held."""
        return self.reloader.current if self.reloader is not None else self.initial
