"""KubeSchedulerConfiguration (v1, v1beta3, v1beta2) to one resolved SchedulerConfig.

Two layers, as in kube-scheduler: versioned documents that mirror what users paste (documents.py:
unknown keys rejected, each error naming its YAML path), and one version-neutral SchedulerConfig,
here, whose profiles already hold the merged plugin lists and validated plugin args.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

from pydantic import BaseModel, ConfigDict, JsonValue, PrivateAttr, ValidationError

from batchsched.config.documents import (
    KIND,
    NO_PLUGINS,
    V1,
    VERSION_ONLY,
    ClientConnection,
    ConfigDocument,
    LeaderElection,
    ProfileV1beta2,
    QueueStatusSettings,
    document_model,
)
from batchsched.config.merge import PluginResolver, check_common_queue_sort
from batchsched.config.plugin_packages import with_packages
from batchsched.configfile.errors import ConfigError, validation_issues
from batchsched.configfile.yaml_source import parse_yaml, read_source, single_document
from batchsched.extenders.settings import ExtenderSettings, check_extenders, ignored_resources
from batchsched.framework.profile import Profile
from batchsched.framework.registry import (
    EnabledPlugin,
    ProfileError,
    Registry,
    UnknownPlugin,
    assemble_profile,
)

GPU_SCHEDULER_NAME: Final = "gpu-scheduler"  # ours, in default_config()

logger = logging.getLogger(__name__)


class Resolved(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ProfileConfig(Resolved):
    scheduler_name: str
    plugins: dict[str, tuple[EnabledPlugin, ...]]  # per extension point, in run order
    plugin_args: dict[str, dict[str, JsonValue]] = {}  # validated, apiVersion/kind stripped
    percentage_of_nodes_to_score: int | None = None  # the profile's, else the top-level one

    def describe(self) -> dict[str, list[str]]:
        """Plugin names per point ("Name:weight" at score), for logs and `--explain`."""
        return {
            point: [f"{p.name}:{p.weight}" if point == "score" else p.name for p in plugins]
            for point, plugins in self.plugins.items()
        }


class SchedulerConfig(Resolved):
    api_version: str = V1
    profiles: tuple[ProfileConfig, ...]
    percentage_of_nodes_to_score: int | None = None
    parallelism: int = 16
    pod_initial_backoff_seconds: int = 1
    pod_max_backoff_seconds: int = 10
    leader_election: LeaderElection = LeaderElection()
    client_connection: ClientConnection = ClientConnection()
    queue_status: QueueStatusSettings = QueueStatusSettings()
    extenders: tuple[ExtenderSettings, ...] = ()  # HTTP extenders, called in order
    _registry: Registry | None = PrivateAttr(default=None)  # the one the plugins were checked with

    def profile(self, scheduler_name: str) -> ProfileConfig:
        for profile in self.profiles:
            if profile.scheduler_name == scheduler_name:
                return profile
        raise KeyError(scheduler_name)

    def build_profiles(self, registry: Registry | None = None) -> dict[str, Profile]:
        """One runtime Profile per scheduler name, plugins built once per profile."""
        registry = registry if registry is not None else self._registry
        registry = registry if registry is not None else builtin_registry()
        built: dict[str, Profile] = {}
        for i, prof in enumerate(self.profiles):
            try:
                built[prof.scheduler_name] = assemble_profile(
                    registry,
                    prof.scheduler_name,
                    prof.plugins,
                    prof.plugin_args,
                    prof.percentage_of_nodes_to_score,
                )
            except (UnknownPlugin, ProfileError) as err:
                raise ConfigError.at(f"profiles[{i}]", str(err)) from err
            except ValidationError as err:
                raise ConfigError(validation_issues(err, f"profiles[{i}].pluginConfig")) from err
        return built


def builtin_registry() -> Registry:
    # Imported late: the built-in plugin set is the runtime's choice, not the config's.
    from batchsched.plugins.registry import default_registry

    return default_registry()


def builtin_defaults() -> Mapping[str, Sequence[EnabledPlugin]]:
    from batchsched.plugins.registry import DEFAULT_PLUGINS

    return DEFAULT_PLUGINS


def load_config(
    source: str | Path,
    registry: Registry | None = None,
    defaults: Mapping[str, Sequence[EnabledPlugin]] | None = None,
) -> SchedulerConfig:
    """A KubeSchedulerConfiguration from YAML text or a file; ConfigError names what is wrong.

    `registry` and `defaults` (plugins per extension point) default to the built-in ones.
    """
    text, origin = read_source(source)
    try:
        document = single_document(parse_yaml(text), KIND)
        return config_from_mapping(document, registry, defaults)
    except ConfigError as err:
        err.source = origin
        raise


def default_config(
    registry: Registry | None = None,
    defaults: Mapping[str, Sequence[EnabledPlugin]] | None = None,
) -> SchedulerConfig:
    """What runs without a config file: one "gpu-scheduler" profile with the default plugins."""
    document = {"apiVersion": V1, "kind": KIND, "profiles": [{"schedulerName": GPU_SCHEDULER_NAME}]}
    return config_from_mapping(document, registry, defaults)


def config_from_mapping(
    document: Mapping[str, object],
    registry: Registry | None = None,
    defaults: Mapping[str, Sequence[EnabledPlugin]] | None = None,
) -> SchedulerConfig:
    """The same as load_config, for a document already parsed (e.g. from a ConfigMap)."""
    model = document_model(document)
    try:
        parsed = model.model_validate(document)
    except ValidationError as err:
        raise ConfigError(validation_issues(err, "", model, VERSION_ONLY)) from None
    for name in model.ignored:
        if name in parsed.model_fields_set:
            alias = model.model_fields[name].alias
            logger.warning("ignoring a field batchsched does not act on field=%s", alias)
    if registry is None:  # the built-ins, and the installed plugin packages the profiles name
        registry = with_packages(builtin_registry(), parsed)
    defaults = defaults if defaults is not None else builtin_defaults()
    extenders = tuple(parsed.extenders)
    invalid = check_extenders(extenders)
    if invalid is not None:
        raise ConfigError.at(*invalid)
    profiles = _resolve_profiles(parsed, PluginResolver(registry, defaults))
    config = SchedulerConfig(
        api_version=parsed.api_version,
        profiles=_fit_ignoring(profiles, ignored_resources(extenders)),
        percentage_of_nodes_to_score=parsed.percentage_of_nodes_to_score,
        parallelism=parsed.parallelism,
        pod_initial_backoff_seconds=parsed.pod_initial_backoff_seconds,
        pod_max_backoff_seconds=parsed.pod_max_backoff_seconds,
        leader_election=parsed.leader_election,
        client_connection=parsed.client_connection,
        queue_status=parsed.queue_status,
        extenders=extenders,
    )
    config._registry = registry
    return config


def _fit_ignoring(
    profiles: tuple[ProfileConfig, ...], ignored: frozenset[str]
) -> tuple[ProfileConfig, ...]:
    """As kube-scheduler: resources an extender manages with ignoredByScheduler are added to
    every profile's NodeResourcesFit ignoredResources (the extender accounts for them)."""
    if not ignored:
        return profiles
    changed = []
    for profile in profiles:
        args = dict(profile.plugin_args)
        fit = dict(args.get("NodeResourcesFit", {}))
        have = fit.get("ignoredResources")
        names = [str(n) for n in have] if isinstance(have, list) else []
        fit["ignoredResources"] = [*names, *sorted(ignored - set(names))]
        args["NodeResourcesFit"] = fit
        changed.append(profile.model_copy(update={"plugin_args": args}))
    return tuple(changed)


def _resolve_profiles(doc: ConfigDocument, resolver: PluginResolver) -> tuple[ProfileConfig, ...]:
    # kube: no profiles means one profile with the default name and plugins.
    documents = list(doc.profiles) or [ProfileV1beta2()]
    first_index: dict[str, int] = {}
    profiles = []
    for i, profile in enumerate(documents):
        path = f"profiles[{i}]"
        name = profile.scheduler_name
        if name in first_index:
            raise ConfigError.at(
                f"{path}.schedulerName",
                f'duplicate scheduler name "{name}" (also profiles[{first_index[name]}])',
            )
        first_index[name] = i
        plugins = profile.plugins if profile.plugins is not None else NO_PLUGINS
        plan = resolver.resolve(plugins, f"{path}.plugins", doc.multi_point)
        percentage = profile.percentage
        profiles.append(
            ProfileConfig(
                scheduler_name=name,
                plugins=plan,
                plugin_args=resolver.plugin_args(profile.plugin_config, plan, path),
                percentage_of_nodes_to_score=(
                    percentage if percentage is not None else doc.percentage_of_nodes_to_score
                ),
            )
        )
    check_common_queue_sort([(p.plugins, p.plugin_args) for p in profiles])
    return tuple(profiles)
