"""The plugins a profile runs: the user's plugin sets merged over the defaults, args checked.

Merging, with kube-scheduler's observable rules by config version:
- v1beta2 merges per extension point: the defaults in their order, minus the disabled ones
  ("*" drops them all), a default the user also enables is replaced in place (its weight wins),
  and the user's other plugins follow in the order given.
- v1beta3 and v1 express the defaults through multiPoint: every multiPoint plugin runs at each
  point it implements unless that point disables it (or "*"); a plugin enabled explicitly at a
  point overrides its multiPoint entry and moves ahead of the multiPoint plugins there, which is
  how kube's documentation tells users to reorder defaults; other explicit plugins come last.
We hold the defaults per point (a curated subset of kube's), so the default part of multiPoint
is the per-point default lists, and only the user's multiPoint plugins are expanded through the
registry.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence, Set
from typing import Final

from pydantic import JsonValue, ValidationError

from batchsched.config.documents import MULTI_POINT, PluginConfigEntry, PluginsV1beta2
from batchsched.configfile.errors import ConfigError, Issue, quote, validation_issues
from batchsched.framework.interfaces import EXTENSION_POINTS
from batchsched.framework.registry import EnabledPlugin, Registry

logger = logging.getLogger(__name__)

POINTS: Final = tuple(EXTENSION_POINTS)
ALL: Final = "*"
Plan = dict[str, tuple[EnabledPlugin, ...]]


def merge_plugin_set(
    defaults: Sequence[EnabledPlugin], enabled: Sequence[EnabledPlugin], disabled: Set[str]
) -> list[EnabledPlugin]:
    """kube's per-point merge: defaults in place (minus disabled), then the user's others."""
    custom = {plugin.name: plugin for plugin in enabled}
    merged: list[EnabledPlugin] = []
    if ALL not in disabled:
        merged = [custom.get(p.name, p) for p in defaults if p.name not in disabled]
    kept = {plugin.name for plugin in merged}
    # A default that was disabled and enabled again is not "in place": it moves to the end.
    merged.extend(plugin for plugin in enabled if plugin.name not in kept)
    return merged


def overlay_explicit(
    expanded: Sequence[EnabledPlugin], explicit: Sequence[EnabledPlugin]
) -> list[EnabledPlugin]:
    """kube's multiPoint order: explicit overrides first, other multiPoint, other explicit."""
    expanded_names = {plugin.name for plugin in expanded}
    explicit_names = {plugin.name for plugin in explicit}
    overrides = [plugin for plugin in explicit if plugin.name in expanded_names]
    others = [plugin for plugin in explicit if plugin.name not in expanded_names]
    return [*overrides, *(p for p in expanded if p.name not in explicit_names), *others]


