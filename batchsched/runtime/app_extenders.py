"""The configured HTTP extenders, put into the profiles the live scheduler runs."""

from __future__ import annotations

from collections.abc import Mapping

from batchsched.config import SchedulerConfig
from batchsched.extenders.fetch import ExtenderSet
from batchsched.framework.profile import Profile
from batchsched.plugins.extenders import verdict_source, with_extenders


def profiles_with_extenders(config: SchedulerConfig) -> dict[str, Profile]:
    """The config's profiles, with the Extenders plugin reading the verdicts an ExtenderSet
    fetches before each cycle when the config names extenders that filter or prioritize."""
    profiles = config.build_profiles()
    extenders = ExtenderSet.of(config.extenders)
    if extenders is None:
        return profiles
    return with_extenders(profiles, extenders, extenders.weight)


def extender_set(profiles: Mapping[str, Profile]) -> ExtenderSet | None:
    source = verdict_source(profiles)
    return source if isinstance(source, ExtenderSet) else None


def rewire(old: Mapping[str, Profile], new: Mapping[str, Profile]) -> Mapping[str, Profile]:
    """Reloaded profiles keep the extenders the scheduler started with (the extenders are
    read at start; a reload changes plugins and weights, not extenders)."""
    extenders = extender_set(old)
    if extenders is None or extender_set(new) is not None:
        return new
    return with_extenders(new, extenders, extenders.weight)
