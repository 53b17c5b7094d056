"""Reading DeviceClass, ResourceSlice and ResourceClaim objects: what the allocator gets, and
errors that name the object and the field path."""

from __future__ import annotations

import copy
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import pytest

from batchsched.dra.device import Version
from batchsched.dra.objects import (
    ALL,
    EXACT_COUNT,
    POD_CLAIM_NAME_ANNOTATION,
    AllocatedDevice,
    Consumer,
    MatchAttribute,
    OpaqueConfig,
)
from batchsched.dra.parse import parse_device_class, parse_resource_claim, parse_resource_slice
from batchsched.model.errors import InvalidObject
from tests.dra.builders import DRIVER, claim, device_class, exact, gpu, node_slice

# Builders for the shapes tests/dra/builders.py does not make.


def edited(obj: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """A copy of `obj` with the dotted `path` set to `value` (a `[i]` step indexes a list);
    the value None deletes the key."""
    found = copy.deepcopy(obj)
    here: Any = found
    steps = path.replace("[", ".[").split(".")
    for step in steps[:-1]:
        here = here[int(step[1:-1])] if step.startswith("[") else here.setdefault(step, {})
    last = steps[-1]
    if value is None:
        here.pop(last, None)
    elif last.startswith("["):
        here[int(last[1:-1])] = value
    else:
        here[last] = value
    return found


def a_slice(**spec: Any) -> dict[str, Any]:
    """A slice of one plain device with no node set; `spec` adds fields."""
    return {
        "metadata": {"name": "s"},
        "spec": {
            "driver": DRIVER,
            "pool": {"name": "p", "generation": 3, "resourceSliceCount": 2},
            "devices": [{"name": "d0"}],
            **spec,
        },
    }


def device_with(attributes: dict[str, Any] | None = None, **capacity: Any) -> dict[str, Any]:
    slice_ = node_slice("n1", [{"name": "d0", "attributes": attributes or {}}])
    slice_["spec"]["devices"][0]["capacity"] = {k: {"value": v} for k, v in capacity.items()}
    return slice_


POOL_IS_A = {"key": "pool", "operator": "In", "values": ["a"]}
SELECTOR = {"nodeSelectorTerms": [{"matchExpressions": [POOL_IS_A]}]}


def first_available(name: str, *alternatives: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "firstAvailable": list(alternatives)}


NAME_IS_N1 = {"key": "metadata.name", "operator": "In", "values": ["n1"]}


def allocated_claim() -> dict[str, Any]:
    raw = claim("c", exact("gpu", 2))
    raw["status"] = {
        "allocation": {
            "devices": {
                "results": [
                    {"request": "gpu", "driver": DRIVER, "pool": "n1", "device": "gpu-0"},
                    {
                        "request": "gpu",
                        "driver": DRIVER,
                        "pool": "n1",
                        "device": "gpu-1",
                        "adminAccess": True,
                    },
                ]
            },
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [NAME_IS_N1]}]},
        },
        "reservedFor": [{"resource": "pods", "name": "p", "uid": "uid-p"}],
    }
    return raw


# DeviceClass


def test_a_device_class_keeps_its_selectors_in_order_and_its_opaque_config() -> None:
    raw = device_class("gpu", "a == 1", "b == 2")
    raw["spec"]["config"] = [
        {"opaque": {"driver": DRIVER, "parameters": {"b": 1, "a": [2]}}, "requests": ["r"]}
    ]
    found = parse_device_class(raw)
    assert found.name == "gpu"
    assert found.selectors == ("a == 1", "b == 2")
    assert found.config == (OpaqueConfig(DRIVER, '{"a": [2], "b": 1}', ("r",)),)


# ResourceSlice: devices


