"""Resource vectors and the pod's effective request, which every fit decision rests on."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from batchsched.model.quantity import QuantityError
from batchsched.model.resources import NVIDIA_GPU, Resources, pod_requests

GiB = 2**30
MiB = 2**20


def cpu_mem(milli_cpu: int, memory: int, **scalar: int) -> Resources:
    return Resources(milli_cpu=milli_cpu, memory=memory, scalar=scalar)


def gpus(count: int) -> Resources:
    return Resources(scalar={NVIDIA_GPU: count})


@pytest.mark.parametrize(
    ("mapping", "expected"),
    [
        (None, Resources()),
        ({}, Resources()),
        ({"cpu": "500m", "memory": "1Gi"}, cpu_mem(500, GiB)),
        (
            {"cpu": 2, "ephemeral-storage": "10Gi", "pods": "110"},
            Resources(milli_cpu=2000, ephemeral_storage=10 * GiB, pods=110),
        ),
        (
            {"nvidia.com/gpu": 2, "hugepages-2Mi": "64Mi"},
            Resources(
                scalar={
                    NVIDIA_GPU: 2,
                    "hugepages-2Mi": 64 * MiB,
                }
            ),
        ),
        ({"cpu": "0", "example.com/foo": 0}, Resources()),
    ],
    ids=[
        "missing requests are zero",
        "empty requests are zero",
        "cpu in millicores and memory in bytes",
        "storage and pods get their own fields",
        "extended resources go to scalar",
        "zero entries vanish",
    ],
)
def test_parse(mapping: dict[str, object] | None, expected: Resources) -> None:
    assert Resources.parse(mapping, "spec.containers[0].resources.requests") == expected


@pytest.mark.parametrize(
    ("mapping", "named"),
    [
        ({"cpu": "12x"}, "requests.cpu"),
        ({"memory": "-1Gi"}, "requests.memory"),
        ({"nvidia.com/gpu": True}, "requests.nvidia.com/gpu"),
        ({"memory": None}, "requests.memory"),
        ({"memory": ["1Gi"]}, "requests.memory"),
        ({1: "1"}, "requests"),
        (["cpu"], "requests"),
    ],
    ids=[
        "bad cpu quantity names the cpu field",
        "negative memory names the memory field",
        "boolean gpu count names the gpu field",
        "null value names its field",
        "list value names its field",
        "non-string resource name names the mapping",
        "a list instead of a mapping names the mapping",
    ],
)
def test_parse_errors_name_the_field(mapping: object, named: str) -> None:
    with pytest.raises(QuantityError) as caught:
        Resources.parse(mapping, "requests")  # type: ignore[arg-type]
    assert caught.value.field == named
    assert str(caught.value).startswith(f"{named}: invalid quantity ")


def test_zero_scalar_entries_do_not_break_equality() -> None:
    assert Resources(scalar={NVIDIA_GPU: 0}) == Resources()
    assert hash(Resources(scalar={NVIDIA_GPU: 0})) == hash(Resources())
    assert Resources(scalar={NVIDIA_GPU: 0}).scalar == {}


def test_scalar_is_copied_so_the_caller_cannot_mutate_it() -> None:
    source = {NVIDIA_GPU: 1}
    vector = Resources(scalar=source)
    source[NVIDIA_GPU] = 8
    assert vector.get(NVIDIA_GPU) == 1


def test_standard_names_in_scalar_are_refused() -> None:
    with pytest.raises(ValueError, match="cpu"):
        Resources(scalar={"cpu": 1})


def test_get_names_and_is_zero() -> None:
    vector = Resources(
        milli_cpu=1, memory=2, pods=3, scalar={"z.io/b": 1, NVIDIA_GPU: 4, "a.io/a": 5}
    )
    assert [vector.get(n) for n in ("cpu", "memory", "ephemeral-storage", "pods")] == [1, 2, 0, 3]
    assert vector.get(NVIDIA_GPU) == 4
    assert vector.get("absent.io/thing") == 0
    assert vector.names() == ("cpu", "memory", "pods", "a.io/a", NVIDIA_GPU, "z.io/b")
    assert not vector.is_zero()
    assert Resources().is_zero()


@pytest.mark.parametrize(
    ("left", "right", "total", "difference", "maximum"),
    [
        (
            cpu_mem(500, GiB),
            cpu_mem(250, 2 * GiB),
            cpu_mem(750, 3 * GiB),
            cpu_mem(250, -GiB),
            cpu_mem(500, 2 * GiB),
        ),
        (
            gpus(2),
            cpu_mem(100, 0),
            Resources(milli_cpu=100, scalar={NVIDIA_GPU: 2}),
            Resources(milli_cpu=-100, scalar={NVIDIA_GPU: 2}),
            Resources(milli_cpu=100, scalar={NVIDIA_GPU: 2}),
        ),
        (gpus(2), gpus(2), gpus(4), Resources(), gpus(2)),
        (cpu_mem(-5, 0), Resources(), cpu_mem(-5, 0), cpu_mem(-5, 0), Resources()),
    ],
    ids=[
        "standard resources combine per field",
        "resources missing on one side count as zero",
        "equal amounts subtract to a zero that vanishes",
        "max with zero lifts a negative amount to zero",
    ],
)
def test_arithmetic(
    left: Resources, right: Resources, total: Resources, difference: Resources, maximum: Resources
) -> None:
    assert left + right == total
    assert left - right == difference
    assert left.max_with(right) == maximum


@pytest.mark.parametrize(
    ("request_", "free", "expected"),
    [
        (cpu_mem(500, GiB), cpu_mem(500, GiB), ()),
        (cpu_mem(501, GiB), cpu_mem(500, GiB), ("cpu",)),
        (
            Resources(milli_cpu=1, memory=1, pods=1, scalar={NVIDIA_GPU: 1, "a.io/x": 1}),
            Resources(),
            ("cpu", "memory", "pods", "a.io/x", NVIDIA_GPU),
        ),
        (cpu_mem(100, 0), cpu_mem(200, -GiB), ()),
        (gpus(1), cpu_mem(1000, GiB), (NVIDIA_GPU,)),
    ],
    ids=[
        "an exact fit is sufficient",
        "one millicore too many is insufficient",
        "every shortfall is reported in names order",
        "an over-committed resource the pod does not request is no obstacle",
        "a resource the node lacks entirely counts as zero free",
    ],
)
def test_insufficient(request_: Resources, free: Resources, expected: tuple[str, ...]) -> None:
    assert request_.insufficient(free) == expected


def test_to_dict() -> None:
    vector = Resources(milli_cpu=1500, memory=512 * MiB, scalar={NVIDIA_GPU: 2})
    assert vector.to_dict() == {"cpu": "1500m", "memory": "512Mi", NVIDIA_GPU: "2"}


@pytest.mark.parametrize(
    ("containers", "init_containers", "overhead", "expected"),
    [
        ([cpu_mem(100, MiB), cpu_mem(200, 2 * MiB)], [], Resources(), cpu_mem(300, 3 * MiB)),
        ([], [], Resources(), Resources()),
        (
            [cpu_mem(100, MiB), cpu_mem(200, 2 * MiB)],
            [(cpu_mem(1000, MiB), False), (cpu_mem(50, 10 * MiB), False)],
            Resources(),
            cpu_mem(1000, 10 * MiB),
        ),
        (
            [cpu_mem(100, MiB)],
            [(cpu_mem(50, MiB), True)],
            Resources(),
            cpu_mem(150, 2 * MiB),
        ),
        (
            [cpu_mem(100, MiB)],
            [(cpu_mem(50, MiB), True), (cpu_mem(500, MiB), False)],
            Resources(),
            cpu_mem(550, 2 * MiB),
        ),
        (
            [cpu_mem(100, MiB)],
            [(cpu_mem(500, MiB), False), (cpu_mem(50, MiB), True)],
            Resources(),
            cpu_mem(500, 2 * MiB),
        ),
        (
            [cpu_mem(10, 0)],
            [(cpu_mem(100, 0), True), (cpu_mem(200, 0), True), (cpu_mem(250, 0), False)],
            Resources(),
            cpu_mem(550, 0),
        ),
        (
            [Resources()],
            [(cpu_mem(300, 0), True), (cpu_mem(100, 0), True)],
            Resources(),
            cpu_mem(400, 0),
        ),
        (
            [cpu_mem(100, MiB)],
            [(cpu_mem(1000, 0), False)],
            cpu_mem(250, 120 * MiB),
            cpu_mem(1250, 121 * MiB),
        ),
        (
            [gpus(1)],
            [(gpus(4), False)],
            Resources(),
            gpus(4),
        ),
    ],
    ids=[
        "app containers sum",
        "a pod with no containers requests nothing",
        "a larger init container wins per resource",
        "a sidecar adds to the steady state",
        "an init container after a sidecar counts the sidecar",
        "an init container before a sidecar does not count it",
        "sidecars accumulate for later init containers",
        "a sidecar's own init phase counts earlier sidecars",
        "overhead is added after the max",
        "extended resources follow the same max rule",
    ],
)
def test_pod_requests(
    containers: list[Resources],
    init_containers: list[tuple[Resources, bool]],
    overhead: Resources,
    expected: Resources,
) -> None:
    assert pod_requests(containers, init_containers, overhead) == expected


amounts = st.integers(min_value=-(2**70), max_value=2**70)
resource_vectors = st.builds(
    Resources,
    milli_cpu=amounts,
    memory=amounts,
    ephemeral_storage=amounts,
    pods=amounts,
    scalar=st.dictionaries(
        st.sampled_from([NVIDIA_GPU, "hugepages-2Mi", "example.com/foo"]), amounts
    ),
)


@given(a=resource_vectors, b=resource_vectors)
def test_add_then_subtract_is_identity(a: Resources, b: Resources) -> None:
    assert (a + b) - b == a


@given(a=resource_vectors, b=resource_vectors)
def test_max_with_dominates_both(a: Resources, b: Resources) -> None:
    top = a.max_with(b)
    assert top == b.max_with(a)
    assert a.insufficient(top) == ()
    assert b.insufficient(top) == ()
    for name in a.names() + b.names():
        assert top.get(name) == max(a.get(name), b.get(name))


def test_a_request_parsed_before_does_not_make_a_bad_one_look_alike_acceptable() -> None:
    """Parsed vectors are shared between pods asking alike (a cache keyed by the text);
    1 == True in Python, so a boolean must still be refused after "1" was read."""
    assert Resources.parse({"cpu": 1}, "r").milli_cpu == 1000
    assert Resources.parse({"cpu": "1", "nvidia.com/gpu": "2"}, "r").scalar == {NVIDIA_GPU: 2}
    assert Resources.parse({"cpu": "1", "nvidia.com/gpu": "2"}, "r").scalar == {NVIDIA_GPU: 2}
    with pytest.raises(QuantityError):
        Resources.parse({"cpu": True}, "r")
    with pytest.raises(QuantityError):
        Resources.parse({"cpu": 1, "nvidia.com/gpu": "x"}, "r")


def test_a_vector_with_only_negative_or_scalar_amounts_is_not_zero() -> None:
    assert Resources().is_zero()
    assert not Resources(milli_cpu=-1).is_zero()
    assert not Resources(scalar={"nvidia.com/gpu": 1}).is_zero()
    assert Resources(scalar={"nvidia.com/gpu": 0}).is_zero()
