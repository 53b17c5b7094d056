"""One device of a ResourceSlice as the allocator and CEL selectors see it.

Attribute and capacity names are fully qualified ("gpu.nvidia.com/productName"): a slice's
unqualified names get the slice's driver as their domain, as the API documents, so the CEL
expression `device.attributes["gpu.nvidia.com"].productName` and the key
"gpu.nvidia.com/productName" name the same value.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import NewType

DeviceId = NewType("DeviceId", str)  # "<driver>/<pool>/<device>", unique in a cluster


@dataclass(frozen=True, slots=True, order=True)
class Version:
    """A semantic version attribute (`version:` in a slice), e.g. "9.0.0"."""

    text: str


AttributeValue = int | bool | str | Version


@dataclass(frozen=True, slots=True)
class Device:
    driver: str
    pool: str
    name: str
    attributes: Mapping[str, AttributeValue] = field(default_factory=dict)
    capacity: Mapping[str, Fraction] = field(default_factory=dict)  # exact quantities
    id: DeviceId = field(init=False, compare=False)  # read per device per node per cycle

    def __post_init__(self) -> None:
        object.__setattr__(self, "id", DeviceId(f"{self.driver}/{self.pool}/{self.name}"))


def qualified(name: str, driver: str) -> str:
    """An attribute or capacity name with its domain: unqualified names belong to the driver."""
    return name if "/" in name else f"{driver}/{name}"
