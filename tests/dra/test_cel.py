"""CEL device selectors in Kubernetes 1.34's environment, on NVIDIA-like devices."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from batchsched.dra.cel import MAX_EXPRESSION_LENGTH, compile_selector
from batchsched.dra.cel_values import CelError, CelEvalError, parse_quantity, parse_semver
from batchsched.dra.device import AttributeValue, Device, Version

GI = 2**30


def nvidia_gpu(
    name: str = "gpu-0",
    product: str = "NVIDIA H100 80GB HBM3",
    architecture: str = "Hopper",
    compute: str = "9.0.0",
    index: int = 0,
    memory: int = 80 * GI,
    **extra: AttributeValue,
) -> Device:
    """A GPU as NVIDIA's DRA driver publishes it, names qualified as a slice's are."""
    attributes: dict[str, AttributeValue] = {
        "gpu.nvidia.com/productName": product,
        "gpu.nvidia.com/architecture": architecture,
        "gpu.nvidia.com/cudaComputeCapability": Version(compute),
        "gpu.nvidia.com/uuid": f"GPU-{name}",
        "gpu.nvidia.com/index": index,
        "gpu.nvidia.com/mig": False,
        "resource.kubernetes.io/pcieRoot": "pci0000:00",
        **extra,
    }
    memory_name = {"gpu.nvidia.com/memory": Fraction(memory)}
    return Device("gpu.nvidia.com", "node-a", name, attributes, memory_name)


H100 = nvidia_gpu()
A100 = nvidia_gpu("gpu-1", "NVIDIA A100-SXM4-40GB", "Ampere", "8.0.0", index=5, memory=40 * GI)
NVIDIA = 'device.attributes["gpu.nvidia.com"]'
MEMORY = 'device.capacity["gpu.nvidia.com"].memory'


@pytest.mark.parametrize(
    ("expression", "on_h100", "on_a100"),
    [
        ('device.driver == "gpu.nvidia.com"', True, True),
        ('device.driver == "other.example.com"', False, False),
        (f'{NVIDIA}.productName.startsWith("NVIDIA H100")', True, False),
        (f'{NVIDIA}["productName"].endsWith("80GB HBM3")', True, False),
        (f'{NVIDIA}.productName.contains("A100")', False, True),
        (f'{NVIDIA}.architecture.matches("^(Hopper|Blackwell)$")', True, False),
        (f"{NVIDIA}.index < 4 && !{NVIDIA}.mig", True, False),
        ('device.attributes["resource.kubernetes.io"].pcieRoot == "pci0000:00"', True, True),
        ('"gpu.nvidia.com" in device.attributes', True, True),
        ('"other.example.com" in device.attributes', False, False),
        (f"has({NVIDIA}.uuid)", True, True),
        (f"has({NVIDIA}.nvlinkDomain)", False, False),
        ('has(device.attributes["other.example.com"].uuid)', False, False),
        (f"has({NVIDIA}.uuid) && has({NVIDIA}.index)", True, True),
        (f'!has({NVIDIA}.nvlinkDomain) || {NVIDIA}.nvlinkDomain == "a"', True, True),
        (
            f"has({NVIDIA}.nvlinkDomain) ? {NVIDIA}.nvlinkDomain == 'a' : {NVIDIA}.index == 0",
            True,
            False,
        ),
        ('size(device.attributes["other.example.com"]) == 0', True, True),
        (f'{MEMORY}.compareTo(quantity("40Gi")) >= 0', True, True),
        (f'{MEMORY}.compareTo(quantity("40Gi")) > 0', True, False),
        (f'{MEMORY}.isGreaterThan(quantity("50G"))', True, False),
        (f'{MEMORY}.isLessThan(quantity("80Gi"))', False, True),
        (f'{MEMORY} == quantity("80Gi")', True, False),
        (f'{MEMORY} == quantity("81920Mi")', True, False),
        (f'{MEMORY}.sub(quantity("40Gi")).sign() == 1', True, False),
        (f"{MEMORY}.add(1).isInteger() && {MEMORY}.asInteger() > 40000000000", True, True),
        (f'{NVIDIA}.cudaComputeCapability.isGreaterThan(semver("8.0.0"))', True, False),
        (f'{NVIDIA}.cudaComputeCapability.compareTo(semver("8.0.0")) >= 0', True, True),
        (f'{NVIDIA}.cudaComputeCapability == semver("9.0.0+build.1")', True, False),
        (f"{NVIDIA}.cudaComputeCapability.major() == 9", True, False),
        (f'{NVIDIA}.cudaComputeCapability.isLessThan(semver("v9.1", true))', True, True),
        (f'cel.bind(gpu, {NVIDIA}, gpu.architecture == "Hopper" && gpu.index == 0)', True, False),
        (f"[0, 1, 2, 3].exists(i, i == {NVIDIA}.index)", True, False),
        (f'{NVIDIA}.index == "0"', False, False),
        (f"{NVIDIA}.index == 0.0 && {NVIDIA}.index != 0u + 1u", True, False),
        (f"{NVIDIA}.mig == 0", False, False),
        (f"{MEMORY} != 85899345920", True, True),
        (f'{NVIDIA}.index == 0 || {NVIDIA}.nvlinkDomain == "a"', True, None),
    ],
    ids=[
        "the driver is the one asked for",
        "a device of another driver does not match",
        "the product name starts with the one asked for",
        "an attribute read with brackets is the same attribute",
        "contains finds the product within the name",
        "matches takes a regular expression",
        "integer and bool attributes compare",
        "a standard attribute lives in its own domain",
        "in sees the driver's domain",
        "in does not see a domain the device lacks",
        "has sees an attribute the device publishes",
        "has does not see one it does not",
        "has does not fail on a domain the device lacks",
        "has combines with and",
        "not has guards an attribute the device lacks",
        "has chooses a branch",
        "an unknown domain reads as an empty map",
        "memory at least 40Gi",
        "memory more than 40Gi",
        "isGreaterThan compares quantities across decimal and binary suffixes",
        "isLessThan is strict",
        "quantities are equal by amount",
        "80Gi equals 81920Mi",
        "sub and sign work on quantities",
        "add takes an integer and asInteger gives one",
        "compute capability newer than 8.0",
        "compareTo on versions",
        "versions are equal without their build metadata",
        "a version's major number",
        "semver normalizes a short version when asked",
        "cel.bind names a domain once",
        "a macro over a list reaches the device",
        "an int does not equal a string, as in kube, where celpy says no such overload",
        "numbers are equal across int, uint and double",
        "a bool does not equal an int",
        "a quantity does not equal an int",
        "an or that is already true does not need its failing side",
    ],
)
def test_selector_verdicts(expression: str, on_h100: bool, on_a100: bool | None) -> None:
    selector = compile_selector(expression)
    assert selector.matches(H100) is on_h100
    if on_a100 is None:
        with pytest.raises(CelEvalError):
            selector.matches(A100)
    else:
        assert selector.matches(A100) is on_a100


@pytest.mark.parametrize(
    ("expression", "reason"),
    [
        (f"{NVIDIA}.nvlinkDomain == 1", "no such member in mapping: 'nvlinkDomain'"),
        ('device.attributes["other.example.com"].uuid == "x"', "no such member"),
        ("device.driver", "must evaluate to bool, not string"),
        (f"{NVIDIA}.index", "must evaluate to bool, not int"),
        (f"{NVIDIA}.index / 0 == 1", "divide by zero"),
        (f'{NVIDIA}.productName.compareTo(semver("1.0.0")) == 0', "compareTo(string, semver)"),
        (f'{MEMORY} > quantity("1")', "not supported between instances of 'Quantity'"),
        (f'{NVIDIA}.cudaComputeCapability == "9.0.0"', "no such overload: _==_(semver, string)"),
        ('quantity("200K") == quantity("1")', "quantity '200K': quantities must match"),
        ('semver("9.0") == semver("9.0.0")', "'9.0' is not a semantic version"),
        ('quantity("1.5").asInteger() == 1', "cannot convert quantity 1.5 to an integer"),
    ],
    ids=[
        "an attribute the device lacks is an error, not a non-match",
        "an id in a domain the device lacks is an error too",
        "a selector that is a string",
        "a selector that is an integer",
        "division by zero",
        "a method on the wrong type",
        "quantities have no < or >, only compareTo",
        "a version does not equal a string",
        "a quantity kube does not parse",
        "semver without normalization wants three numbers",
        "asInteger of a fraction",
    ],
)
def test_evaluation_errors_name_the_device_and_why(expression: str, reason: str) -> None:
    with pytest.raises(CelEvalError) as raised:
        compile_selector(expression).matches(H100)
    assert f"device gpu.nvidia.com/node-a/gpu-0: CEL expression {expression!r}" in str(raised.value)
    assert reason in str(raised.value)


@pytest.mark.parametrize(
    ("expression", "reason"),
    [
        ("device.driver ==", "Unexpected token"),
        ('device.driver == "a', "No terminal matches"),
        ("gpu.index == 0", "undeclared reference to 'gpu'"),
        ("device.allowMultipleAllocations", "undefined field 'allowMultipleAllocations'"),
        ('device["driver"] == "a" && device.pool == "a"', "undefined field 'pool'"),
        (f'{NVIDIA}.productName.lowerAscii() == "a"', "undeclared function 'lowerAscii'"),
        ('lowerAscii("A") == "a"', "undeclared function 'lowerAscii'"),
        ("cel.bind(1, 2, true)", "cel.bind(name, init, expression)"),
        ("x == " + "1" * MAX_EXPRESSION_LENGTH, f"over {MAX_EXPRESSION_LENGTH}"),
    ],
    ids=[
        "a syntax error",
        "an unterminated string",
        "an undeclared variable",
        "allowMultipleAllocations needs the alpha DRAConsumableCapacity gate in 1.34",
        "a device field that does not exist",
        "the strings extension is not supported",
        "nor as a function",
        "cel.bind binds a name",
        "an expression longer than kube allows",
    ],
)
def test_compile_errors_name_the_expression_and_why(expression: str, reason: str) -> None:
    with pytest.raises(CelError) as raised:
        compile_selector(expression)
    assert reason in str(raised.value)
    assert not isinstance(raised.value, CelEvalError)


def test_a_selector_is_compiled_once_per_expression() -> None:
    first = compile_selector('device.driver == "gpu.nvidia.com"')
    assert compile_selector('device.driver == "gpu.nvidia.com"') is first
    assert first == compile_selector.__wrapped__('device.driver == "gpu.nvidia.com"')
    assert hash(first) == hash(compile_selector.__wrapped__('device.driver == "gpu.nvidia.com"'))
    assert compile_selector('device.driver != "gpu.nvidia.com"') != first


def test_unqualified_names_belong_to_the_driver() -> None:
    device = Device("gpu.nvidia.com", "node-a", "gpu-0", {"index": 3}, {"memory": Fraction(GI)})
    assert compile_selector(f'{NVIDIA}.index == 3 && {MEMORY} == quantity("1Gi")').matches(device)


def test_devices_with_the_same_id_are_not_confused() -> None:
    selector = compile_selector(f"{NVIDIA}.index == 0")
    before, after = nvidia_gpu(index=0), nvidia_gpu(index=1)  # the slice changed
    assert before.id == after.id
    assert [selector.matches(before), selector.matches(after), selector.matches(before)] == [
        True,
        False,
        True,
    ]


def test_a_version_attribute_that_does_not_parse_fails_every_selector() -> None:
    device = nvidia_gpu(**{"gpu.nvidia.com/driverVersion": Version("550.54")})
    with pytest.raises(CelEvalError, match=r"attribute gpu\.nvidia\.com/driverVersion: '550\.54'"):
        compile_selector('device.driver == "gpu.nvidia.com"').matches(device)


@pytest.mark.parametrize(
    ("text", "amount"),
    [
        ("80Gi", Fraction(80 * GI)),
        ("1.5", Fraction(3, 2)),
        ("200m", Fraction(1, 5)),
        ("1e3", Fraction(1000)),
        ("2E-3", Fraction(2, 1000)),
        ("-1k", Fraction(-1000)),
        ("+.5Ki", Fraction(512)),
        ("3E", Fraction(3 * 10**18)),
        ("2Ei", Fraction(2 * 2**60)),
        ("1n", Fraction(1, 10**9)),
    ],
    ids=[
        "binary suffix",
        "a decimal fraction",
        "milli",
        "an exponent",
        "a negative exponent, upper case",
        "a negative amount",
        "a leading plus and no integer part",
        "E alone is exa, not an exponent",
        "Ei is exbi",
        "nano",
    ],
)
def test_quantities_parse_as_kube_does(text: str, amount: Fraction) -> None:
    assert parse_quantity(text) == amount


@pytest.mark.parametrize("text", ["200K", "1,5", "Mi", "", "1e", "1Gib", "1 Gi", "0x10"])
def test_quantities_kube_refuses(text: str) -> None:
    with pytest.raises(ValueError, match="quantities must match"):
        parse_quantity(text)


AMOUNTS = st.integers(-(10**6), 10**6)


@given(AMOUNTS, AMOUNTS, st.sampled_from(["", "m", "Ki", "G", "e3"]))
def test_quantity_compare_to_agrees_with_the_amounts(a: int, b: int, suffix: str) -> None:
    selector = compile_selector(
        f'quantity("{a}{suffix}").compareTo(quantity("{b}{suffix}")) == {(a > b) - (a < b)}'
    )
    assert selector.matches(H100)


def test_versions_order_as_semver_org() -> None:
    ordered = [
        "1.0.0-alpha",
        "1.0.0-alpha.1",
        "1.0.0-alpha.beta",
        "1.0.0-beta",
        "1.0.0-beta.2",
        "1.0.0-beta.11",
        "1.0.0-rc.1",
        "1.0.0",
        "1.0.1",
        "1.10.0",
        "2.0.0",
    ]
    keys = [parse_semver(v).key for v in ordered]
    assert keys == sorted(keys)
    assert len(set(keys)) == len(keys)


@pytest.mark.parametrize("text", ["01.0.0", "1.0", "v1.0.0", "1.0.0-01", "1.0.0-", "1.0.0+"])
def test_versions_semver_refuses(text: str) -> None:
    with pytest.raises(ValueError, match="not a semantic version"):
        parse_semver(text)


@pytest.mark.parametrize(
    ("text", "normalized"),
    [("v1.2", "1.2.0"), ("01.01.01", "1.1.1"), ("3", "3.0.0"), ("v1.0.0-rc.1", "1.0.0-rc.1")],
)
def test_normalize_drops_a_v_and_leading_zeros_and_fills_the_rest(
    text: str, normalized: str
) -> None:
    assert parse_semver(text, normalize=True).key == parse_semver(normalized).key
