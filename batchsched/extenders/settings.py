"""One `extenders:` entry of a KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1
Extender), strict as the rest of the config: unknown keys rejected, errors naming the field."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from pydantic import Field, field_validator

from batchsched.configfile.document import Document, parse_duration
from batchsched.model.pod import PodView

# kube-scheduler's default when httpTimeout is unset or zero.
DEFAULT_TIMEOUT_SECONDS: Final = 5.0


class TlsConfig(Document):
    insecure: bool = False
    server_name: str = ""
    cert_file: str = ""
    key_file: str = ""
    ca_file: str = ""
    cert_data: str = ""  # base64 PEM, as the Go []byte fields are written in YAML
    key_data: str = ""
    ca_data: str = ""


class ManagedResource(Document):
    name: str = Field(min_length=1)
    ignored_by_scheduler: bool = False


class ExtenderSettings(Document):
    url_prefix: str = Field(min_length=1)
    filter_verb: str = ""
    preempt_verb: str = ""
    prioritize_verb: str = ""
    weight: int = 0
    bind_verb: str = ""
    enable_https: bool = Field(default=False, alias="enableHTTPS")
    tls_config: TlsConfig | None = None
    http_timeout: str = ""
    node_cache_capable: bool = False
    managed_resources: Sequence[ManagedResource] = ()
    ignorable: bool = False

    @field_validator("http_timeout")
    @classmethod
    def _duration(cls, value: str) -> str:
        if value:
            parse_duration(value)
        return value

    @field_validator("weight")
    @classmethod
    def _weight(cls, value: int) -> int:
        if value < 0:
            raise ValueError("must be positive")
        return value

    @property
    def timeout(self) -> float:
        seconds = parse_duration(self.http_timeout) if self.http_timeout else 0.0
        return seconds if seconds > 0 else DEFAULT_TIMEOUT_SECONDS

    def url(self, verb: str) -> str:
        return f"{self.url_prefix.rstrip('/')}/{verb}"

    def is_interested(self, pod: PodView) -> bool:
        """kube's IsInterested: no managedResources means every pod; otherwise a pod that
        requests one of them."""
        if not self.managed_resources:
            return True
        asked = set(pod.requests.names())
        return any(r.name in asked for r in self.managed_resources)


def check_extenders(extenders: Sequence[ExtenderSettings]) -> tuple[str, str] | None:
    """kube's validation across entries, as (path, message): at most one binder, and a
    positive weight on every prioritizer. None when they are valid."""
    binders = [i for i, e in enumerate(extenders) if e.bind_verb]
    if len(binders) > 1:
        where = ", ".join(f"extenders[{i}]" for i in binders)
        return "extenders", f"only one extender can implement bind, found {where}"
    for i, extender in enumerate(extenders):
        if extender.prioritize_verb and extender.weight <= 0:
            return f"extenders[{i}].weight", "must be positive when prioritizeVerb is set"
    return None


def ignored_resources(extenders: Sequence[ExtenderSettings]) -> frozenset[str]:
    """Resources an extender manages with ignoredByScheduler: NodeResourcesFit skips them."""
    return frozenset(
        r.name for e in extenders for r in e.managed_resources if r.ignored_by_scheduler
    )
