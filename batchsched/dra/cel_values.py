"""The values CEL device selectors compute with, and their errors, without the CEL engine.

Kubernetes quantities and semantic versions (kube's `quantity` and `semver` libraries) as
exact Python values. Apart from cel.py because parsing a ResourceSlice reads its versions
(batchsched.dra.parse) on every path, the live scheduler's start-up among them, while celpy
and lark (cel.py's engine, ~0.1 s to import) are needed only once a selector is compiled.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Final


class CelError(ValueError):
    """A selector expression that does not compile."""


class CelEvalError(ValueError):
    """A selector that failed on one device (missing attribute, not a bool, bad operand)."""


@dataclass(frozen=True, slots=True)
class Quantity:
    """A Kubernetes quantity (`quantity("40Gi")`, a capacity): `==` compares amounts."""

    amount: Fraction


@dataclass(frozen=True, slots=True, eq=False)
class Semver:
    """A semantic version (`semver("1.2.3")`, a version attribute); build metadata is ignored."""

    text: str
    key: tuple[int, int, int, bool, tuple[tuple[int, int, str], ...]]  # semver.org order

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Semver):
            raise overload_error("_==_", self, other)
        return self.key == other.key


_QUANTITY = re.compile(r"([+-]?)(\d+\.?\d*|\.\d+)(?:[eE]([+-]?\d+)|([KMGTPE]i|[numkMGTPE]?))")
_DECIMAL = ("n", "u", "m", "", "k", "M", "G", "T", "P", "E")  # 1000**-3 to 1000**6
_SCALES: Final = {s: Fraction(1000) ** (i - 3) for i, s in enumerate(_DECIMAL)} | {
    f"{s}i": Fraction(1024**i) for i, s in enumerate("KMGTPE", 1)
}
_NUMBER, _BUILD = r"(0|[1-9]\d*)", r"[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*"
_ID = r"(?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*)"  # numeric identifiers without leading zeros
_SEMVER = re.compile(rf"{_NUMBER}\.{_NUMBER}\.{_NUMBER}(?:-({_ID}(?:\.{_ID})*))?(?:\+{_BUILD})?")


@functools.lru_cache(maxsize=4096)  # a selector's literals are parsed on every evaluation
def parse_quantity(text: str) -> Fraction:
    """The exact amount of a Kubernetes quantity ("80Gi", "1.5", "200m", "1e3"), or ValueError."""
    found = _QUANTITY.fullmatch(text)
    if found is None:
        pattern = "^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
        raise ValueError(f"quantity {text!r}: quantities must match {pattern!r}")
    sign, number, exponent, suffix = found.groups()
    scale = _SCALES[suffix] if exponent is None else Fraction(10) ** int(exponent)
    return (-1 if sign == "-" else 1) * Fraction(number) * scale


@functools.lru_cache(maxsize=4096)
def parse_semver(text: str, normalize: bool = False) -> Semver:
    """A strict semver.org version, or ValueError. `normalize` (kube's `semver(s, true)`) first
    drops a leading "v" and leading zeros and fills a missing minor or patch with 0."""
    found = _SEMVER.fullmatch(_normalized(text) if normalize else text)
    if found is None:
        raise ValueError(f"{text!r} is not a semantic version (major.minor.patch[-pre][+build])")
    major, minor, patch, pre = found.groups()
    ids = pre.split(".") if pre else []
    ranked = tuple((0, int(i), "") if i.isdigit() else (1, 0, i) for i in ids)
    return Semver(text, (int(major), int(minor), int(patch), not ids, ranked))


def _normalized(text: str) -> str:
    parts = text.removeprefix("v").split(".", 2)
    for i, part in enumerate(parts):
        if len(part) > 1:  # as kube's normalizeAndParse: leading zeros go, a digit stays first
            trimmed = part.lstrip("0")
            parts[i] = trimmed if trimmed[:1].isdigit() else "0" + trimmed
    if len(parts) < 3 and any(c in parts[-1] for c in "+-"):
        raise ValueError(f"{text!r}: a short version cannot carry pre-release or build metadata")
    return ".".join(parts + ["0"] * (3 - len(parts)))


def type_name(value: object) -> str:
    return type(value).__name__.removesuffix("Type").lower()


def overload_error(name: str, *args: object) -> TypeError:
    return TypeError(f"no such overload: {name}({', '.join(type_name(a) for a in args)})")