def test_unqualified_attribute_and_capacity_names_get_the_drivers_domain() -> None:
    found = parse_resource_slice(
        device_with(
            {
                "productName": {"string": "H100"},
                "resource.kubernetes.io/pcieRoot": {"string": "pci0000:00"},
            },
            memory="80Gi",
        )
    )
    (device,) = found.devices
    assert dict(device.attributes) == {
        "gpu.nvidia.com/productName": "H100",
        "resource.kubernetes.io/pcieRoot": "pci0000:00",
    }
    assert dict(device.capacity) == {"gpu.nvidia.com/memory": Fraction(80 * 2**30)}
    assert device.id == "gpu.nvidia.com/n1/d0"
    assert (device.driver, device.pool, device.name) == (DRIVER, "n1", "d0")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"int": 7}, 7),
        ({"int": -3}, -3),
        ({"bool": True}, True),
        ({"bool": False}, False),
        ({"string": "gpu"}, "gpu"),
        ({"version": "9.0.0"}, Version("9.0.0")),
    ],
    ids=[
        "an int attribute is an int",
        "a negative int attribute is an int",
        "a true bool attribute is True",
        "a false bool attribute is False rather than missing",
        "a string attribute is a str",
        "a version attribute is a Version, not a str",
    ],
)
def test_attribute_types(value: dict[str, Any], expected: object) -> None:
    (device,) = parse_resource_slice(device_with({"x": value})).devices
    found = device.attributes["gpu.nvidia.com/x"]
    assert found == expected and type(found) is type(expected)


@pytest.mark.parametrize(
    ("quantity", "expected"),
    [
        ("80Gi", Fraction(80 * 2**30)),
        ("1.5", Fraction(3, 2)),
        ("200m", Fraction(1, 5)),
        ("1k", Fraction(1000)),
        (4, Fraction(4)),
    ],
    ids=[
        "binary suffixes are powers of 1024",
        "decimals are exact",
        "milli is a thousandth",
        "decimal suffixes are powers of 1000",
        "a bare number is a quantity",
    ],
)
def test_capacity_quantities(quantity: object, expected: Fraction) -> None:
    (device,) = parse_resource_slice(device_with(memory=quantity)).devices
    assert device.capacity["gpu.nvidia.com/memory"] == expected


# ResourceSlice: which nodes


@pytest.mark.parametrize(
    ("spec", "node_name", "all_nodes", "selected"),
    [
        ({"nodeName": "n1"}, "n1", False, False),
        ({"allNodes": True}, "", True, False),
        ({"nodeSelector": SELECTOR}, "", False, True),
        ({"nodeName": "n1", "allNodes": False}, "n1", False, False),
    ],
    ids=[
        "a slice with nodeName belongs to that node",
        "a slice with allNodes reaches every node",
        "a slice with a nodeSelector keeps its terms",
        "allNodes false next to nodeName is not a second choice",
    ],
)
def test_which_nodes_a_slice_names(
    spec: dict[str, Any], node_name: str, all_nodes: bool, selected: bool
) -> None:
    found = parse_resource_slice(a_slice(**spec))
    assert (found.node_name, found.all_nodes, bool(found.node_selector)) == (
        node_name,
        all_nodes,
        selected,
    )
    assert (found.pool, found.generation, found.slice_count) == ("p", 3, 2)
    assert len(found.devices) == 1


def test_per_device_node_selection_reaches_no_node_so_its_devices_are_dropped() -> None:
    found = parse_resource_slice(a_slice(perDeviceNodeSelection=True))
    assert found.devices == ()


def test_a_pool_without_a_slice_count_has_one_slice() -> None:
    raw = edited(a_slice(nodeName="n1"), "spec.pool.resourceSliceCount", None)
    assert parse_resource_slice(raw).slice_count == 1