class PluginResolver:
    """Resolves profiles' plugin sets against one registry and one set of defaults."""

    def __init__(self, registry: Registry, defaults: Mapping[str, Sequence[EnabledPlugin]]) -> None:
        self._registry = registry
        self._defaults = {point: tuple(plugins) for point, plugins in defaults.items()}
        self._default_weights = {p.name: p.weight for p in self._defaults.get("score", ())}
        self._points: dict[str, tuple[str, ...]] = {}

    def extension_points(self, name: str) -> tuple[str, ...]:
        if name not in self._points:
            self._points[name] = self._registry.extension_points(name)
        return self._points[name]

    def resolve(self, plugins: PluginsV1beta2, path: str, multi_point: bool) -> Plan:
        """The plugins per extension point with final score weights; `path` is ".plugins"."""
        self._check_user_plugins(plugins, path)
        if multi_point:
            lists = self._expand_multi_point(plugins)
        else:
            lists = {
                point: merge_plugin_set(
                    self._defaults.get(point, ()),
                    plugins.at(point).enabled_plugins(),
                    plugins.at(point).disabled_names(),
                )
                for point in POINTS
            }
        lists["queueSort"] = self._user_queue_sort_wins(lists.get("queueSort", []), plugins)
        weights = dict(self._default_weights)
        # An explicit score entry without a weight falls back to the user's multiPoint weight.
        weights.update((p.name, p.weight) for p in plugins.at(MULTI_POINT).enabled if p.weight)
        plan = {point: _weighted(point, got, weights) for point, got in lists.items() if got}
        self._check_required(plan, path)
        return plan

    def _user_queue_sort_wins(
        self, got: list[EnabledPlugin], plugins: PluginsV1beta2
    ) -> list[EnabledPlugin]:
        """Only one queueSort plugin can run: one the user enables replaces our default instead
        of colliding with it (kube asks for an explicit disable; configs pasted from kube
        guides enable PrioritySort without one, and our default is GangSort)."""
        user = {p.name for p in plugins.at("queueSort").enabled_plugins()}
        user |= {
            p.name
            for p in plugins.at(MULTI_POINT).enabled_plugins()
            if "queueSort" in self.extension_points(p.name)
        }
        if len(got) > 1 and user:
            return [p for p in got if p.name in user]
        return got

    def _expand_multi_point(self, plugins: PluginsV1beta2) -> dict[str, list[EnabledPlugin]]:
        multi = plugins.at(MULTI_POINT)
        lists: dict[str, list[EnabledPlugin]] = {}
        for point in POINTS:
            explicit = plugins.at(point).enabled_plugins()
            disabled = plugins.at(point).disabled_names()
            if ALL in disabled:
                lists[point] = explicit
                continue
            here = [p for p in multi.enabled_plugins() if point in self.extension_points(p.name)]
            merged = merge_plugin_set(self._defaults.get(point, ()), here, multi.disabled_names())
            expanded = [plugin for plugin in merged if plugin.name not in disabled]
            lists[point] = overlay_explicit(expanded, explicit)
        return lists

    def plugin_args(
        self, entries: Sequence[PluginConfigEntry], plan: Plan, path: str
    ) -> dict[str, dict[str, JsonValue]]:
        """pluginConfig validated by building each plugin with it; apiVersion/kind stripped.

        As in kube, args of a plugin that is not enabled are still checked, then unused; args
        of a plugin that does not exist are ignored (enabling one is the error).
        """
        enabled = {plugin.name for plugins in plan.values() for plugin in plugins}
        args: dict[str, dict[str, JsonValue]] = {}
        issues: list[Issue] = []
        first_index: dict[str, int] = {}
        for j, entry in enumerate(entries):
            name, here = entry.name, f"{path}.pluginConfig[{j}]"
            if name in first_index:
                also = f"pluginConfig[{first_index[name]}]"
                message = f'duplicate config for plugin "{name}" (also {also})'
                issues.append(Issue(f"{here}.name", message))
                continue
            first_index[name] = j
            if name not in self._registry:
                logger.warning("ignoring config of a plugin that does not exist path=%s", here)
                continue
            if name not in enabled:
                logger.warning("config of a plugin that is not enabled path=%s", here)
            body, problems = self._checked_args(name, dict(entry.args or {}), f"{here}.args")
            issues.extend(problems)
            args[name] = body
        if issues:
            raise ConfigError(issues)
        return args

    def _checked_args(
        self, name: str, body: dict[str, JsonValue], path: str
    ) -> tuple[dict[str, JsonValue], list[Issue]]:
        body.pop("apiVersion", None)  # kube's typed args may carry their type meta
        kind = body.pop("kind", None)
        if kind is not None and kind != f"{name}Args":
            expected = quote(f"{name}Args")
            return body, [Issue(f"{path}.kind", f"must be {expected}, got {quote(kind)}")]
        try:
            self._registry.build(name, body)
        except ValidationError as err:
            return body, validation_issues(err, path)
        except (TypeError, ValueError) as err:
            return body, [Issue(path, str(err))]
        return body, []

    def _check_user_plugins(self, plugins: PluginsV1beta2, path: str) -> None:
        issues: list[Issue] = []
        for point in (MULTI_POINT, *POINTS):
            plugin_set = plugins.at(point)
            first_index: dict[str, int] = {}
            for i, plugin in enumerate(plugin_set.enabled):
                where = f"{path}.{point}.enabled[{i}]"
                issue = self._check_enabled(point, plugin.name, where, first_index.get(plugin.name))
                if issue is not None:
                    issues.append(issue)
                first_index.setdefault(plugin.name, i)
            for i, name in enumerate(ref.name for ref in plugin_set.disabled):
                if name != ALL and name not in self._registry:
                    # kube ignores these too, but a typo here silently keeps a plugin running.
                    logger.warning(
                        "disabling a plugin that does not exist path=%s.%s.disabled[%d] plugin=%s",
                        path,
                        point,
                        i,
                        name,
                    )
        if issues:
            raise ConfigError(issues)

    def _check_enabled(self, point: str, name: str, where: str, first: int | None) -> Issue | None:
        if name not in self._registry:
            known = ", ".join(self._registry.names())
            message = (
                f'unknown plugin "{name}": neither built in nor an installed package\'s '
                f'"batchsched.plugins" entry point; known plugins: {known}'
            )
            return Issue(f"{where}.name", message)
        if first is not None:
            message = f'plugin "{name}" is enabled twice (also at enabled[{first}])'
            return Issue(f"{where}.name", message)
        implemented = self.extension_points(name)
        if point != MULTI_POINT and point not in implemented:
            return Issue(
                f"{where}.name",
                f'plugin "{name}" does not implement the {point} extension point; '
                f"it implements: {', '.join(implemented)}",
            )
        return None

    def _check_required(self, plan: Plan, path: str) -> None:
        sorts = plan.get("queueSort", ())
        if len(sorts) != 1:
            found = ", ".join(p.name for p in sorts) or "none"
            raise ConfigError.at(
                f"{path}.queueSort", f"exactly one queueSort plugin must be enabled, found: {found}"
            )
        for point, plugins in plan.items():
            for plugin in plugins:
                if plugin.name not in self._registry:  # user plugins were checked: a default
                    raise ConfigError.at(
                        f"{path}.{point}", f'default plugin "{plugin.name}" is not registered'
                    )
        if not plan.get("bind"):
            raise ConfigError.at(f"{path}.bind", "at least one bind plugin is needed")


def _weighted(
    point: str, plugins: Sequence[EnabledPlugin], weights: Mapping[str, int]
) -> tuple[EnabledPlugin, ...]:
    """Weights matter only for score: an unset one takes the default weight, else 1."""
    if point != "score":
        return tuple(EnabledPlugin(plugin.name) for plugin in plugins)
    return tuple(EnabledPlugin(p.name, p.weight or weights.get(p.name) or 1) for p in plugins)


def check_common_queue_sort(profiles: Sequence[tuple[Plan, Mapping[str, object]]]) -> None:
    """One scheduling queue serves every profile, so all must sort it the same way (kube)."""
    first_plan, first_args = profiles[0]
    name = first_plan["queueSort"][0].name
    for i, (plan, args) in enumerate(profiles[1:], start=1):
        other = plan["queueSort"][0].name
        if other != name:
            raise ConfigError.at(
                f"profiles[{i}].plugins.queueSort",
                f'must be the same for all profiles: profiles[0] uses "{name}", this one "{other}"',
            )
        if args.get(name) != first_args.get(name):
            raise ConfigError.at(
                f"profiles[{i}].pluginConfig",
                f'args of the queueSort plugin "{name}" must be the same for all profiles',
            )
