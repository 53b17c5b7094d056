"""KubeSchedulerConfiguration (v1, v1beta3, v1beta2): strict documents and the resolved config.

Two layers, as in kube-scheduler: versioned documents that mirror what users paste (unknown
keys rejected, each error naming its YAML path), and one version-neutral SchedulerConfig whose
profiles already hold the merged plugin lists and validated plugin args.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, ClassVar, Final

import yaml
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    JsonValue,
    PrivateAttr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from batchsched.config.merge import (
    NO_PLUGINS,
    ConfigError,
    Document,
    Issue,
    PluginConfigEntry,
    PluginResolver,
    Plugins,
    PluginsV1beta2,
    check_common_queue_sort,
    quote,
    validation_issues,
)
from batchsched.framework.profile import Profile
from batchsched.framework.registry import (
    EnabledPlugin,
    ProfileError,
    Registry,
    UnknownPlugin,
    assemble_profile,
)

KIND: Final = "KubeSchedulerConfiguration"
GROUP: Final = "kubescheduler.config.k8s.io"
V1: Final = f"{GROUP}/v1"
V1BETA3: Final = f"{GROUP}/v1beta3"
V1BETA2: Final = f"{GROUP}/v1beta2"
DEFAULT_SCHEDULER_NAME: Final = "default-scheduler"  # kube's, for a profile without a name
GPU_SCHEDULER_NAME: Final = "gpu-scheduler"  # ours, in default_config()

logger = logging.getLogger(__name__)


_DURATION_PART: Final = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_UNIT_SECONDS: Final = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1, "m": 60, "h": 3600}


def parse_duration(value: object) -> float:
    """A Go duration string ("15s", "1m30s", "500ms") in seconds, as metav1.Duration accepts."""
    body = value.lstrip("+-") if isinstance(value, str) else ""
    if body != "0" and not re.fullmatch(rf"(?:{_DURATION_PART.pattern})+", body):
        raise ValueError(f'expected a duration such as "15s", "1m30s" or "500ms", got {value!r}')
    seconds = sum(float(n) * _UNIT_SECONDS[unit] for n, unit in _DURATION_PART.findall(body))
    return -seconds if str(value).startswith("-") else seconds


Duration = Annotated[float, BeforeValidator(parse_duration), Field(gt=0)]


class LeaderElection(Document):
    """Durations in seconds. Our own lease name, so we never contend with kube-scheduler's."""

    leader_elect: bool = True
    lease_duration: Duration = 15.0
    renew_deadline: Duration = 10.0
    retry_period: Duration = 2.0
    resource_lock: str = "leases"
    resource_name: str = Field(default="gpu-scheduler", min_length=1)
    resource_namespace: str = Field(default="kube-system", min_length=1)

    @model_validator(mode="after")
    def _kube_rules(self) -> LeaderElection:
        if self.leader_elect and self.renew_deadline >= self.lease_duration:
            raise ValueError("renewDeadline must be less than leaseDuration")
        if self.leader_elect and self.resource_lock != "leases":
            raise ValueError('resourceLock must be "leases"')
        return self


class ClientConnection(Document):
    kubeconfig: str = ""
    qps: float = 50.0
    burst: int = Field(default=100, ge=0)
    content_type: str = "application/json"  # kubernetes-asyncio speaks JSON, not protobuf
    accept_content_types: str = ""


class ProfileV1beta2(Document):
    scheduler_name: str = Field(default=DEFAULT_SCHEDULER_NAME, min_length=1)
    plugins: PluginsV1beta2 | None = None
    plugin_config: Sequence[PluginConfigEntry] = ()

    @property
    def percentage(self) -> int | None:
        return None


class ProfileV1(ProfileV1beta2):
    percentage_of_nodes_to_score: int | None = Field(default=None, ge=0, le=100)
    plugins: Plugins | None = None

    @property
    def percentage(self) -> int | None:
        return self.percentage_of_nodes_to_score


class ConfigDocument(Document):
    """Fields common to the three versions; subclasses add what only some of them have."""

    multi_point: ClassVar[bool] = True
    # Accepted so that pasted configs load, but nothing in batchsched acts on them.
    ignored: ClassVar[tuple[str, ...]] = (
        "extenders", "enable_profiling", "enable_contention_profiling"
    )

    api_version: str
    kind: str
    parallelism: int = Field(default=16, gt=0)
    percentage_of_nodes_to_score: int | None = Field(default=None, ge=0, le=100)
    pod_initial_backoff_seconds: int = Field(default=1, gt=0)
    pod_max_backoff_seconds: int = Field(default=10, gt=0, validate_default=True)
    leader_election: LeaderElection = LeaderElection()
    client_connection: ClientConnection = ClientConnection()
    profiles: Sequence[ProfileV1beta2] = ()
    enable_profiling: bool | None = None
    enable_contention_profiling: bool | None = None
    extenders: list[dict[str, JsonValue]] | None = None

    @field_validator("pod_max_backoff_seconds")
    @classmethod
    def _max_backoff_at_least_initial(cls, value: int, info: ValidationInfo) -> int:
        initial = info.data.get("pod_initial_backoff_seconds", 1)
        if value < initial:
            raise ValueError(f"must be at least podInitialBackoffSeconds ({initial})")
        return value


class ConfigV1beta2(ConfigDocument):
    multi_point: ClassVar[bool] = False
    ignored: ClassVar[tuple[str, ...]] = (
        *ConfigDocument.ignored, "healthz_bind_address", "metrics_bind_address"
    )

    healthz_bind_address: str | None = None
    metrics_bind_address: str | None = None