@pytest.mark.parametrize(
    "spec",
    [
        {},
        {"nodeName": "n1", "allNodes": True},
        {"nodeName": "n1", "nodeSelector": SELECTOR},
        {"allNodes": True, "nodeSelector": SELECTOR},
        {"allNodes": True, "perDeviceNodeSelection": True},
        {"nodeName": "n1", "allNodes": True, "nodeSelector": SELECTOR},
    ],
    ids=[
        "a slice that names no node is refused",
        "nodeName with allNodes is refused",
        "nodeName with a nodeSelector is refused",
        "allNodes with a nodeSelector is refused",
        "allNodes with perDeviceNodeSelection is refused",
        "three node choices are refused",
    ],
)
def test_a_slice_must_set_exactly_one_node_choice(spec: dict[str, Any]) -> None:
    with pytest.raises(InvalidObject) as caught:
        parse_resource_slice(a_slice(**spec))
    assert str(caught.value) == (
        "ResourceSlice s: spec: must set exactly one of nodeName, nodeSelector, allNodes "
        "and perDeviceNodeSelection"
    )


# ResourceClaim: requests


def test_an_exactly_request_is_one_choice_named_like_the_request() -> None:
    raw = claim("c", exact("gpu", 2, "gpu.nvidia.com", "device.attributes['x'].y == 1"))
    (request,) = parse_resource_claim(raw).requests
    assert request.name == "gpu" and not request.first_available
    (choice,) = request.choices
    assert (choice.name, choice.device_class, choice.mode, choice.count) == (
        "gpu",
        "gpu.nvidia.com",
        EXACT_COUNT,
        2,
    )
    assert choice.selectors == ("device.attributes['x'].y == 1",)
    assert not choice.admin_access


def test_first_available_alternatives_are_named_request_slash_subrequest_in_order() -> None:
    raw = claim(
        "c",
        first_available(
            "gpu",
            {"name": "big", "deviceClassName": "a", "count": 4},
            {"name": "small", "deviceClassName": "b"},
        ),
    )
    (request,) = parse_resource_claim(raw).requests
    assert request.first_available
    assert [(c.name, c.device_class, c.count) for c in request.choices] == [
        ("gpu/big", "a", 4),
        ("gpu/small", "b", 1),
    ]


def test_allocation_mode_all_has_no_count_and_admin_access_is_read() -> None:
    raw = claim(
        "c",
        {
            "name": "all",
            "exactly": {"deviceClassName": "g", "allocationMode": "All", "adminAccess": True},
        },
    )
    (choice,) = parse_resource_claim(raw).requests[0].choices
    assert (choice.mode, choice.count, choice.admin_access) == (ALL, 0, True)


def test_constraints_and_claim_config_are_read() -> None:
    raw = claim(
        "c",
        exact("a"),
        exact("b"),
        constraints=[
            {"matchAttribute": "resource.kubernetes.io/pcieRoot"},
            {"matchAttribute": "gpu.nvidia.com/productName", "requests": ["a", "b"]},
        ],
    )
    raw["spec"]["devices"]["config"] = [{"opaque": {"driver": DRIVER, "parameters": {"k": 1}}}]
    found = parse_resource_claim(raw)
    assert found.constraints == (
        MatchAttribute("resource.kubernetes.io/pcieRoot"),
        MatchAttribute("gpu.nvidia.com/productName", ("a", "b")),
    )
    assert found.config == (OpaqueConfig(DRIVER, '{"k": 1}'),)


# ResourceClaim: status and metadata


def test_an_allocation_and_reserved_for_are_read_from_status() -> None:
    found = parse_resource_claim(allocated_claim())
    assert found.allocation is not None
    assert found.allocation.devices == (
        AllocatedDevice("gpu", DRIVER, "n1", "gpu-0"),
        AllocatedDevice("gpu", DRIVER, "n1", "gpu-1", admin_access=True),
    )
    assert found.allocation.allows("n1") and not found.allocation.allows("n2")
    assert found.reserved_for == (Consumer("pods", "p", "uid-p"),)
    assert found.reserved_for_pod("uid-p") and not found.reserved_for_pod("uid-q")


