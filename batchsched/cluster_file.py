"""Read cluster state from Kubernetes YAML as `kubectl get -o yaml` prints it.

Accepts `---`-separated documents and `v1 List` objects; sorts objects by kind into lean views.
Bad input raises `ClusterFileError` naming the file, the object and the field.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from batchsched.gang.podgroup import PodGroupView, parse_pod_group
from batchsched.model.errors import InvalidObject
from batchsched.model.fields import FieldError, as_bool, as_int, as_map, str_map
from batchsched.model.node import NodeView, parse_node
from batchsched.model.pod import PodView, parse_pod

KNOWN_KINDS = ("Node", "Pod", "PriorityClass", "Namespace", "PodGroup")


class ClusterFileError(ValueError):
    pass


@dataclass
class ClusterObjects:
    """Raw objects by kind, before pods are resolved against PriorityClasses."""

    nodes: list[Mapping[str, object]] = field(default_factory=list)
    pods: list[tuple[str, Mapping[str, object]]] = field(default_factory=list)  # (origin, obj)
    priority_classes: list[Mapping[str, object]] = field(default_factory=list)
    namespaces: list[Mapping[str, object]] = field(default_factory=list)
    pod_groups: list[tuple[str, Mapping[str, object]]] = field(default_factory=list)


@dataclass(frozen=True)
class ClusterState:
    nodes: list[NodeView]
    pods: list[PodView]
    priority_classes: dict[str, int]  # "" is the globalDefault class's value
    namespace_labels: dict[str, dict[str, str]]
    pod_groups: list[PodGroupView] = field(default_factory=list)


def read_documents(path: Path) -> list[tuple[str, Mapping[str, object]]]:
    """Every object in the file, with "file#index" as its origin for messages."""
    try:
        text = path.read_text()
    except OSError as err:
        raise ClusterFileError(f"{path}: cannot read: {err.strerror or err}") from err
    try:
        documents = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as err:
        raise ClusterFileError(f"{path}: not valid YAML: {err}") from err
    found: list[tuple[str, Mapping[str, object]]] = []
    for i, doc in enumerate(documents):
        if not isinstance(doc, Mapping):
            raise ClusterFileError(
                f"{path}: document {i}: expected a Kubernetes object, got {type(doc).__name__}"
            )
        if doc.get("kind") == "List" or str(doc.get("kind", "")).endswith("List"):
            items = doc.get("items") or []
            if not isinstance(items, list):
                raise ClusterFileError(f"{path}: document {i}: items must be a list")
            for j, item in enumerate(items):
                if not isinstance(item, Mapping):
                    raise ClusterFileError(f"{path}: document {i} items[{j}]: expected an object")
                found.append((f"{path}#{i}.items[{j}]", item))
        else:
            found.append((f"{path}#{i}", doc))
    return found


def collect(documents: Iterable[tuple[str, Mapping[str, object]]]) -> ClusterObjects:
    objects = ClusterObjects()
    for origin, obj in documents:
        kind = obj.get("kind")
        name = as_map(obj.get("metadata"), "metadata").get("name", "<unnamed>")
        if kind == "Node":
            objects.nodes.append(obj)
        elif kind == "Pod":
            objects.pods.append((origin, obj))
        elif kind == "PriorityClass":
            objects.priority_classes.append(obj)
        elif kind == "Namespace":
            objects.namespaces.append(obj)
        elif kind == "PodGroup":
            objects.pod_groups.append((origin, obj))
        else:
            known = ", ".join(KNOWN_KINDS)
            raise ClusterFileError(
                f"{origin}: {kind} {name}: unknown kind {kind!r}; expected one of {known}"
            )
    return objects


def resolve(objects: ClusterObjects) -> ClusterState:
    """Parse every object into views; PriorityClasses first, since pods refer to them."""
    try:
        classes = _priority_classes(objects.priority_classes)
        nodes = [parse_node(n) for n in objects.nodes]
        pods = []
        for origin, obj in objects.pods:
            try:
                pods.append(parse_pod(obj, classes))
            except InvalidObject as err:
                raise ClusterFileError(f"{origin}: {err}") from err
        namespaces = {
            str(as_map(ns.get("metadata"), "metadata").get("name", "")): str_map(
                as_map(ns.get("metadata"), "metadata").get("labels"), "metadata.labels"
            )
            for ns in objects.namespaces
        }
    except (InvalidObject, FieldError) as err:
        raise ClusterFileError(str(err)) from err
    groups = []
    for origin, obj in objects.pod_groups:
        try:
            groups.append(parse_pod_group(obj))
        except InvalidObject as err:
            raise ClusterFileError(f"{origin}: {err}") from err
    _check_unique("Node", [n.name for n in nodes])
    _check_unique("Pod", [p.key for p in pods])
    _check_unique("PodGroup", [g.key for g in groups])
    return ClusterState(nodes, pods, classes, namespaces, groups)


def _priority_classes(raw: list[Mapping[str, object]]) -> dict[str, int]:
    classes: dict[str, int] = {}
    for obj in raw:
        name = str(as_map(obj.get("metadata"), "metadata").get("name", ""))
        try:
            value = as_int(obj.get("value"), "value")
            default = as_bool(obj.get("globalDefault"), "globalDefault")
        except FieldError as err:
            raise InvalidObject("PriorityClass", name, err.field, err.message) from err
        classes[name] = value
        if default:
            classes[""] = value
    return classes


def _check_unique(kind: str, names: list[str]) -> None:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise ClusterFileError(f"{kind} {name} appears twice")
        seen.add(name)


def load_cluster(paths: Iterable[Path]) -> ClusterState:
    documents: list[tuple[str, Mapping[str, object]]] = []
    for path in paths:
        documents.extend(read_documents(path))
    return resolve(collect(documents))