class ConfigV1beta3(ConfigDocument):
    profiles: Sequence[ProfileV1] = ()


class ConfigV1(ConfigV1beta3):
    ignored: ClassVar[tuple[str, ...]] = (*ConfigDocument.ignored, "delay_cache_until_active")

    delay_cache_until_active: bool | None = None


DOCUMENTS: Final[dict[str, type[ConfigDocument]]] = {
    V1: ConfigV1, V1BETA3: ConfigV1beta3, V1BETA2: ConfigV1beta2,
}


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
                    registry, prof.scheduler_name, prof.plugins, prof.plugin_args,
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


_VERSION_ONLY: Final = {
    "multiPoint": f"multiPoint needs apiVersion {V1BETA3} or {V1}",
    "percentageOfNodesToScore": f"a per-profile percentageOfNodesToScore needs {V1BETA3} or {V1}",
    "healthzBindAddress": f"removed after {V1BETA2} (health checks use the secure port)",
    "metricsBindAddress": f"removed after {V1BETA2} (metrics use the secure port)",
    "delayCacheUntilActive": f"only in {V1}",
}




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
    text, origin = _read_source(source)
    try:
        return config_from_mapping(_single_document(_parse_yaml(text)), registry, defaults)
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
    model = _document_model(document)
    try:
        parsed = model.model_validate(document)
    except ValidationError as err:
        raise ConfigError(validation_issues(err, "", model, _VERSION_ONLY)) from None
    for name in model.ignored:
        if name in parsed.model_fields_set:
            alias = model.model_fields[name].alias
            logger.warning("ignoring a field batchsched does not act on field=%s", alias)
    registry = registry if registry is not None else builtin_registry()
    defaults = defaults if defaults is not None else builtin_defaults()
    config = SchedulerConfig(
        api_version=parsed.api_version,
        profiles=_resolve_profiles(parsed, PluginResolver(registry, defaults)),
        percentage_of_nodes_to_score=parsed.percentage_of_nodes_to_score,
        parallelism=parsed.parallelism,
        pod_initial_backoff_seconds=parsed.pod_initial_backoff_seconds,
        pod_max_backoff_seconds=parsed.pod_max_backoff_seconds,
        leader_election=parsed.leader_election,
        client_connection=parsed.client_connection,
    )
    config._registry = registry
    return config


def _read_source(source: str | Path) -> tuple[str, str]:
    """(text, file name or "") — a one-line string naming an existing file is a path."""
    if not isinstance(source, Path) and not _names_a_file(source):
        return str(source), ""
    try:
        return Path(source).read_text(encoding="utf-8"), str(source)
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError([Issue("", f"cannot read the file: {err}")], str(source)) from err


def _names_a_file(text: str) -> bool:
    try:
        return "\n" not in text and Path(text).is_file()
    except (OSError, ValueError):  # too long for a file name, or a NUL byte in it
        return False


class _StrictLoader(yaml.SafeLoader):
    """Rejects a key given twice in one mapping, as kube's strict decoding does."""


def _construct_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode) -> dict[object, object]:
    seen: set[object] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        if isinstance(key, str) and key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark
            )
        seen.add(key)
    return loader.construct_mapping(node, deep=True)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _parse_yaml(text: str) -> list[object]:
    try:
        return [doc for doc in yaml.load_all(text, Loader=_StrictLoader) if doc is not None]
    except yaml.YAMLError as err:
        raise ConfigError.at("", f"invalid YAML: {err}") from None


def _single_document(documents: list[object]) -> Mapping[str, object]:
    """The one KubeSchedulerConfiguration; other kinds in a multi-document file are skipped."""
    if len(documents) > 1:
        configs: list[object] = [
            d for d in documents if isinstance(d, dict) and d.get("kind") == KIND
        ]
        if len(configs) != 1:
            raise ConfigError.at(
                "", f"{len(documents)} YAML documents, {len(configs)} of kind {KIND}; "
                "expected exactly one",
            )
        logger.warning("skipping YAML documents of other kinds count=%d", len(documents) - 1)
        documents = configs
    if not documents:
        raise ConfigError.at("", f"no {KIND} found: the YAML is empty")
    document = documents[0]
    if not isinstance(document, dict):
        hint = " (no such file)" if isinstance(document, str) and " " not in document else ""
        raise ConfigError.at("", f"expected a {KIND} mapping, got {quote(document)}{hint}")
    return document


def _document_model(document: Mapping[str, object]) -> type[ConfigDocument]:
    kind, api_version = document.get("kind"), document.get("apiVersion")
    if kind != KIND:
        raise ConfigError.at("kind", f"unsupported kind {quote(kind)}; expected {quote(KIND)}")
    if not isinstance(api_version, str) or api_version not in DOCUMENTS:
        supported = ", ".join(DOCUMENTS)
        raise ConfigError.at(
            "apiVersion", f"unsupported apiVersion {quote(api_version)}; supported: {supported}"
        )
    return DOCUMENTS[api_version]


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
        profiles.append(ProfileConfig(
            scheduler_name=name,
            plugins=plan,
            plugin_args=resolver.plugin_args(profile.plugin_config, plan, path),
            percentage_of_nodes_to_score=(
                percentage if percentage is not None else doc.percentage_of_nodes_to_score
            ),
        ))
    check_common_queue_sort([(p.plugins, p.plugin_args) for p in profiles])
    return tuple(profiles)