def test_an_allocation_without_a_node_selector_allows_every_node() -> None:
    raw = edited(allocated_claim(), "status.allocation.nodeSelector", None)
    found = parse_resource_claim(raw)
    assert found.allocation is not None and found.allocation.allows("anywhere")


def test_a_claim_without_status_has_no_allocation_and_no_consumers() -> None:
    found = parse_resource_claim(claim("c"))
    assert found.allocation is None and found.reserved_for == ()


def test_metadata_gives_key_uid_version_annotation_owner_and_deletion() -> None:
    raw = claim("p-gpu-x", namespace="team", uid="u1")
    raw["metadata"].update(
        {
            "resourceVersion": "42",
            "annotations": {POD_CLAIM_NAME_ANNOTATION: "gpu"},
            "deletionTimestamp": "2024-01-01T00:00:00Z",
            "ownerReferences": [
                {"kind": "Job", "uid": "not-the-controller"},
                {"kind": "Pod", "uid": "uid-pod", "controller": True},
            ],
        }
    )
    found = parse_resource_claim(raw)
    assert (found.key, found.uid, found.resource_version) == ("team/p-gpu-x", "u1", "42")
    assert (found.pod_claim_name, found.owner_uid, found.deleting) == ("gpu", "uid-pod", True)


def test_a_claim_without_a_controller_has_no_owner_and_without_uid_is_keyed_by_name() -> None:
    raw = claim("c")
    del raw["metadata"]["uid"]
    raw["metadata"]["ownerReferences"] = [{"kind": "Pod", "uid": "u", "controller": False}]
    found = parse_resource_claim(raw)
    assert (found.owner_uid, found.uid, found.deleting) == ("", "default/c", False)


# Errors: each names the object and the field path


Reader = Callable[[dict[str, Any]], object]
CLAIM = claim("c", exact("gpu"), namespace="team")


