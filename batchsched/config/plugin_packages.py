"""Out-of-tree plugins: installed packages that name a plugin in the entry-point group
`batchsched.plugins`, loaded only when a config names them.

A package declares, in its pyproject.toml,

    [project.entry-points."batchsched.plugins"]
    PreferLabel = "batchsched_example_plugin:SPEC"

where SPEC is a `batchsched.framework.registry.PluginSpec` (name, factory, pydantic args
model). Only the names a profile enables or configures are looked up, so a broken package
nobody asked for cannot stop the scheduler. Everything that can go wrong (no such entry point,
the import fails, the object is not a spec, two packages or a package and a built-in plugin
claim one name, args the model rejects) is a ConfigError that names the package and the
entry point, never a traceback.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from importlib.metadata import EntryPoint, EntryPoints, entry_points
from typing import Final

from pydantic import BaseModel, ValidationError

from batchsched.config.documents import MULTI_POINT, ConfigDocument
from batchsched.configfile.errors import ConfigError, Issue
from batchsched.framework.interfaces import EXTENSION_POINTS
from batchsched.framework.registry import PluginBuilder, Registry

GROUP: Final = "batchsched.plugins"

FindEntryPoints = Callable[[], EntryPoints]


def _installed() -> EntryPoints:
    return entry_points(group=GROUP)


class PluginPackageError(ValueError):
    """A packaged plugin that could not be built; the message names package and entry point."""


@dataclass(frozen=True, slots=True)
class PackagedPlugin:
    """A plugin spec from a package, which says where it came from when it fails."""

    name: str
    spec: PluginBuilder
    origin: str  # 'package "x" 1.0, entry point "Name = module:attr"'

    def build(self, raw_args: Mapping[str, object] | None) -> object:
        try:
            return self.spec.build(raw_args)
        except ValidationError as err:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or '(args)'}: {e['msg']}"
                for e in err.errors()
            )
            raise PluginPackageError(f"{self.origin}: bad args: {problems}") from None
        except Exception as err:  # a third party's factory: any failure is its config error
            raise PluginPackageError(
                f"{self.origin}: the factory failed: {_describe(err)}"
            ) from None


def with_packages(
    base: Registry, document: ConfigDocument, find: FindEntryPoints = _installed
) -> Registry:
    """`base` plus the packaged plugins the document names that `base` lacks."""
    issues: list[Issue] = []
    loaded: dict[str, PackagedPlugin] = {}
    found: EntryPoints | None = None
    for name, path in _named_plugins(document):
        if name in loaded:
            continue
        if found is None:
            found = find()
        matches = list(found.select(name=name))
        if not matches:
            continue  # a built-in, or an unknown name the resolver reports with the known ones
        if name in base:
            clash = f'has the name of a built-in plugin "{name}"; the package must rename it'
            issues.append(Issue(path, f"{_origin(matches[0])} {clash}"))
            continue
        if len(matches) > 1:
            origins = " and ".join(_origin(m) for m in matches)
            issues.append(Issue(path, f'plugin "{name}" is provided twice: {origins}'))
            continue
        plugin, issue = _load(matches[0], path)
        if issue is not None:
            issues.append(issue)
        elif plugin is not None:
            loaded[name] = plugin
    if issues:
        raise ConfigError(issues)
    return base.extended(loaded.values()) if loaded else base


def _named_plugins(document: ConfigDocument) -> Iterator[tuple[str, str]]:
    """(name, YAML path) of each plugin the profiles enable or configure."""
    for i, profile in enumerate(document.profiles):
        if profile.plugins is not None:
            for point in (MULTI_POINT, *EXTENSION_POINTS):
                for j, plugin in enumerate(profile.plugins.at(point).enabled):
                    yield plugin.name, f"profiles[{i}].plugins.{point}.enabled[{j}].name"
        for j, entry in enumerate(profile.plugin_config):
            yield entry.name, f"profiles[{i}].pluginConfig[{j}].name"


def _load(entry: EntryPoint, path: str) -> tuple[PackagedPlugin | None, Issue | None]:
    origin = _origin(entry)
    try:
        spec = entry.load()
    except Exception as err:  # an import of third-party code: every failure is reported
        return None, Issue(path, f"{origin}: cannot be imported: {_describe(err)}")
    problem = _spec_problem(entry.name, spec)
    if problem:
        return None, Issue(path, f"{origin}: {problem}")
    plugin = PackagedPlugin(entry.name, spec, origin)
    try:
        # The resolver builds each plugin with default args to learn its extension points.
        plugin.build(None)
    except PluginPackageError as err:
        return None, Issue(path, f"{err} (built with no args; every arg needs a default)")
    return plugin, None


def _spec_problem(name: str, spec: object) -> str:
    args = getattr(spec, "args", None)
    if not (
        callable(getattr(spec, "build", None)) and isinstance(getattr(spec, "name", None), str)
    ):
        return f"is {type(spec).__name__}, not a batchsched.framework.registry.PluginSpec"
    if not (isinstance(args, type) and issubclass(args, BaseModel)):
        return "its args type is not a pydantic model (subclass PluginArgs)"
    if spec.name != name:  # type: ignore[attr-defined]
        return f'its spec is named "{spec.name}", the entry point "{name}"'  # type: ignore[attr-defined]
    return ""


def _origin(entry: EntryPoint) -> str:
    dist = entry.dist
    package = f'package "{dist.name}" {dist.version}' if dist is not None else "an unknown package"
    return f'{package}, entry point "{entry.name} = {entry.value}" in group {GROUP}'


def _describe(err: BaseException) -> str:
    return f"{type(err).__name__}: {err}"
