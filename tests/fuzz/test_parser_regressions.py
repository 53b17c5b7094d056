"""Every crash the fuzzing found, as its minimal input: each now gets the parser's documented
error, naming the field (or, where the input is advisory, is ignored). The comment on each row
is what the input raised before the fix."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from batchsched.config.documents import parse_duration
from batchsched.config.errors import ConfigError
from batchsched.config.yaml_source import parse_yaml
from batchsched.expected_runtime import InvalidRuntime, expected_runtime
from batchsched.gang.podgroup import parse_pod_group
from batchsched.kube.disruption import parse_disruption_budget
from batchsched.model.errors import InvalidObject
from batchsched.model.node import parse_node
from batchsched.model.pod import PodView, parse_pod
from batchsched.model.priority_class import parse_priority_class
from batchsched.model.quantity import QuantityError, parse_quantity
from batchsched.model.resources import NVIDIA_GPU, Resources
from gpu.discovery import MAX_GPUS_PER_NODE, parse_unhealthy, topology_for
from gpu.nrt import GPU_TOPOLOGY_ANNOTATION, parse_nrt
from gpu.requests import GPU_MILLI_ANNOTATION, InvalidGpuRequest, gpu_request
from queues.config import QuotaConfigError, parse_quota_config


def nested(depth: int) -> object:
    value: object = "x"
    for _ in range(depth):
        value = [value]
    return value


DEEP = nested(3000)  # repr() of it overflows the stack
SPREAD = {
    "maxSkew": 1,
    "topologyKey": "zone",
    "whenUnsatisfiable": "DoNotSchedule",
    "labelSelector": {},
    "matchLabelKeys": [DEEP],
}


@pytest.mark.parametrize(
    ("parse", "raw", "field"),
    [
        # FieldError (not InvalidObject: no object named), raised before the try
        (parse_pod, {"metadata": []}, "metadata"),
        (parse_node, {"metadata": "x"}, "metadata"),
        (parse_priority_class, {"metadata": 1}, "metadata"),
        (parse_pod_group, {"metadata": []}, "metadata"),
        (parse_disruption_budget, {"metadata": ""}, "metadata"),
        # RecursionError from str() of the name
        (parse_pod, {"metadata": {"name": DEEP}}, "metadata.name"),
        (parse_disruption_budget, {"metadata": {"namespace": DEEP}}, "metadata.namespace"),
        # RecursionError from repr() of the bad value in the message
        (parse_pod, {"spec": {"schedulerName": {"a": DEEP}}}, "spec.schedulerName"),
        (parse_pod, {"spec": {"topologySpreadConstraints": [SPREAD]}}, "matchLabelKeys[0]"),
        (parse_node, {"status": {"allocatable": {"cpu": DEEP}}}, "status.allocatable.cpu"),
        (parse_priority_class, {"value": DEEP}, "value"),
        (parse_pod_group, {"spec": {"minMember": DEEP}}, "spec.minMember"),
        (parse_pod_group, {"spec": {"minMember": 1, "minResources": {"cpu": DEEP}}}, "cpu"),
        # ValueError from int(): "²" is a digit to str.isdigit(), "--1" survived lstrip("-")
        (parse_priority_class, {"value": "²"}, "value"),
        (parse_node, {"status": {"images": [{"sizeBytes": "--1"}]}}, "sizeBytes"),
        (parse_disruption_budget, {"status": {"disruptionsAllowed": "9" * 5000}}, "status"),
        # ValueError from int()/Fraction() past 4300 digits
        (parse_node, {"status": {"allocatable": {"cpu": "1e" + "9" * 4400}}}, "cpu"),
        (parse_node, {"status": {"allocatable": {"cpu": "9" * 4400}}}, "cpu"),
        (parse_pod_group, {"spec": {"minMember": 1, "minResources": {"a/b": "9" * 4400}}}, "a/b"),
        # ValueError without a field or object (NodeResourceTopology)
        (parse_nrt, {"metadata": []}, "metadata.name"),
        (parse_nrt, {"metadata": {"name": "n", "annotations": {GPU_TOPOLOGY_ANNOTATION: "{"}}}, ""),
    ],
    ids=[
        "a pod whose metadata is a list",
        "a node whose metadata is a string",
        "a priority class whose metadata is a number",
        "a pod group whose metadata is a list",
        "a disruption budget whose metadata is a string",
        "a pod named by a deeply nested list",
        "a disruption budget in a deeply nested namespace",
        "a pod whose scheduler name is deeply nested",
        "a pod spreading by a deeply nested label key",  # RecursionError from str() of it
        "a node whose cpu is deeply nested",
        "a priority class whose value is deeply nested",
        "a pod group whose minMember is deeply nested",
        "a pod group whose min cpu is deeply nested",
        "a priority class valued at a superscript two",
        "a node image of size minus minus one",
        "a disruption budget allowing a 5000-digit number",
        "a cpu with a 4400-digit exponent",
        "a cpu of 4400 digits",
        "a pod group asking for a 4400-digit amount",
        "a topology object whose metadata is a list",
        "a topology object whose GPU detail is not JSON",
    ],
)
def test_a_malformed_object_is_an_invalid_object_naming_the_field(
    parse: Callable[[Mapping[str, object]], object], raw: dict[str, Any], field: str
) -> None:
    with pytest.raises(InvalidObject) as caught:
        parse(raw)
    assert field in caught.value.field and caught.value.field
    assert len(str(caught.value)) < 2000  # a bad value is shown cut short, never whole


@pytest.mark.parametrize(
    "text",
    ["1e" + "9" * 4400, "9" * 4400, "0." + "0" * 4400 + "1"],
    ids=["an exponent of 4400 digits", "a number of 4400 digits", "a fraction of 4400 digits"],
)
def test_a_quantity_past_the_digit_bounds_is_a_quantity_error(text: str) -> None:
    # ValueError (int() and Fraction() refuse over 4300 digits) before the bounds.
    with pytest.raises(QuantityError, match=r"^f: invalid quantity '[0-9e.]{1,100}\.\.\."):
        parse_quantity(text, "f")


def test_an_exponent_with_thousands_of_leading_zeros_still_reads() -> None:
    # ValueError from int() before: the zeros count as digits.
    assert parse_quantity("1e" + "0" * 4400 + "3", "f") == 1000
    assert parse_quantity("2e0003", "f") == 2000


def with_annotations(annotations: dict[str, str], gpus: int = 0) -> PodView:
    pod = parse_pod({"metadata": {"name": "p", "annotations": annotations}})
    return (
        pod
        if not gpus
        else parse_pod(
            {
                "metadata": {"name": "p", "annotations": annotations},
                "spec": {"containers": [{"resources": {"requests": {NVIDIA_GPU: gpus}}}]},
            }
        )
    )


@pytest.mark.parametrize(
    "value",
    ["²", "9" * 5000, "0" * 5000, "1000", "0"],
    ids=[
        "a superscript two",  # ValueError from int()
        "5000 nines",  # ValueError from int()
        "5000 zeros",  # ValueError from int()
        "a whole GPU in milli",
        "nothing",
    ],
)
def test_a_gpu_share_that_is_not_one_is_an_invalid_gpu_request(value: str) -> None:
    with pytest.raises(InvalidGpuRequest, match=GPU_MILLI_ANNOTATION):
        gpu_request(with_annotations({GPU_MILLI_ANNOTATION: value}))


def test_a_gpu_share_with_leading_zeros_reads() -> None:
    assert gpu_request(with_annotations({GPU_MILLI_ANNOTATION: " 0250 "})).milli == 250


def test_an_expected_runtime_beyond_a_float_is_invalid() -> None:
    # Accepted before as an infinite runtime: float() reads 400 digits as inf.
    with pytest.raises(InvalidRuntime):
        expected_runtime({"batchsched.io/expected-runtime": "9" * 400 + "h"}, None)
    with pytest.raises(ValueError, match="out of range"):
        parse_duration("9" * 400 + "s")


@pytest.mark.parametrize(
    ("value", "indices"),
    [("²,1", {1}), ("9" * 5000, set()), ("0" * 5000 + "7", {7}), ("", set()), ("2, 5", {2, 5})],
    ids=[
        "a superscript two is skipped",  # ValueError from int()
        "5000 nines are skipped",  # ValueError from int()
        "leading zeros are read",
        "an empty annotation marks nothing",
        "indices with spaces are read",
    ],
)
def test_unhealthy_gpu_indices_that_are_not_indices_are_ignored(
    value: str, indices: set[int]
) -> None:
    assert parse_unhealthy(value) == frozenset(indices)


def test_a_node_claiming_a_million_gpus_gets_a_bounded_topology_at_once() -> None:
    # Built a million-GPU flat topology before (a quadratic link matrix: memory and time).
    node = parse_node(
        {
            "metadata": {"name": "n", "annotations": {"batchsched.io/unhealthy-gpus": "²"}},
            "status": {"allocatable": {NVIDIA_GPU: "1M"}},
        }
    )
    start = time.perf_counter()
    assert topology_for(node).gpu_count == MAX_GPUS_PER_NODE
    assert time.perf_counter() - start < 10
    assert node.allocatable == Resources(scalar={NVIDIA_GPU: 10**6})


def test_a_heartbeat_that_is_not_text_is_ignored() -> None:
    # RecursionError from str() of it before; the heartbeat is informative only.
    raw = {"metadata": {"name": "n", "annotations": {"batchsched.io/heartbeat": DEEP}}}
    assert parse_nrt(raw).heartbeat == ""


def test_a_duration_that_is_not_text_is_refused_with_a_short_message() -> None:
    # RecursionError from repr() of it in the message before.
    with pytest.raises(ValueError, match=r"got \[\[\[\[\.\.\.\]\]\]\]$"):
        parse_duration(DEEP)


def test_a_cpu_range_no_kernel_has_is_refused_without_building_it() -> None:
    # Built a set of 10^11 CPU numbers before (memory).
    detail = (
        '{"version":1,"source":"x","driver":"x","model":"x","gpus":[],"links":[],'
        '"numaNodes":[{"id":0,"socket":0,"cpus":"0-99999999999","memoryMiB":0}]}'
    )
    raw = {"metadata": {"name": "n", "annotations": {GPU_TOPOLOGY_ANNOTATION: detail}}}
    with pytest.raises(InvalidObject, match="CPU numbers stop at"):
        parse_nrt(raw)


def laughs(levels: int) -> str:
    lines = ["l0: &l0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 10) + "]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a: " + "[" * 1000, "nested deeper than 100 levels"),  # RecursionError
        ("a: " + "1" * 4400, "cannot read this int"),  # ValueError from int()
        ("a: !!int x", "cannot read this int"),  # ValueError
        ("a: 0x_", "cannot read this int"),  # ValueError
        ("a: !!float x", "cannot read this float"),  # ValueError
        ("a: 2001-02-30", "cannot read this timestamp"),  # ValueError
        ("a: 2001-01-01 00:00:00 +25:00", "cannot read this timestamp"),  # ValueError
        ("a: !!timestamp 2001-02-30x", "cannot read this timestamp"),  # AttributeError
        ("? [a]\n: b", "unhashable key"),  # TypeError
        ("a: &a [*a]", "an alias inside its own anchor"),  # a list that contains itself
        (laughs(9), "aliases expand it past 100000 values"),  # 10^9 values: hours, memory
    ],
    ids=[
        "a thousand nested lists",
        "an integer of 4400 digits",
        "an int tag on a word",
        "a hexadecimal integer without digits",
        "a float tag on a word",
        "the thirtieth of February",
        "a time zone 25 hours off",
        "a timestamp tag on a non-time",
        "a list as a mapping key",
        "a list that contains itself",
        "a billion laughs",
    ],
)
def test_yaml_the_loader_cannot_read_is_a_config_error_at_once(text: str, message: str) -> None:
    start = time.perf_counter()
    with pytest.raises(ConfigError, match=message):
        parse_yaml(text)
    with pytest.raises(QuotaConfigError, match=message):
        parse_quota_config(text)
    assert time.perf_counter() - start < 10


def test_aliases_within_the_bound_still_read() -> None:
    assert parse_yaml("a: &a [1, 2]\nb: *a\n") == [{"a": [1, 2], "b": [1, 2]}]