@pytest.mark.parametrize(
    ("read", "raw", "expected"),
    [
        (
            parse_device_class,
            edited(device_class("g"), "spec.selectors[0].cel.expression", ""),
            "DeviceClass g: spec.selectors[0].cel.expression: must not be empty",
        ),
        (
            parse_device_class,
            edited(device_class("g"), "spec.config", {"opaque": {}}),
            "DeviceClass g: spec.config: expected a list",
        ),
        (
            parse_resource_slice,
            edited(a_slice(nodeName="n"), "spec.driver", ""),
            "ResourceSlice s: spec.driver: must not be empty",
        ),
        (
            parse_resource_slice,
            edited(a_slice(nodeName="n"), "spec.devices[0].name", ""),
            "ResourceSlice s: spec.devices[0].name: must not be empty",
        ),
        (
            parse_resource_slice,
            edited(a_slice(nodeName="n"), "spec.pool.generation", "new"),
            "ResourceSlice s: spec.pool.generation: expected an integer",
        ),
        (
            parse_resource_slice,
            edited(a_slice(nodeName="n"), "spec.allNodes", "yes"),
            "ResourceSlice s: spec.allNodes: expected true or false",
        ),
        (
            parse_resource_slice,
            device_with({"x": {"int": 1, "string": "1"}}),
            "ResourceSlice n1-gpu: spec.devices[0].attributes.x: must set exactly one of int, "
            "bool, string and version",
        ),
        (
            parse_resource_slice,
            device_with({"x": {"float": 1.5}}),
            "ResourceSlice n1-gpu: spec.devices[0].attributes.x: unknown attribute type 'float'",
        ),
        (
            parse_resource_slice,
            device_with({"x": {"string": 5}}),
            "ResourceSlice n1-gpu: spec.devices[0].attributes.x.string: expected a string, got 5",
        ),
        (
            parse_resource_slice,
            device_with({"x": {"version": "12.8"}}),
            "ResourceSlice n1-gpu: spec.devices[0].attributes.x.version: '12.8' is not a "
            "semantic version",
        ),
        (
            parse_resource_slice,
            device_with({"x": {"int": True}}),
            "ResourceSlice n1-gpu: spec.devices[0].attributes.x.int: expected an integer",
        ),
        (
            parse_resource_slice,
            device_with({"x": {"bool": "true"}}),
            "ResourceSlice n1-gpu: spec.devices[0].attributes.x.bool: expected true or false",
        ),
        (
            parse_resource_slice,
            device_with(memory="eighty"),
            "ResourceSlice n1-gpu: spec.devices[0].capacity.memory.value: invalid quantity",
        ),
        (
            parse_resource_slice,
            device_with(memory=True),
            "ResourceSlice n1-gpu: spec.devices[0].capacity.memory.value: expected a quantity",
        ),
        (
            parse_resource_slice,
            edited(
                a_slice(nodeSelector=SELECTOR),
                "spec.nodeSelector.nodeSelectorTerms[0]",
                {"matchExpressions": [{"key": "k", "operator": "Near"}]},
            ),
            "ResourceSlice s: spec.nodeSelector.nodeSelectorTerms[0].matchExpressions[0]"
            ".operator: unknown operator 'Near'",
        ),
        (
            parse_resource_claim,
            edited(CLAIM, "spec.devices.requests[0].name", ""),
            "ResourceClaim team/c: spec.devices.requests[0].name: must not be empty",
        ),
        (
            parse_resource_claim,
            edited(CLAIM, "spec.devices.requests[0].firstAvailable", [{"name": "x"}]),
            "ResourceClaim team/c: spec.devices.requests[0]: must set exactly one of exactly "
            "and firstAvailable",
        ),
        (
            parse_resource_claim,
            edited(CLAIM, "spec.devices.requests[0].exactly", None),
            "ResourceClaim team/c: spec.devices.requests[0]: must set exactly one of exactly "
            "and firstAvailable",
        ),
        (
            parse_resource_claim,
            claim("c", first_available("gpu"), namespace="team"),
            "ResourceClaim team/c: spec.devices.requests[0].firstAvailable: must list at least "
            "one alternative",
        ),
        (
            parse_resource_claim,
            claim("c", first_available("gpu", {"deviceClassName": "g"}), namespace="team"),
            "ResourceClaim team/c: spec.devices.requests[0].firstAvailable[0].name: must not "
            "be empty",
        ),
        (
            parse_resource_claim,
            claim(
                "c",
                first_available("gpu", {"name": "a", "deviceClassName": "g"}, {"name": "b"}),
                namespace="team",
            ),
            "ResourceClaim team/c: spec.devices.requests[0].firstAvailable[1].deviceClassName: "
            "must not be empty",
        ),
        (
            parse_resource_claim,
            edited(CLAIM, "spec.devices.requests[0].exactly.allocationMode", "Some"),
            "ResourceClaim team/c: spec.devices.requests[0].exactly.allocationMode: unknown "
            "allocation mode 'Some'",
        ),
        (
            parse_resource_claim,
            edited(CLAIM, "spec.devices.requests[0].exactly.allocationMode", "All"),
            "ResourceClaim team/c: spec.devices.requests[0].exactly.count: must not be set "
            "with allocationMode All",
        ),
        (
            parse_resource_claim,
            edited(CLAIM, "spec.devices.requests[0].exactly.count", 0),
            "ResourceClaim team/c: spec.devices.requests[0].exactly.count: must be at least 1, "
            "got 0",
        ),
        (
            parse_resource_claim,
            claim(
                "c",
                first_available("gpu", {"name": "a", "deviceClassName": "g", "count": -1}),
                namespace="team",
            ),
            "ResourceClaim team/c: spec.devices.requests[0].firstAvailable[0].count: must be at "
            "least 1, got -1",
        ),
        (
            parse_resource_claim,
            edited(CLAIM, "spec.devices.constraints", [{"matchAttribute": "pcieRoot"}]),
            "ResourceClaim team/c: spec.devices.constraints[0].matchAttribute: must be a fully "
            "qualified name (domain/name), got 'pcieRoot'",
        ),
        (
            parse_resource_claim,
            edited(
                CLAIM,
                "spec.devices.constraints",
                [{"matchAttribute": "a/b"}, {"distinctAttribute": "a/b"}],
            ),
            "ResourceClaim team/c: spec.devices.constraints[1].distinctAttribute: is not supported",
        ),
        (
            parse_resource_claim,
            edited(CLAIM, "status.allocation.devices.results", [{"request": "gpu", "pool": []}]),
            "ResourceClaim team/c: status.allocation.devices.results[0].pool: expected a string",
        ),
        (
            parse_resource_claim,
            edited(CLAIM, "status.reservedFor", [{"resource": "pods", "uid": {"x": 1}}]),
            "ResourceClaim team/c: status.reservedFor[0].uid: expected a string",
        ),
        (
            parse_resource_claim,
            edited(CLAIM, "metadata.annotations", {POD_CLAIM_NAME_ANNOTATION: ["gpu"]}),
            f"ResourceClaim team/c: metadata.annotations.{POD_CLAIM_NAME_ANNOTATION}: expected "
            "a string",
        ),
        (
            parse_resource_claim,
            edited(CLAIM, "metadata.ownerReferences", [{"controller": True, "uid": ["u"]}]),
            "ResourceClaim team/c: metadata.ownerReferences[0].uid: expected a string",
        ),
    ],
    ids=[
        "an empty class selector names its index",
        "a class config that is not a list is refused",
        "a slice without a driver is refused",
        "a device without a name names its index",
        "a pool generation that is not a number is refused",
        "allNodes must be a bool",
        "an attribute with two types is refused",
        "an attribute of an unknown type is refused",
        "a string attribute that is not a string is refused, as the API server refuses it",
        "a version attribute that is not a semantic version is refused",
        "an int attribute must not be a bool",
        "a bool attribute must not be a string",
        "a capacity that is not a quantity is refused",
        "a capacity that is a bool is refused",
        "a slice node selector with an unknown operator names the term",
        "a request without a name is refused",
        "a request with both exactly and firstAvailable is refused",
        "a request with neither exactly nor firstAvailable is refused",
        "firstAvailable with no alternative is refused",
        "an alternative without a name is refused",
        "an alternative without a class names its index",
        "an unknown allocation mode is refused",
        "allocationMode All with a count is refused",
        "ExactCount with count zero is refused",
        "an alternative with a negative count is refused",
        "matchAttribute must be qualified",
        "distinctAttribute is not supported",
        "an allocation result with a bad pool names it",
        "a reservedFor entry with a bad uid names it",
        "a pod claim name annotation that is not a string is refused",
        "a controller owner uid that is not a string is refused",
    ],
)
def test_errors_name_the_object_and_the_field(
    read: Reader, raw: dict[str, Any], expected: str
) -> None:
    with pytest.raises(InvalidObject) as caught:
        read(raw)
    assert str(caught.value).startswith(expected), str(caught.value)
    kind, name, rest = expected.split(" ", 2)
    assert (caught.value.kind, caught.value.name) == (kind, name.rstrip(":"))
    assert caught.value.field == rest.split(": ", 1)[0]


def test_gpu_builder_round_trips_through_the_reader() -> None:
    """The builders the other DRA tests use publish what NVIDIA's driver publishes."""
    (device,) = parse_resource_slice(node_slice("n1", [gpu("n1", 3, root="r")])).devices
    assert device.attributes["gpu.nvidia.com/index"] == 3
    assert device.attributes["gpu.nvidia.com/cudaComputeCapability"] == Version("9.0.0")
    assert device.attributes["resource.kubernetes.io/pcieRoot"] == "r"
