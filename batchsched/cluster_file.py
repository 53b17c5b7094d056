"""Read cluster state from `kubectl get -o yaml` (or `-o json`): `---`-separated documents or
Lists, sorted by kind into lean views. `ClusterFileError` names the file, object and field.

Dynamic Resource Allocation objects (resource.k8s.io/v1) are read too. A pending pod whose claim
comes from a ResourceClaimTemplate and has no ResourceClaim yet gets the claim the resourceclaim
controller would make for it (named `<pod>-<claim entry>`, where the controller adds a random
suffix), so `batchsched place` can say where the pod would go.

Kinds it does not read (a Service, a Deployment: whatever `kubectl get all -A -o yaml` prints)
are counted by kind and skipped. NodeResourceTopology objects are kept raw: the GPU model's
reader (gpu.nrt) is in this layer, so the command that loads the file parses them.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Final, TypeVar

from batchsched.configfile.kube_dump import DumpFileError, read_objects
from batchsched.dra.objects import DeviceClass, ResourceClaim, ResourceSlice
from batchsched.dra.parse import parse_device_class, parse_resource_claim, parse_resource_slice
from batchsched.dra.templates import RESOURCE_API, template_claim
from batchsched.gang.encodings import parse_k8s_pod_group, parse_volcano_pod_group
from batchsched.gang.podgroup import PodGroupView, parse_pod_group
from batchsched.model.errors import InvalidObject
from batchsched.model.fields import FieldError, as_bool, as_int, as_map, object_name, str_map
from batchsched.model.node import NodeView, parse_node
from batchsched.model.pod import PodView, parse_pod
from batchsched.model.pod_spec import PodResourceClaim

DRA_KINDS: Final = ("DeviceClass", "ResourceSlice", "ResourceClaim", "ResourceClaimTemplate")
NRT_KIND: Final = "NodeResourceTopology"
BASE_KINDS: Final = ("Node", "Pod", "PriorityClass", "Namespace", "PodGroup", NRT_KIND)
KNOWN_KINDS: Final = (*BASE_KINDS, *DRA_KINDS)
# PodGroup API group -> its reader (gang/encodings.py): coscheduling, Kubernetes, Volcano.
_GROUP_READERS: Final[dict[str, Callable[[Mapping[str, object]], PodGroupView]]] = {
    "scheduling.x-k8s.io": parse_pod_group,
    "scheduling.k8s.io": parse_k8s_pod_group,
    "scheduling.volcano.sh": parse_volcano_pod_group,
}

Progress = Callable[[str], None]
ClusterFileError = DumpFileError  # the file's errors and its objects' are one kind
_T = TypeVar("_T")


@dataclass
class ClusterObjects:
    """Raw objects by kind, before pods are resolved against PriorityClasses."""

    nodes: list[Mapping[str, object]] = field(default_factory=list)
    pods: list[tuple[str, Mapping[str, object]]] = field(default_factory=list)  # (origin, obj)
    priority_classes: list[Mapping[str, object]] = field(default_factory=list)
    namespaces: list[Mapping[str, object]] = field(default_factory=list)
    pod_groups: list[tuple[str, Mapping[str, object]]] = field(default_factory=list)
    devices: list[tuple[str, Mapping[str, object]]] = field(default_factory=list)  # DRA_KINDS
    topologies: list[tuple[str, Mapping[str, object]]] = field(default_factory=list)  # NRT
    skipped: Counter[str] = field(default_factory=Counter)  # kind -> objects not read
    node_origins: list[str] = field(default_factory=list)  # beside `nodes`, for messages


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
    topologies: list[tuple[str, Mapping[str, object]]] = field(default_factory=list)  # raw NRT
    skipped: Mapping[str, int] = field(default_factory=dict)  # kind -> objects not read


@dataclass
class _Devices:
    classes: list[DeviceClass] = field(default_factory=list)
    slices: list[ResourceSlice] = field(default_factory=list)
    claims: list[ResourceClaim] = field(default_factory=list)
    templates: dict[str, Mapping[str, object]] = field(default_factory=dict)  # key -> claim spec


def read_documents(path: Path) -> list[tuple[str, Mapping[str, object]]]:
    """Every object in the file, with "file#index" as its origin for messages."""
    return list(read_objects(path))


def collect(
    documents: Iterable[tuple[str, Mapping[str, object]]], devices: bool = False
) -> ClusterObjects:
    """Objects by kind; kinds it does not read are counted in `skipped`. DRA objects only with
    `devices`: a reader that does not model them refuses them rather than schedule their pods
    without devices."""
    objects = ClusterObjects()
    lists: dict[object, list[tuple[str, Mapping[str, object]]]] = {
        "Pod": objects.pods,
        "PodGroup": objects.pod_groups,
        NRT_KIND: objects.topologies,
    }
    for origin, obj in documents:
        kind = obj.get("kind")
        found = lists.get(kind)
        if found is not None:
            found.append((origin, obj))
        elif kind == "Node":
            objects.nodes.append(obj)
            objects.node_origins.append(origin)
        elif kind == "PriorityClass":
            objects.priority_classes.append(obj)
        elif kind == "Namespace":
            objects.namespaces.append(obj)
        elif kind in DRA_KINDS:
            _collect_device(objects, origin, obj, devices)
        else:
            objects.skipped[str(kind) if kind else "<no kind>"] += 1
    return objects


def _collect_device(
    objects: ClusterObjects, origin: str, obj: Mapping[str, object], devices: bool
) -> None:
    kind = str(obj.get("kind"))
    name = _shown_name(obj)
    if not devices:
        raise ClusterFileError(
            f"{origin}: {kind} {name}: this reader was asked to leave DRA objects out"
        )
    _check_resource_api(origin, kind, name, obj.get("apiVersion"))
    objects.devices.append((origin, obj))


def _shown_name(obj: Mapping[str, object]) -> str:
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    name = str(meta.get("name", "<unnamed>"))
    return f"{meta['namespace']}/{name}" if meta.get("namespace") else name


def skipped_text(skipped: Mapping[str, int]) -> str:
    """One line for every object not read: "skipped 7 objects of kinds not read: Service 4, ..."."""
    total = sum(skipped.values())
    kinds = ", ".join(f"{kind} {n}" for kind, n in sorted(skipped.items(), key=lambda kv: -kv[1]))
    noun = "object" if total == 1 else "objects"
    return f"skipped {total} {noun} of kinds it does not read: {kinds}"


def resolve(objects: ClusterObjects) -> ClusterState:
    """Parse every object into views; PriorityClasses first, since pods refer to them."""
    try:
        classes = _priority_classes(objects.priority_classes)
        namespaces = {
            str(as_map(ns.get("metadata"), "metadata").get("name", "")): str_map(
                as_map(ns.get("metadata"), "metadata").get("labels"), "metadata.labels"
            )
            for ns in objects.namespaces
        }
    except (InvalidObject, FieldError) as err:
        raise ClusterFileError(str(err)) from err
    nodes = [_parsed(parse_node, obj, origin) for origin, obj in _node_pairs(objects)]
    pods = [_parsed(lambda o: parse_pod(o, classes), obj, origin) for origin, obj in objects.pods]
    groups = [_parsed(_pod_group, obj, origin) for origin, obj in objects.pod_groups]
    _check_unique("Node", [n.name for n in nodes], [o for o, _ in _node_pairs(objects)])
    _check_unique("Pod", [p.key for p in pods], [o for o, _ in objects.pods])
    _check_unique("PodGroup", [g.key for g in groups], [o for o, _ in objects.pod_groups])
    devices = _read_devices(objects.devices)
    pods = [_with_template_claims(pod, devices) for pod in pods]
    return ClusterState(
        nodes,
        pods,
        classes,
        namespaces,
        groups,
        devices.classes,
        devices.slices,
        devices.claims,
        objects.topologies,
        dict(objects.skipped),
    )


def _node_pairs(objects: ClusterObjects) -> Iterator[tuple[str, Mapping[str, object]]]:
    origins = objects.node_origins
    for i, obj in enumerate(objects.nodes):
        yield (origins[i] if i < len(origins) else ""), obj


def _parsed(
    read: Callable[[Mapping[str, object]], _T], obj: Mapping[str, object], origin: str
) -> _T:
    """`read(obj)`, its error prefixed once with where the object is."""
    try:
        return read(obj)
    except (InvalidObject, FieldError) as err:
        raise ClusterFileError(f"{origin}: {err}" if origin else str(err)) from err


def _pod_group(obj: Mapping[str, object]) -> PodGroupView:
    """The reader of the PodGroup's API group (coscheduling's when it names none)."""
    group = str(obj.get("apiVersion") or "").partition("/")[0]
    return _GROUP_READERS.get(group, parse_pod_group)(obj)


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


def _check_unique(kind: str, names: list[str], origins: Sequence[str] = ()) -> None:
    """Refuse a name seen twice, naming both places where `origins` (beside `names`) say."""
    seen: dict[str, int] = {}
    for i, name in enumerate(names):
        first = seen.setdefault(name, i)
        if first != i:
            where = f": {origins[first]} and {origins[i]}" if i < len(origins) else ""
            raise ClusterFileError(f"{kind} {name} appears twice{where}")


def load_cluster(
    paths: Iterable[Path], devices: bool = False, progress: Progress | None = None
) -> ClusterState:
    """The cluster in the files; with `devices`, its DRA objects too (see `collect`).
    `progress` gets a line per file read and one when the objects are parsed."""
    documents: list[tuple[str, Mapping[str, object]]] = []
    started = time.monotonic()
    for path in paths:
        before = len(documents)
        documents.extend(read_objects(path))
        if progress is not None:
            took = time.monotonic() - started
            progress(f"read {path}: {len(documents) - before} objects ({took:.1f} s)")
    state = resolve(collect(documents, devices))
    if progress is not None:
        took = time.monotonic() - started
        progress(f"parsed {len(state.nodes)} nodes, {len(state.pods)} pods ({took:.1f} s)")
    return state
