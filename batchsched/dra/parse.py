"""Reading DeviceClass, ResourceSlice and ResourceClaim objects (resource.k8s.io/v1).

Each reader raises InvalidObject naming the object, the field path and what is wrong, as the
other readers of the model do. What the API server would have refused is refused here too;
what the scheduler does not need (device taints, counters) is not read.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from fractions import Fraction
from typing import TypeVar

from batchsched.dra.cel_values import parse_semver
from batchsched.dra.device import AttributeValue, Device, Version, qualified
from batchsched.dra.objects import (
    ALL,
    ALLOCATION_MODES,
    EXACT_COUNT,
    POD_CLAIM_NAME_ANNOTATION,
    AllocatedDevice,
    Allocation,
    Choice,
    Consumer,
    DeviceClass,
    DeviceRequest,
    MatchAttribute,
    OpaqueConfig,
    ResourceClaim,
    ResourceSlice,
)
from batchsched.model.errors import InvalidObject
from batchsched.model.fields import (
    FieldError,
    as_bool,
    as_int,
    as_list,
    as_map,
    as_str,
    metadata,
    object_name,
    shown,
)
from batchsched.model.pod_spec import node_selector_term
from batchsched.model.quantity import QuantityError, parse_quantity
from batchsched.model.selectors import NodeSelectorTerm

T = TypeVar("T")


def _guarded(kind: str, obj: Mapping[str, object], read: Callable[[], T]) -> T:
    namespace, name = object_name(obj)
    shown_name = name if kind != "ResourceClaim" else f"{namespace}/{name}"
    try:
        return read()
    except FieldError as err:
        raise InvalidObject(kind, shown_name, err.field, err.message) from err
    except QuantityError as err:
        message = f"invalid quantity {shown(err.value)}: {err.why}"
        raise InvalidObject(kind, shown_name, err.field, message) from err


def parse_device_class(obj: Mapping[str, object]) -> DeviceClass:
    def read() -> DeviceClass:
        _, _, name = metadata(obj)
        spec = as_map(obj.get("spec"), "spec")
        return DeviceClass(
            name=name,
            selectors=_selectors(spec.get("selectors"), "spec.selectors"),
            config=_configs(spec.get("config"), "spec.config"),
        )

    return _guarded("DeviceClass", obj, read)


def parse_resource_slice(obj: Mapping[str, object]) -> ResourceSlice:
    def read() -> ResourceSlice:
        _, _, name = metadata(obj)
        spec = as_map(obj.get("spec"), "spec")
        driver = as_str(spec.get("driver"), "spec.driver")
        if not driver:
            raise FieldError("spec.driver", "must not be empty")
        pool = as_map(spec.get("pool"), "spec.pool")
        pool_name = as_str(pool.get("name"), "spec.pool.name")
        node_name = as_str(spec.get("nodeName"), "spec.nodeName")
        all_nodes = as_bool(spec.get("allNodes"), "spec.allNodes")
        terms = _node_selector(spec.get("nodeSelector"), "spec.nodeSelector")
        per_device = as_bool(spec.get("perDeviceNodeSelection"), "spec.perDeviceNodeSelection")
        if (bool(node_name) + all_nodes + bool(terms) + per_device) != 1:
            raise FieldError(
                "spec",
                "must set exactly one of nodeName, nodeSelector, allNodes and "
                "perDeviceNodeSelection",
            )
        devices = tuple(
            _device(raw, f"spec.devices[{i}]", driver, pool_name)
            for i, raw in enumerate(as_list(spec.get("devices"), "spec.devices"))
        )
        return ResourceSlice(
            name=name,
            driver=driver,
            pool=pool_name,
            generation=as_int(pool.get("generation"), "spec.pool.generation"),
            slice_count=as_int(pool.get("resourceSliceCount"), "spec.pool.resourceSliceCount", 1),
            node_name=node_name,
            all_nodes=all_nodes,
            node_selector=terms,
            # Per-device node selection (an alpha feature) reaches no node here: see its docs.
            devices=() if per_device else devices,
        )

    return _guarded("ResourceSlice", obj, read)


def _device(value: object, field: str, driver: str, pool: str) -> Device:
    raw = as_map(value, field)
    name = as_str(raw.get("name"), f"{field}.name")
    if not name:
        raise FieldError(f"{field}.name", "must not be empty")
    attributes: dict[str, AttributeValue] = {}
    for key, item in as_map(raw.get("attributes"), f"{field}.attributes").items():
        attributes[qualified(key, driver)] = _attribute(item, f"{field}.attributes.{key}")
    capacity: dict[str, Fraction] = {}
    for key, item in as_map(raw.get("capacity"), f"{field}.capacity").items():
        where = f"{field}.capacity.{key}.value"
        amount = as_map(item, f"{field}.capacity.{key}").get("value")
        if not isinstance(amount, str | int | float) or isinstance(amount, bool):
            raise FieldError(where, f"expected a quantity, got {shown(amount)}")
        capacity[qualified(key, driver)] = parse_quantity(amount, where)
    return Device(driver, pool, name, attributes, capacity)


def _attribute(value: object, field: str) -> AttributeValue:
    raw = as_map(value, field)
    if len(raw) != 1:
        raise FieldError(field, "must set exactly one of int, bool, string and version")
    kind, item = next(iter(raw.items()))
    if kind == "int":
        return as_int(item, f"{field}.int")
    if kind == "bool":
        return as_bool(item, f"{field}.bool")
    if kind == "string":
        if not isinstance(item, str):
            raise FieldError(f"{field}.string", f"expected a string, got {shown(item)}")
        return item
    if kind == "version":
        if not isinstance(item, str):
            raise FieldError(f"{field}.version", f"expected a version, got {shown(item)}")
        try:
            parse_semver(item)
        except ValueError as err:  # the API server refuses it too; CEL would fail on it
            raise FieldError(f"{field}.version", str(err)) from err
        return Version(item)
    raise FieldError(field, f"unknown attribute type {kind!r}")


def parse_resource_claim(obj: Mapping[str, object]) -> ResourceClaim:
    def read() -> ResourceClaim:
        meta, namespace, name = metadata(obj)
        spec = as_map(obj.get("spec"), "spec")
        devices = as_map(spec.get("devices"), "spec.devices")
        requests = tuple(
            _request(raw, f"spec.devices.requests[{i}]")
            for i, raw in enumerate(as_list(devices.get("requests"), "spec.devices.requests"))
        )
        annotations = as_map(meta.get("annotations"), "metadata.annotations")
        return ResourceClaim(
            namespace=namespace,
            name=name,
            uid=as_str(meta.get("uid"), "metadata.uid") or f"{namespace}/{name}",
            resource_version=as_str(meta.get("resourceVersion"), "metadata.resourceVersion"),
            requests=requests,
            constraints=_constraints(devices.get("constraints"), "spec.devices.constraints"),
            config=_configs(devices.get("config"), "spec.devices.config"),
            allocation=_allocation(obj),
            reserved_for=_reserved_for(obj),
            deleting=meta.get("deletionTimestamp") is not None,
            pod_claim_name=as_str(
                annotations.get(POD_CLAIM_NAME_ANNOTATION),
                f"metadata.annotations.{POD_CLAIM_NAME_ANNOTATION}",
            ),
            owner_uid=_controller_uid(meta),
        )

    return _guarded("ResourceClaim", obj, read)


def _request(value: object, field: str) -> DeviceRequest:
    raw = as_map(value, field)
    name = as_str(raw.get("name"), f"{field}.name")
    if not name:
        raise FieldError(f"{field}.name", "must not be empty")
    exactly, alternatives = raw.get("exactly"), raw.get("firstAvailable")
    if (exactly is None) == (alternatives is None):
        raise FieldError(field, "must set exactly one of exactly and firstAvailable")
    if exactly is not None:
        return DeviceRequest(name, (_choice(exactly, f"{field}.exactly", name),))
    choices = []
    for i, item in enumerate(as_list(alternatives, f"{field}.firstAvailable")):
        where = f"{field}.firstAvailable[{i}]"
        sub = as_str(as_map(item, where).get("name"), f"{where}.name")
        if not sub:
            raise FieldError(f"{where}.name", "must not be empty")
        choices.append(_choice(item, where, f"{name}/{sub}"))
    if not choices:
        raise FieldError(f"{field}.firstAvailable", "must list at least one alternative")
    return DeviceRequest(name, tuple(choices), first_available=True)


def _choice(value: object, field: str, name: str) -> Choice:
    raw = as_map(value, field)
    device_class = as_str(raw.get("deviceClassName"), f"{field}.deviceClassName")
    if not device_class:
        raise FieldError(f"{field}.deviceClassName", "must not be empty")
    mode = as_str(raw.get("allocationMode"), f"{field}.allocationMode", EXACT_COUNT)
    if mode not in ALLOCATION_MODES:
        raise FieldError(f"{field}.allocationMode", f"unknown allocation mode {mode!r}")
    count = as_int(raw.get("count"), f"{field}.count", 1 if mode == EXACT_COUNT else 0)
    if mode == EXACT_COUNT and count < 1:
        raise FieldError(f"{field}.count", f"must be at least 1, got {count}")
    if mode == ALL and raw.get("count") is not None:
        raise FieldError(f"{field}.count", "must not be set with allocationMode All")
    return Choice(
        name=name,
        device_class=device_class,
        selectors=_selectors(raw.get("selectors"), f"{field}.selectors"),
        mode=mode,
        count=count,
        admin_access=as_bool(raw.get("adminAccess"), f"{field}.adminAccess"),
    )


def _selectors(value: object, field: str) -> tuple[str, ...]:
    found = []
    for i, raw in enumerate(as_list(value, field)):
        cel = as_map(as_map(raw, f"{field}[{i}]").get("cel"), f"{field}[{i}].cel")
        expression = as_str(cel.get("expression"), f"{field}[{i}].cel.expression")
        if not expression:
            raise FieldError(f"{field}[{i}].cel.expression", "must not be empty")
        found.append(expression)
    return tuple(found)


def _constraints(value: object, field: str) -> tuple[MatchAttribute, ...]:
    found = []
    for i, raw in enumerate(as_list(value, field)):
        item = as_map(raw, f"{field}[{i}]")
        if item.get("distinctAttribute") is not None:
            raise FieldError(f"{field}[{i}].distinctAttribute", "is not supported")
        attribute = as_str(item.get("matchAttribute"), f"{field}[{i}].matchAttribute")
        if "/" not in attribute:
            raise FieldError(
                f"{field}[{i}].matchAttribute",
                f"must be a fully qualified name (domain/name), got {attribute!r}",
            )
        requests = _names(item.get("requests"), f"{field}[{i}].requests")
        found.append(MatchAttribute(attribute, requests))
    return tuple(found)


def _configs(value: object, field: str) -> tuple[OpaqueConfig, ...]:
    found = []
    for i, raw in enumerate(as_list(value, field)):
        item = as_map(raw, f"{field}[{i}]")
        opaque = as_map(item.get("opaque"), f"{field}[{i}].opaque")
        driver = as_str(opaque.get("driver"), f"{field}[{i}].opaque.driver")
        parameters = json.dumps(opaque.get("parameters"), sort_keys=True)
        requests = _names(item.get("requests"), f"{field}[{i}].requests")
        found.append(OpaqueConfig(driver, parameters, requests))
    return tuple(found)


def _names(value: object, field: str) -> tuple[str, ...]:
    return tuple(as_str(v, f"{field}[{i}]") for i, v in enumerate(as_list(value, field)))


def _node_selector(value: object, field: str) -> tuple[NodeSelectorTerm, ...]:
    if value is None:
        return ()
    terms = as_list(as_map(value, field).get("nodeSelectorTerms"), f"{field}.nodeSelectorTerms")
    return tuple(
        node_selector_term(t, f"{field}.nodeSelectorTerms[{i}]") for i, t in enumerate(terms)
    )


def _allocation(obj: Mapping[str, object]) -> Allocation | None:
    status = as_map(obj.get("status"), "status")
    if status.get("allocation") is None:
        return None
    raw = as_map(status.get("allocation"), "status.allocation")
    devices = as_map(raw.get("devices"), "status.allocation.devices")
    results = []
    field = "status.allocation.devices.results"
    for i, item in enumerate(as_list(devices.get("results"), field)):
        r = as_map(item, f"{field}[{i}]")
        results.append(
            AllocatedDevice(
                request=as_str(r.get("request"), f"{field}[{i}].request"),
                driver=as_str(r.get("driver"), f"{field}[{i}].driver"),
                pool=as_str(r.get("pool"), f"{field}[{i}].pool"),
                device=as_str(r.get("device"), f"{field}[{i}].device"),
                admin_access=as_bool(r.get("adminAccess"), f"{field}[{i}].adminAccess"),
            )
        )
    terms = _node_selector(raw.get("nodeSelector"), "status.allocation.nodeSelector")
    return Allocation(tuple(results), terms)


def _reserved_for(obj: Mapping[str, object]) -> tuple[Consumer, ...]:
    status = as_map(obj.get("status"), "status")
    field = "status.reservedFor"
    found = []
    for i, item in enumerate(as_list(status.get("reservedFor"), field)):
        r = as_map(item, f"{field}[{i}]")
        found.append(
            Consumer(
                resource=as_str(r.get("resource"), f"{field}[{i}].resource"),
                name=as_str(r.get("name"), f"{field}[{i}].name"),
                uid=as_str(r.get("uid"), f"{field}[{i}].uid"),
                api_group=as_str(r.get("apiGroup"), f"{field}[{i}].apiGroup"),
            )
        )
    return tuple(found)


def _controller_uid(meta: Mapping[str, object]) -> str:
    for i, raw in enumerate(as_list(meta.get("ownerReferences"), "metadata.ownerReferences")):
        ref = as_map(raw, f"metadata.ownerReferences[{i}]")
        if ref.get("controller") is True:
            return as_str(ref.get("uid"), f"metadata.ownerReferences[{i}].uid")
    return ""
