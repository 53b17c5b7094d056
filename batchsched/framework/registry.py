"""An explicit plugin registry: names to typed factories, and profile assembly.

No import-time registration: `batchsched.plugins.registry.default_registry()` lists every
built-in plugin in one place, and callers may extend it with their own specs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

from batchsched.framework.interfaces import (
    NormalizeScorePlugin,
    QueueSortPlugin,
    ScorePlugin,
    extension_points_of,
)
from batchsched.framework.profile import Profile, WeightedScorer


class PluginArgs(BaseModel):
    """Base for plugin args: camelCase keys as in KubeSchedulerConfiguration; unknown keys
    are rejected."""

    model_config = ConfigDict(
        extra="forbid", frozen=True, alias_generator=to_camel, populate_by_name=True
    )


class NoArgs(PluginArgs):
    pass


A = TypeVar("A", bound=PluginArgs)


class PluginBuilder(Protocol):
    @property
    def name(self) -> str: ...

    def build(self, raw_args: Mapping[str, object] | None) -> object:
        """Validate args (pydantic.ValidationError on bad input) and make the plugin."""
        ...


@dataclass(frozen=True, slots=True)
class PluginSpec(Generic[A]):
    name: str
    factory: Callable[[A], object]
    args: type[A]

    def build(self, raw_args: Mapping[str, object] | None) -> object:
        return self.factory(self.args.model_validate(dict(raw_args or {})))


class UnknownPlugin(KeyError):
    def __init__(self, name: str, known: Sequence[str]) -> None:
        self.plugin = name
        self.known = tuple(known)
        super().__init__(f"unknown plugin {name!r}; known plugins: {', '.join(self.known)}")

    def __str__(self) -> str:
        return str(self.args[0])


class Registry:
    def __init__(self, specs: Iterable[PluginBuilder]) -> None:
        self._specs: dict[str, PluginBuilder] = {}
        for spec in specs:
            if spec.name in self._specs:
                raise ValueError(f"plugin {spec.name!r} registered twice")
            self._specs[spec.name] = spec

    def names(self) -> list[str]:
        return sorted(self._specs)

    def extended(self, specs: Iterable[PluginBuilder]) -> Registry:
        """A new registry with these specs added (a clashing name raises ValueError)."""
        return Registry([*self._specs.values(), *specs])

    def __contains__(self, name: object) -> bool:
        return name in self._specs

    def build(self, name: str, raw_args: Mapping[str, object] | None = None) -> object:
        spec = self._specs.get(name)
        if spec is None:
            raise UnknownPlugin(name, self.names())
        return spec.build(raw_args)

    def extension_points(self, name: str) -> tuple[str, ...]:
        """Which points a plugin implements (built with default args to find out)."""
        return extension_points_of(self.build(name))


class ProfileError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class EnabledPlugin:
    name: str
    weight: int = 0  # score weight; 0 means the default of 1


def assemble_profile(
    registry: Registry,
    scheduler_name: str,
    enabled: Mapping[str, Sequence[EnabledPlugin]],
    plugin_args: Mapping[str, Mapping[str, object]],
    percentage_of_nodes_to_score: int | None = None,
) -> Profile:
    """Build one instance per plugin name and slot it into each point it is enabled at."""
    instances: dict[str, object] = {}

    def instance(name: str) -> object:
        if name not in instances:
            instances[name] = registry.build(name, plugin_args.get(name))
        return instances[name]

    lists: dict[str, list[object]] = {}
    for point, plugins in enabled.items():
        for plugin in plugins:
            obj = instance(plugin.name)
            if point not in extension_points_of(obj):
                raise ProfileError(
                    f"plugin {plugin.name!r} does not implement extension point {point!r}"
                )
            lists.setdefault(point, []).append(obj)
    sorts = lists.get("queueSort", [])
    if len(sorts) != 1:
        raise ProfileError(
            f"profile {scheduler_name!r} needs exactly one queueSort plugin, has {len(sorts)}"
        )
    queue_sort = sorts[0]
    assert isinstance(queue_sort, QueueSortPlugin)
    scorers = []
    for plugin in enabled.get("score", ()):
        obj = instances[plugin.name]
        assert isinstance(obj, ScorePlugin)
        normalizer = obj if isinstance(obj, NormalizeScorePlugin) else None
        scorers.append(WeightedScorer(obj, plugin.weight or 1, normalizer))
    return Profile(
        scheduler_name=scheduler_name,
        queue_sort=queue_sort,
        pre_enqueue=tuple(lists.get("preEnqueue", ())),  # type: ignore[arg-type]
        pre_filter=tuple(lists.get("preFilter", ())),  # type: ignore[arg-type]
        filter=tuple(lists.get("filter", ())),  # type: ignore[arg-type]
        post_filter=tuple(lists.get("postFilter", ())),  # type: ignore[arg-type]
        pre_score=tuple(lists.get("preScore", ())),  # type: ignore[arg-type]
        score=tuple(scorers),
        reserve=tuple(lists.get("reserve", ())),  # type: ignore[arg-type]
        permit=tuple(lists.get("permit", ())),  # type: ignore[arg-type]
        pre_bind=tuple(lists.get("preBind", ())),  # type: ignore[arg-type]
        bind=tuple(lists.get("bind", ())),  # type: ignore[arg-type]
        post_bind=tuple(lists.get("postBind", ())),  # type: ignore[arg-type]
        percentage_of_nodes_to_score=percentage_of_nodes_to_score,
    )
