"""The lean, frozen node view, parsed once from an API dict."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from batchsched.model.affinity import Taint
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
    str_map,
)
from batchsched.model.pod import normalized_image
from batchsched.model.pod_spec import TAINT_EFFECTS
from batchsched.model.quantity import QuantityError
from batchsched.model.resources import Resources


@dataclass(frozen=True, slots=True, eq=False)
class NodeView:
    name: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    unschedulable: bool
    taints: tuple[Taint, ...]
    allocatable: Resources
    image_sizes: Mapping[str, int]  # every name an image is known by -> its size in bytes


def parse_node(obj: Mapping[str, object]) -> NodeView:
    _, name = object_name(obj)
    try:
        meta, _, name = metadata(obj)
        return _parse_node(obj, meta, name)
    except FieldError as err:
        raise InvalidObject("Node", name, err.field, err.message) from err
    except QuantityError as err:  # the field once, as InvalidObject prints it
        message = f"invalid quantity {shown(err.value)}: {err.why}"
        raise InvalidObject("Node", name, err.field, message) from err


def _parse_node(obj: Mapping[str, object], meta: Mapping[str, object], name: str) -> NodeView:
    spec = as_map(obj.get("spec"), "spec")
    status = as_map(obj.get("status"), "status")
    # allocatable is what the kubelet offers pods; capacity stands in when it is not reported.
    alloc_raw = status.get("allocatable")
    alloc_field = "status.allocatable"
    if alloc_raw is None:
        alloc_raw, alloc_field = status.get("capacity"), "status.capacity"
    return NodeView(
        name=name,
        labels=str_map(meta.get("labels"), "metadata.labels"),
        annotations=str_map(meta.get("annotations"), "metadata.annotations"),
        unschedulable=as_bool(spec.get("unschedulable"), "spec.unschedulable"),
        taints=_taints(spec.get("taints")),
        allocatable=Resources.parse(as_map(alloc_raw, alloc_field), alloc_field),
        image_sizes=_images(status.get("images")),
    )


def _taints(value: object) -> tuple[Taint, ...]:
    found = []
    for i, raw in enumerate(as_list(value, "spec.taints")):
        item = as_map(raw, f"spec.taints[{i}]")
        effect = as_str(item.get("effect"), f"spec.taints[{i}].effect")
        if effect not in TAINT_EFFECTS:
            raise FieldError(f"spec.taints[{i}].effect", f"unknown taint effect {effect!r}")
        key = as_str(item.get("key"), f"spec.taints[{i}].key")
        found.append(Taint(key, as_str(item.get("value"), f"spec.taints[{i}].value"), effect))
    return tuple(found)


def _images(value: object) -> dict[str, int]:
    sizes: dict[str, int] = {}
    for i, raw in enumerate(as_list(value, "status.images")):
        item = as_map(raw, f"status.images[{i}]")
        size = as_int(item.get("sizeBytes"), f"status.images[{i}].sizeBytes")
        for n in as_list(item.get("names"), f"status.images[{i}].names"):
            # Normalized like pod images ("x" means "x:latest") so lookups are one dict get.
            sizes[normalized_image(as_str(n, f"status.images[{i}].names"))] = size
    return sizes
