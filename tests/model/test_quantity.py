"""Quantity parsing must give the integers kube-scheduler would, or fit decisions diverge."""

from __future__ import annotations

import math
import pickle
from decimal import Decimal
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from batchsched.model.quantity import (
    QuantityError,
    format_amount,
    int_value,
    milli_value,
    parse_quantity,
    resource_amount,
)

FIELD = "spec.containers[0].resources.requests.cpu"
BINARY_FACTORS = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
MAX_INT64 = 2**63 - 1


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("100m", 100),
        ("0.1", 100),
        ("1", 1000),
        ("1.5", 1500),
        ("0.0001", 1),
        ("12e-3", 12),
        ("12E-3", 12),
        (".5", 500),
        ("5.", 5000),
        ("+1", 1000),
        ("2000u", 2),
        ("1n", 1),
        (2, 2000),
        (0.5, 500),
        ("0", 0),
        ("-0.0001", -1),
    ],
    ids=[
        "milli suffix is thousandths",
        "decimal fraction of a core",
        "whole core is a thousand millicores",
        "one and a half cores",
        "a sliver of cpu rounds up to one millicore",
        "lower-case exponent scales down",
        "upper-case exponent scales down",
        "leading point is allowed",
        "trailing point is allowed",
        "explicit plus sign is allowed",
        "micro suffix is millionths",
        "nano suffix rounds up to one millicore",
        "yaml integer is whole cores",
        "yaml float is fractional cores",
        "zero is zero",
        "negative values round away from zero like Quantity.MilliValue",
    ],
)
def test_milli_value(value: str | int | float, expected: int) -> None:
    assert milli_value(value, FIELD) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("1Ki", 1024),
        ("1k", 1000),
        ("1e3", 1000),
        ("1E3", 1000),
        ("500Mi", 500 * 2**20),
        ("1.5Gi", 3 * 2**29),
        ("1n", 1),
        ("1M", 10**6),
        ("1E", 10**18),
        ("2Ei", 2 * 2**60),
        ("16Ei", MAX_INT64),
        ("1e+2", 100),
        ("0.5", 1),
        (1024, 1024),
    ],
    ids=[
        "binary suffix Ki multiplies by 1024",
        "decimal suffix k multiplies by 1000",
        "lower-case exponent scales up",
        "upper-case exponent scales up",
        "binary suffix Mi multiplies by 2**20",
        "fractional binary quantity is exact",
        "a nano rounds up to one whole unit",
        "decimal suffix M is a million",
        "bare E is the exa suffix, not an exponent",
        "binary suffix Ei multiplies by 2**60",
        "binary quantities are capped at int64 max like Kubernetes",
        "exponent may carry a plus sign",
        "half a unit rounds up to one",
        "yaml integer is taken as is",
    ],
)
def test_int_value(value: str | int | float, expected: int) -> None:
    assert int_value(value, "spec.containers[0].resources.requests.memory") == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("-1", Fraction(-1)),
        ("0.1n", Fraction(1, 10**9)),
        ("1e-12", Fraction(1, 10**9)),
        ("-1e-12", Fraction(-1, 10**9)),
        ("0e-12", Fraction(0)),
        ("007", Fraction(7)),
        (1e16, Fraction(10**16)),
        (1e-7, Fraction(1, 10**7)),
        (0.1, Fraction(1, 10)),
    ],
    ids=[
        "a negative quantity parses",
        "sub-nano values round up to one nano as Kubernetes stores them",
        "tiny exponent values round up to one nano",
        "negative sub-nano values round away from zero",
        "zero stays zero under a tiny exponent",
        "leading zeros are allowed",
        "large yaml float is read through its text form with exponent",
        "small yaml float is read through its text form with exponent",
        "yaml float is read as written, not as its binary approximation",
    ],
)
def test_parse_quantity_exact(value: str | int | float, expected: Fraction) -> None:
    assert parse_quantity(value, FIELD) == expected


BAD_VALUES: list[object] = [
    "",
    "1.2.3",
    "abc",
    "1Kb",
    "1 Ki",
    " 1",
    "1\n",
    "Ki",
    "--1",
    "1Ki1",
    "1K",
    "1e",
    "1e1.5",
    ".",
    "-",
    "١",
    "1e99999",
    True,
    None,
    float("nan"),
    float("inf"),
    [1],
]
BAD_IDS = [
    "empty string",
    "two decimal points",
    "letters only",
    "unknown suffix Kb",
    "whitespace inside",
    "leading whitespace",
    "trailing newline",
    "suffix without a number",
    "double sign",
    "trailing digits after a suffix",
    "upper-case K without i is not a suffix",
    "exponent marker without digits",
    "fractional exponent",
    "lone decimal point",
    "lone sign",
    "non-ascii digit",
    "absurd exponent is refused instead of stalling",
    "boolean from yaml",
    "null from yaml",
    "not-a-number float",
    "infinite float",
    "a list",
]


