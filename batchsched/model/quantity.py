"""Kubernetes ``resource.Quantity`` parsing with the API server's exact rounding.

Requests, limits and allocatable arrive as quantity strings ("500m", "1.5Gi", "1e3") or as
bare YAML numbers. The scheduler has to turn them into the very integers kube-scheduler uses:
otherwise a pod that fits under Kubernetes would be rejected here, or the reverse. So values
are parsed into an exact ``Fraction`` (never a float) and rounded the way Quantity rounds:

* on parse, a non-zero magnitude is rounded *up* to a whole nano (``0.1n`` is ``1n``), and a
  binary-suffixed magnitude above 2^63-1 is capped there, as Kubernetes does;
* ``MilliValue``/``Value`` round away from zero, which is "up" for every real request.
"""

from __future__ import annotations

import functools
import math
import re
from fractions import Fraction
from typing import Final

from batchsched.model.fields import shown

__all__ = [
    "QuantityError",
    "format_amount",
    "int_value",
    "milli_value",
    "parse_quantity",
    "resource_amount",
]

# The documented grammar, read strictly: sign, then digits with an optional point (".5" and
# "5." allowed), then one of binary suffix, decimal exponent, or decimal suffix. [0-9], not
# \d, so that non-ASCII digits (which int() would happily accept) are rejected. "1E" is the
# exa suffix while "1E3" is an exponent: the alternation tries the exponent first and
# fullmatch() backtracks to the bare suffix when no digits follow.
_QUANTITY_RE: Final = re.compile(
    r"(?P<sign>[+-]?)"
    r"(?P<number>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
    r"(?P<suffix>[eE][+-]?[0-9]+|[KMGTPE]i|[numkMGTPE])?"
)

_BINARY_SUFFIXES: Final[dict[str, int]] = {
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
    "Ei": 2**60,
}

_DECIMAL_SUFFIXES: Final[dict[str, Fraction]] = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}

# Kubernetes allows any int32 exponent, but 10**(2**31) would stall this process on one
# hostile manifest. A thousand decades is far beyond any meaningful resource amount.
_MAX_EXPONENT: Final = 1000
# Digits of the number itself, for the same reason (and int() refuses more than 4300 anyway).
_MAX_DIGITS: Final = 1000

_NANOS_PER_UNIT: Final = 10**9
_MAX_INT64: Final = 2**63 - 1

# Resources whose canonical unit is the byte, so a binary suffix reads best in messages.
_BYTE_RESOURCES: Final = frozenset({"memory", "ephemeral-storage"})
_HUGEPAGES_PREFIX: Final = "hugepages-"

_GRAMMAR_HINT: Final = (
    "expected a number with an optional suffix (Ki Mi Gi Ti Pi Ei, n u m k M G T P E) "
    "or exponent (e3, E-3)"
)


class QuantityError(ValueError):
    """Bad quantity; the message names the field and the bad value.

    It names both so that a user reading a rejected pod's event can find the offending line
    of their manifest without reading scheduler code.
    """

    field: str
    value: object
    why: str

    def __init__(self, field: str, value: object, why: str) -> None:
        super().__init__(f"{field}: invalid quantity {shown(value)}: {why}")
        self.field = field
        self.value = value
        self.why = why

    def __reduce__(self) -> tuple[type[QuantityError], tuple[str, object, str]]:
        """Rebuild from the three parts, so the error survives pickling (process pools)."""
        return (type(self), (self.field, self.value, self.why))


def parse_quantity(value: str | int | float, field: str) -> Fraction:
    """Return the exact value of a quantity, as Kubernetes stores it after parsing.

    YAML hands us ints and floats for unquoted numbers; the API server would see the same
    JSON number text, so a float is parsed from ``str(value)`` (its shortest round-trip form,
    i.e. what the user wrote) rather than from its binary value.
    """
    if isinstance(value, bool):
        raise QuantityError(field, value, "a boolean is not a quantity")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise QuantityError(field, value, "not a finite number")
        return _parse_text(str(value), value, field)
    if isinstance(value, str):
        return _parse_text(value, value, field)
    raise QuantityError(field, value, f"expected a string or number, got {type(value).__name__}")


def milli_value(value: str | int | float, field: str) -> int:
    """Value in thousandths, rounded away from zero, like ``Quantity.MilliValue``.

    Rounding up (for the non-negative amounts that matter) means a pod asking for a sliver of
    CPU is charged a whole millicore instead of fitting for free.
    """
    return _round_away_from_zero(parse_quantity(value, field) * 1000)


