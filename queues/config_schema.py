"""The tenant quota file's document (kind QuotaConfig) as users write it: pass 1 of the loader.

Strict as the scheduler config: exact camelCase keys, no coercion, unknown keys rejected, and
every scalar checked where it is written, so that its error names the exact YAML key. Amounts
stay exact fractions here; units and precision depend on the resource and are checked with the
rest of the cross-field rules in queues/config.py.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from fractions import Fraction
from typing import Annotated, Final, Literal

from pydantic import AfterValidator, Field, PlainValidator
from pydantic.alias_generators import to_camel

from batchsched.configfile.document import Document, parse_duration
from batchsched.model.quantity import QuantityError, parse_quantity
from batchsched.model.resources import CPU, MEMORY
from queues.model import GPU, QUEUE_LABEL

API_VERSION: Final = "batchsched.io/v1alpha1"
KIND: Final = "QuotaConfig"
INT32: Final = 2**31 - 1  # PriorityClass values are int32

_DNS_LABEL: Final = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
_LABEL_VALUE: Final = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?")
_LABEL_NAME: Final = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")
_DNS_SUBDOMAIN: Final = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")
_STANDARD_RESOURCES: Final = frozenset({CPU, MEMORY, "ephemeral-storage", "pods"})


# Scalars, checked where they are written so that the error names the exact key.


def _dns_label(value: str) -> str:
    if not _DNS_LABEL.fullmatch(value):
        raise ValueError(
            "not a valid name: lower-case letters, digits and '-', "
            "starting and ending with a letter or digit, at most 63 characters"
        )
    return value


def _label_value(value: str) -> str:
    if not _LABEL_VALUE.fullmatch(value) or len(value) > 63:
        raise ValueError("not a valid label value")
    return value


def _label_key(value: str) -> str:
    prefix, _, name = value.rpartition("/")
    if (prefix and not _DNS_SUBDOMAIN.fullmatch(prefix)) or not _LABEL_NAME.fullmatch(name):
        raise ValueError("not a valid label key")
    return value


def _resource_name(value: str) -> str:
    """cpu, memory, ... or a domain-prefixed name, optionally `nvidia.com/gpu@<model>`.

    A bare "gpu" is refused rather than accepted as an unknown resource that nothing requests:
    a quota on it would never bind anything, silently."""
    name, at, model = value.partition("@")
    if at and (name != GPU or not _LABEL_NAME.fullmatch(model)):
        raise ValueError(f"not a resource name: a per-model key is {GPU}@<model>")
    if name in _STANDARD_RESOURCES or name.startswith("hugepages-"):
        return value
    prefix, slash, base = name.partition("/")
    if not slash or not _DNS_SUBDOMAIN.fullmatch(prefix) or not _LABEL_NAME.fullmatch(base):
        raise ValueError(
            "not a resource name: cpu, memory, ephemeral-storage, pods, "
            f"hugepages-<size> or a domain-prefixed name such as {GPU}"
        )
    return value


def _quantity(value: object) -> Fraction:
    """The exact amount as written; units and precision are checked with the key in pass 2."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ValueError('not a quantity: expected a number or a string such as "500m" or "64Gi"')
    try:
        exact = parse_quantity(value, "")
    except QuantityError as err:
        raise ValueError(f"not a quantity: {err.why}") from None
    if exact < 0:
        raise ValueError("must not be negative")
    return exact


def _duration(value: object) -> float:
    if not isinstance(value, str):
        raise ValueError('expected a duration such as "90m", "24h", "1h30m" or "3600s"')
    return parse_duration(value)


def _dns_subdomain(value: str) -> str:
    if not _DNS_SUBDOMAIN.fullmatch(value):
        raise ValueError("not a DeviceClass name: a DNS subdomain such as gpu.nvidia.com")
    return value


TenantName = Annotated[str, AfterValidator(_dns_label)]
DeviceClassName = Annotated[str, AfterValidator(_dns_subdomain)]
Namespace = Annotated[str, AfterValidator(_dns_label)]
QueueValue = Annotated[str, AfterValidator(_label_value), Field(min_length=1)]
ResourceName = Annotated[str, AfterValidator(_resource_name)]
Quantity = Annotated[Fraction, PlainValidator(_quantity)]
Duration = Annotated[float, PlainValidator(_duration), Field(gt=0)]
ModelAlias = Annotated[str, AfterValidator(_label_value), Field(min_length=1)]


# The document, as users write it.


class Spec(Document, arbitrary_types_allowed=True, alias_generator=to_camel):
    """Strict as the scheduler config: exact camelCase keys, no coercion, unknown keys rejected."""


class PriorityRange(Spec):
    min: int | None = Field(default=None, ge=-INT32 - 1, le=INT32)
    max: int | None = Field(default=None, ge=-INT32 - 1, le=INT32)


class TenantSpec(Spec):
    name: TenantName
    weight: float = Field(default=1.0, gt=0, allow_inf_nan=False)
    guaranteed: dict[ResourceName, Quantity] = Field(default_factory=dict)
    max: dict[ResourceName, Quantity] = Field(default_factory=dict)
    lend_idle: bool | None = None  # None: the organisation's setting, else true
    priority: PriorityRange | None = None
    namespaces: Sequence[Namespace] = ()
    queues: Sequence[QueueValue] = ()
    teams: Sequence[TenantSpec] = ()


class FairShare(Spec):
    half_life: Duration = 24 * 3600.0


class Backfill(Spec):
    reservations: int = Field(default=4, ge=0)
    starvation_after: Duration = 3600.0


class QuotaDocument(Spec):
    api_version: Literal["batchsched.io/v1alpha1"]
    kind: Literal["QuotaConfig"]
    queue_label: Annotated[str, AfterValidator(_label_key)] = QUEUE_LABEL
    default_tenant: str | None = None
    fair_share: FairShare = FairShare()
    backfill: Backfill = Backfill()
    gpu_models: dict[ModelAlias, ModelAlias] = Field(default_factory=dict)
    # DRA: which quota resource a device of each DeviceClass counts as (one device = one
    # unit; one whole GPU when mapped to nvidia.com/gpu).
    device_classes: dict[DeviceClassName, ResourceName] = Field(default_factory=dict)
    tenants: Sequence[TenantSpec] = Field(min_length=1)
