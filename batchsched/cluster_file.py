"""Read cluster state from Kubernetes YAML as `kubectl get -o yaml` prints it.

Accepts `---`-separated documents and `v1 List` objects; sorts objects by kind into lean views.
Bad input raises `ClusterFileError` naming the file, the object and the field.

Dynamic Resource Allocation objects (resource.k8s.io/v1) are read too. A pending pod whose claim
comes from a ResourceClaimTemplate and has no ResourceClaim yet gets the claim the resourceclaim
controller would make for it (named `<pod>-<claim entry>`, where the controller adds a random
suffix), so `batchsched place` can say where the pod would go.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Final

import yaml

from batchsched.dra.objects import DeviceClass, ResourceClaim, ResourceSlice
from batchsched.dra.parse import parse_device_class, parse_resource_claim, parse_resource_slice
from batchsched.dra.templates import RESOURCE_API, template_claim
from batchsched.gang.podgroup import PodGroupView, parse_pod_group
from batchsched.model.errors import InvalidObject
from batchsched.model.fields import FieldError, as_bool, as_int, as_map, object_name, str_map
from batchsched.model.node import NodeView, parse_node
from batchsched.model.pod import PodView, parse_pod
from batchsched.model.pod_spec import PodResourceClaim

DRA_KINDS: Final = ("DeviceClass", "ResourceSlice", "ResourceClaim", "ResourceClaimTemplate")
BASE_KINDS: Final = ("Node", "Pod", "PriorityClass", "Namespace", "PodGroup")
KNOWN_KINDS: Final = (*BASE_KINDS, *DRA_KINDS)


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
    devices: list[tuple[str, Mapping[str, object]]] = field(default_factory=list)  # DRA_KINDS


@dataclass(frozen=True)
class ClusterState:
    nodes: list[NodeView]
    pods: list[PodView]
    priority_classes: dict[str, int]  # "" is the globalDefault class's value
    namespace_labels: dict[str, dict[str, str]]
    pod_groups: list[PodGroupView] = field(default_factory=list)
    device_classes: list[DeviceClass] = field(default_factory=list)
    resource_slices: list[ResourceSlice] = field(default_factory=list)
    # Claims as read, and those made here from templates for pending pods.
    resource_claims: list[ResourceClaim] = field(default_factory=list)


@dataclass
class _Devices:
    classes: list[DeviceClass] = field(default_factory=list)
    slices: list[ResourceSlice] = field(default_factory=list)
    claims: list[ResourceClaim] = field(default_factory=list)
    templates: dict[str, Mapping[str, object]] = field(default_factory=dict)  # key -> claim spec


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


def collect(
    documents: Iterable[tuple[str, Mapping[str, object]]], devices: bool = False
) -> ClusterObjects:
    """Objects by kind. DRA objects only with `devices`: a reader that does not model them
    (the simulator) refuses them rather than schedule their pods without devices."""
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
        elif devices and kind in DRA_KINDS:
            _check_resource_api(origin, str(kind), str(name), obj.get("apiVersion"))
            objects.devices.append((origin, obj))
        else:
            known = ", ".join(KNOWN_KINDS if devices else BASE_KINDS)
            only = " (this reader was asked to leave DRA objects out)" if kind in DRA_KINDS else ""
            raise ClusterFileError(
                f"{origin}: {kind} {name}: unknown kind {kind!r}; expected one of {known}{only}"
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
    devices = _read_devices(objects.devices)
    pods = [_with_template_claims(pod, devices) for pod in pods]
    return ClusterState(
        nodes, pods, classes, namespaces, groups, devices.classes, devices.slices, devices.claims
    )


def _check_resource_api(origin: str, kind: str, name: str, api_version: object) -> None:
    """Older versions (v1beta1: `basic` devices, requests without `exactly`) would be misread."""
    if api_version is None or api_version == RESOURCE_API:
        return
    plural = kind.lower() + ("es" if kind.endswith("s") else "s")
    raise ClusterFileError(
        f"{origin}: {kind} {name}: apiVersion: {api_version!r} is not read, only {RESOURCE_API}; "
        f"dump it with `kubectl get {plural}.v1.resource.k8s.io -o yaml`"
    )


def _read_devices(raw: Iterable[tuple[str, Mapping[str, object]]]) -> _Devices:
    found = _Devices()
    for origin, obj in raw:
        kind = obj.get("kind")
        try:
            if kind == "DeviceClass":
                found.classes.append(parse_device_class(obj))
            elif kind == "ResourceSlice":
                found.slices.append(parse_resource_slice(obj))
            elif kind == "ResourceClaim":
                found.claims.append(parse_resource_claim(obj))
            else:
                key, spec = _read_template(obj)
                if key in found.templates:
                    raise ClusterFileError(f"{origin}: ResourceClaimTemplate {key} appears twice")
                found.templates[key] = spec
        except InvalidObject as err:
            raise ClusterFileError(f"{origin}: {err}") from err
    _check_unique("DeviceClass", [c.name for c in found.classes])
    _check_unique("ResourceSlice", [s.name for s in found.slices])
    _check_unique("ResourceClaim", [c.key for c in found.claims])
    return found


def _read_template(obj: Mapping[str, object]) -> tuple[str, Mapping[str, object]]:
    """A template's claim spec, checked as the claim it makes would be."""
    namespace, name = object_name(obj)
    shown = f"{namespace}/{name}"
    try:
        spec = as_map(as_map(obj.get("spec"), "spec").get("spec"), "spec.spec")
    except FieldError as err:
        raise InvalidObject("ResourceClaimTemplate", shown, err.field, err.message) from err
    try:
        parse_resource_claim({"metadata": {"name": name, "namespace": namespace}, "spec": spec})
    except InvalidObject as err:
        field_path = f"spec.{err.field}"
        raise InvalidObject("ResourceClaimTemplate", shown, field_path, err.message) from err
    return shown, spec


def _with_template_claims(pod: PodView, devices: _Devices) -> PodView:
    """A pending pod with a claim from a template and no ResourceClaim made for it yet gets
    the claim the resourceclaim controller would make, and the status naming it."""
    missing = [
        e for e in pod.resource_claims if e.from_template and e.name not in pod.claim_statuses
    ]
    if pod.node_name or pod.is_finished or not missing:
        return pod
    statuses = dict(pod.claim_statuses)
    for entry in missing:
        claim = _claim_for(pod, entry, devices)
        if claim is not None:
            statuses[entry.name] = claim.name
    return replace(pod, claim_statuses=statuses) if statuses != pod.claim_statuses else pod


def _claim_for(pod: PodView, entry: PodResourceClaim, devices: _Devices) -> ResourceClaim | None:
    for claim in devices.claims:  # made already, the pod's status not written yet
        made_for_pod = claim.owner_uid == pod.uid and claim.pod_claim_name == entry.name
        if claim.namespace == pod.namespace and made_for_pod:
            return claim
    spec = devices.templates.get(f"{pod.namespace}/{entry.template_name}")
    if spec is None:
        return None  # the pod waits, as it would for the controller
    claim = template_claim(pod, entry, spec, {c.key for c in devices.claims})
    devices.claims.append(claim)
    return claim


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


def load_cluster(paths: Iterable[Path], devices: bool = False) -> ClusterState:
    """The cluster in the files; with `devices`, its DRA objects too (see `collect`)."""
    documents: list[tuple[str, Mapping[str, object]]] = []
    for path in paths:
        documents.extend(read_documents(path))
    return resolve(collect(documents, devices))