def int_value(value: str | int | float, field: str) -> int:
    """Value in whole units, rounded away from zero, like ``Quantity.Value``."""
    return _round_away_from_zero(parse_quantity(value, field))


def resource_amount(resource_name: str, value: str | int | float, field: str) -> int:
    """Canonical integer amount of one resource: millicores for cpu, whole units otherwise.

    Negative amounts are refused here, not later: requests, limits and allocatable cannot be
    negative, and letting one through would silently create free capacity on a node.
    """
    if isinstance(value, str):
        # Manifests repeat a few quantity strings ("100m", "1Gi") across thousands of pods:
        # parse each distinct one once. Errors are rebuilt with this call's field.
        try:
            return _cached_amount(resource_name == "cpu", value)
        except QuantityError as err:
            raise QuantityError(field, value, err.why) from None
    return _amount(resource_name == "cpu", value, field)


def _amount(is_cpu: bool, value: str | int | float, field: str) -> int:
    exact = parse_quantity(value, field)
    if exact < 0:
        raise QuantityError(field, value, "must not be negative")
    return _round_away_from_zero(exact * 1000 if is_cpu else exact)


@functools.lru_cache(maxsize=4096)
def _cached_amount(is_cpu: bool, value: str) -> int:
    return _amount(is_cpu, value, "")


def format_amount(resource_name: str, amount: int) -> str:
    """Human form of a canonical amount, for messages ("1500m", "2", "512Mi").

    Byte-valued resources (memory, ephemeral-storage, hugepages-*) use the largest binary
    suffix that divides exactly, so nothing is rounded in what the user is told.
    """
    if resource_name == "cpu":
        whole, millis = divmod(abs(amount), 1000)
        text = f"{abs(amount)}m" if millis else str(whole)
        return f"-{text}" if amount < 0 else text
    if resource_name in _BYTE_RESOURCES or resource_name.startswith(_HUGEPAGES_PREFIX):
        return _format_bytes(amount)
    return str(amount)


def _parse_text(text: str, original: object, field: str) -> Fraction:
    """Parse one quantity string; ``original`` is what the user gave, for the error."""
    match = _QUANTITY_RE.fullmatch(text)
    if match is None:
        raise QuantityError(field, original, _GRAMMAR_HINT)
    suffix = match["suffix"] or ""
    if len(match["number"]) > _MAX_DIGITS:
        raise QuantityError(field, original, f"more than {_MAX_DIGITS} digits")
    magnitude = _round_up_to_nano(Fraction(match["number"]) * _multiplier(suffix, original, field))
    if suffix in _BINARY_SUFFIXES:
        # Kubernetes caps binary-SI magnitudes at int64 max (and only those).
        magnitude = min(magnitude, Fraction(_MAX_INT64))
    return -magnitude if match["sign"] == "-" else magnitude


def _multiplier(suffix: str, original: object, field: str) -> Fraction:
    """Factor a suffix or exponent stands for."""
    if suffix in _BINARY_SUFFIXES:
        return Fraction(_BINARY_SUFFIXES[suffix])
    if suffix in _DECIMAL_SUFFIXES:
        return _DECIMAL_SUFFIXES[suffix]
    # The regex guarantees e/E, an optional sign, digits. Leading zeros are dropped before
    # int(), which refuses thousands of digits however small their value.
    digits = suffix[1:].lstrip("+-").lstrip("0") or "0"
    if len(digits) > len(str(_MAX_EXPONENT)) or int(digits) > _MAX_EXPONENT:
        raise QuantityError(field, original, f"exponent beyond ±{_MAX_EXPONENT}")
    return Fraction(10) ** (-int(digits) if suffix[1] == "-" else int(digits))


def _round_up_to_nano(magnitude: Fraction) -> Fraction:
    """Round a non-negative magnitude up to a whole nano, as Quantity does on parse."""
    return Fraction(math.ceil(magnitude * _NANOS_PER_UNIT), _NANOS_PER_UNIT)


def _round_away_from_zero(exact: Fraction) -> int:
    """Integer rounding used by ``Quantity.Value``/``MilliValue``."""
    return math.ceil(exact) if exact >= 0 else math.floor(exact)


def _format_bytes(amount: int) -> str:
    """Largest exact binary suffix, else plain bytes."""
    magnitude = abs(amount)
    sign = "-" if amount < 0 else ""
    for suffix, factor in reversed(_BINARY_SUFFIXES.items()):
        if magnitude and magnitude % factor == 0:
            return f"{sign}{magnitude // factor}{suffix}"
    return str(amount)
