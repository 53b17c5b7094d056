"""KubeSchedulerConfiguration documents (v1, v1beta3, v1beta2) as users write them.

Strict as kube's decoder: exact camelCase keys, no coercion, unknown keys rejected. Each version
accepts only its own keys, so a key pasted from another version's guide is an error that says
which version has it. Nothing here merges or resolves; see merge.py and scheduler_config.py.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Annotated, ClassVar, Final

from pydantic import (
    BeforeValidator,
    Field,
    JsonValue,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_snake

from batchsched.configfile.document import Document, parse_duration
from batchsched.configfile.errors import ConfigError, quote
from batchsched.extenders.settings import ExtenderSettings
from batchsched.framework.registry import EnabledPlugin

KIND: Final = "KubeSchedulerConfiguration"
GROUP: Final = "kubescheduler.config.k8s.io"
V1: Final = f"{GROUP}/v1"
V1BETA3: Final = f"{GROUP}/v1beta3"
V1BETA2: Final = f"{GROUP}/v1beta2"
DEFAULT_SCHEDULER_NAME: Final = "default-scheduler"  # kube's, for a profile without a name
MULTI_POINT: Final = "multiPoint"
MAX_WEIGHT: Final = 100


# Plugin sets, per extension point.


class PluginRef(Document):
    name: str = Field(min_length=1)
    weight: int | None = Field(default=None, ge=0, le=MAX_WEIGHT)  # 0/None: the default weight


class PluginSet(Document):
    enabled: list[PluginRef] = Field(default_factory=list)
    disabled: list[PluginRef] = Field(default_factory=list)

    def enabled_plugins(self) -> list[EnabledPlugin]:
        return [EnabledPlugin(ref.name, ref.weight or 0) for ref in self.enabled]

    def disabled_names(self) -> set[str]:
        return {ref.name for ref in self.disabled}


EMPTY: Final = PluginSet()


class PluginsV1beta2(Document):
    queue_sort: PluginSet = EMPTY
    pre_enqueue: PluginSet = EMPTY
    pre_filter: PluginSet = EMPTY
    filter: PluginSet = EMPTY
    post_filter: PluginSet = EMPTY
    pre_score: PluginSet = EMPTY
    score: PluginSet = EMPTY
    reserve: PluginSet = EMPTY
    permit: PluginSet = EMPTY
    pre_bind: PluginSet = EMPTY
    bind: PluginSet = EMPTY
    post_bind: PluginSet = EMPTY

    def at(self, point: str) -> PluginSet:
        """The set at a YAML point name ("preFilter"); empty where this version lacks it."""
        plugin_set = getattr(self, to_snake(point), EMPTY)
        return plugin_set if isinstance(plugin_set, PluginSet) else EMPTY


class Plugins(PluginsV1beta2):
    multi_point: PluginSet = EMPTY


NO_PLUGINS: Final = PluginsV1beta2()


class PluginConfigEntry(Document):
    name: str = Field(min_length=1)
    args: dict[str, JsonValue] | None = None


# Scheduler-wide settings.

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


class QueueStatusSettings(Document):
    """batchsched's own (no kube-scheduler field): how the leader writes each pending gang's
    place in line on its PodGroup (runtime/queue_status_writer.py). Durations in seconds."""

    pass_interval: Duration = 5.0  # how often the statuses are computed
    min_interval_per_group: Duration = 15.0  # one PodGroup is written at most this often
    max_groups_per_pass: int = Field(default=20, ge=0)  # 0: no queue status is written


JSON_CONTENT: Final = "application/json"
PROTOBUF_CONTENT: Final = "application/vnd.kubernetes.protobuf"


class ClientConnection(Document):
    """kube-scheduler's clientConnection. qps and burst feed the client's token bucket
    (kube/throttle.py: 0 means the default, a negative qps no limit). batchsched speaks JSON
    only: protobuf, kube-scheduler's own default, is accepted so that a config it wrote
    loads, and is answered with a warning at start-up (runtime/app_serving.py); any other
    type is an error."""

    kubeconfig: str = ""
    qps: float = 50.0
    burst: int = Field(default=100, ge=0)
    content_type: str = JSON_CONTENT
    accept_content_types: str = ""

    @field_validator("content_type")
    @classmethod
    def _json_or_protobuf(cls, value: str) -> str:
        if value not in ("", JSON_CONTENT, PROTOBUF_CONTENT):
            raise ValueError(f"must be {JSON_CONTENT} (batchsched speaks JSON only), not {value!r}")
        return value

    @field_validator("accept_content_types")
    @classmethod
    def _accepts_json(cls, value: str) -> str:
        types = [t.strip() for t in value.split(",") if t.strip()]
        if types and JSON_CONTENT not in types:
            raise ValueError(f"must include {JSON_CONTENT} (batchsched speaks JSON only)")
        return value


# Profiles and the versioned top-level documents.


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
        "enable_profiling",
        "enable_contention_profiling",
    )

    api_version: str
    kind: str
    parallelism: int = Field(default=16, gt=0)
    percentage_of_nodes_to_score: int | None = Field(default=None, ge=0, le=100)
    pod_initial_backoff_seconds: int = Field(default=1, gt=0)
    pod_max_backoff_seconds: int = Field(default=10, gt=0, validate_default=True)
    leader_election: LeaderElection = LeaderElection()
    client_connection: ClientConnection = ClientConnection()
    queue_status: QueueStatusSettings = QueueStatusSettings()
    profiles: Sequence[ProfileV1beta2] = ()
    enable_profiling: bool | None = None
    enable_contention_profiling: bool | None = None
    extenders: Sequence[ExtenderSettings] = ()

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
        *ConfigDocument.ignored,
        "healthz_bind_address",
        "metrics_bind_address",
    )

    healthz_bind_address: str | None = None
    metrics_bind_address: str | None = None


class ConfigV1beta3(ConfigDocument):
    profiles: Sequence[ProfileV1] = ()


class ConfigV1(ConfigV1beta3):
    ignored: ClassVar[tuple[str, ...]] = (*ConfigDocument.ignored, "delay_cache_until_active")

    delay_cache_until_active: bool | None = None


DOCUMENTS: Final[dict[str, type[ConfigDocument]]] = {
    V1: ConfigV1,
    V1BETA3: ConfigV1beta3,
    V1BETA2: ConfigV1beta2,
}

# Why a key is unknown in this version: it exists only in others (the "did you mean" of versions).
VERSION_ONLY: Final = {
    "multiPoint": f"multiPoint needs apiVersion {V1BETA3} or {V1}",
    "percentageOfNodesToScore": f"a per-profile percentageOfNodesToScore needs {V1BETA3} or {V1}",
    "healthzBindAddress": f"removed after {V1BETA2} (health checks use the secure port)",
    "metricsBindAddress": f"removed after {V1BETA2} (metrics use the secure port)",
    "delayCacheUntilActive": f"only in {V1}",
}


def document_model(document: Mapping[str, object]) -> type[ConfigDocument]:
    """The document class for the mapping's kind and apiVersion."""
    kind, api_version = document.get("kind"), document.get("apiVersion")
    if kind != KIND:
        raise ConfigError.at("kind", f"unsupported kind {quote(kind)}; expected {quote(KIND)}")
    if not isinstance(api_version, str) or api_version not in DOCUMENTS:
        supported = ", ".join(DOCUMENTS)
        raise ConfigError.at(
            "apiVersion", f"unsupported apiVersion {quote(api_version)}; supported: {supported}"
        )
    return DOCUMENTS[api_version]