@pytest.mark.parametrize("value", BAD_VALUES, ids=BAD_IDS)
def test_bad_quantity_names_field_and_value(value: object) -> None:
    with pytest.raises(QuantityError) as caught:
        parse_quantity(value, FIELD)  # type: ignore[arg-type]
    message = str(caught.value)
    assert FIELD in message
    assert repr(value) in message
    assert caught.value.field == FIELD
    assert caught.value.value is value


def test_error_message_shape() -> None:
    with pytest.raises(QuantityError, match=r"^spec\.x\.cpu: invalid quantity '12x': "):
        milli_value("12x", "spec.x.cpu")


def test_error_survives_pickling() -> None:
    original = QuantityError("spec.x", "12x", "bad suffix")
    copy = pickle.loads(pickle.dumps(original))
    assert (copy.field, copy.value, copy.why, str(copy)) == (
        original.field,
        original.value,
        original.why,
        str(original),
    )


@pytest.mark.parametrize(
    ("resource", "value", "expected"),
    [
        ("cpu", "250m", 250),
        ("cpu", 1, 1000),
        ("memory", "1Gi", 2**30),
        ("memory", "0.5", 1),
        ("ephemeral-storage", "10G", 10 * 10**9),
        ("pods", "110", 110),
        ("nvidia.com/gpu", 2, 2),
        ("hugepages-2Mi", "1Gi", 2**30),
        ("cpu", "-0", 0),
    ],
    ids=[
        "cpu is counted in millicores",
        "integer cpu is whole cores",
        "memory is counted in bytes",
        "fractional bytes round up",
        "ephemeral storage is counted in bytes",
        "pods is a count",
        "gpus are a count",
        "hugepages are counted in bytes",
        "negative zero is zero, not negative",
    ],
)
def test_resource_amount(resource: str, value: str | int | float, expected: int) -> None:
    assert resource_amount(resource, value, f"requests.{resource}") == expected


@pytest.mark.parametrize(
    "value", ["-1", -1, "-0.0001", -0.5], ids=["string", "int", "sliver", "float"]
)
def test_resource_amount_rejects_negative(value: str | int | float) -> None:
    with pytest.raises(QuantityError, match=r"requests\.cpu: .*must not be negative"):
        resource_amount("cpu", value, "requests.cpu")


@pytest.mark.parametrize(
    ("resource", "amount", "expected"),
    [
        ("cpu", 1500, "1500m"),
        ("cpu", 2000, "2"),
        ("cpu", 0, "0"),
        ("cpu", -500, "-500m"),
        ("memory", 536870912, "512Mi"),
        ("memory", 3 * 2**29, "1536Mi"),
        ("memory", 1000, "1000"),
        ("memory", 0, "0"),
        ("memory", -(2**30), "-1Gi"),
        ("ephemeral-storage", 2**40, "1Ti"),
        ("hugepages-1Gi", 2 * 2**30, "2Gi"),
        ("nvidia.com/gpu", 4, "4"),
        ("pods", 1024, "1024"),
    ],
    ids=[
        "fractional cores show millicores",
        "whole cores show a plain number",
        "zero cpu",
        "negative cpu keeps its sign",
        "memory uses the largest exact binary suffix",
        "memory falls back to a smaller suffix when needed",
        "memory with no exact binary suffix is plain bytes",
        "zero memory",
        "negative memory keeps its sign",
        "ephemeral storage is bytes too",
        "hugepages are bytes too",
        "gpus are a plain count",
        "pods are a plain count, never Ki",
    ],
)
def test_format_amount(resource: str, amount: int, expected: str) -> None:
    assert format_amount(resource, amount) == expected


@given(
    suffix=st.sampled_from(sorted(BINARY_FACTORS)),
    data=st.data(),
)
def test_binary_suffix_multiplies_exactly(suffix: str, data: st.DataObject) -> None:
    factor = BINARY_FACTORS[suffix]
    n = data.draw(st.integers(min_value=0, max_value=MAX_INT64 // factor))
    assert int_value(f"{n}{suffix}", "memory") == n * factor


@given(
    x=st.decimals(min_value=0, max_value=10**12, places=12, allow_nan=False, allow_infinity=False)
)
def test_milli_value_rounds_up(x: Decimal) -> None:
    assert milli_value(str(x), "cpu") == math.ceil(Fraction(x) * 1000)


@given(
    x=st.decimals(min_value=0, max_value=10**12, places=12, allow_nan=False, allow_infinity=False)
)
def test_negative_rounds_symmetrically(x: Decimal) -> None:
    assert milli_value(f"-{x}", "cpu") == -milli_value(str(x), "cpu")


@given(n=st.integers(min_value=0, max_value=MAX_INT64))
def test_format_then_parse_round_trips_memory(n: int) -> None:
    assert resource_amount("memory", format_amount("memory", n), "memory") == n


@given(n=st.integers(min_value=0, max_value=10**15))
def test_format_then_parse_round_trips_cpu(n: int) -> None:
    assert resource_amount("cpu", format_amount("cpu", n), "cpu") == n
