"""The lean, frozen pod view the core works on, parsed once from an API dict."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from operator import attrgetter
from typing import Final

from batchsched.model.affinity import (
    HostPort,
    NodeAffinity,
    PodAffinity,
    Toleration,
    TopologySpreadConstraint,
)
from batchsched.model.errors import InvalidObject
from batchsched.model.fields import (
    FieldError,
    as_int,
    as_list,
    as_map,
    as_str,
    metadata,
    object_name,
    shown,
    str_map,
    timestamp,
)
from batchsched.model.gang_ref import check_one_gang
from batchsched.model.pod_spec import (
    PodResourceClaim,
    parse_claim_statuses,
    parse_node_affinity,
    parse_pod_affinity,
    parse_resource_claims,
    parse_spread_constraints,
    parse_tolerations,
)
from batchsched.model.quantity import QuantityError
from batchsched.model.resources import CPU, MEMORY, Resources, pod_requests

# kube-scheduler scores a container that names no cpu/memory request as if it asked for these.
DEFAULT_MILLI_CPU_REQUEST: Final = 100
DEFAULT_MEMORY_REQUEST: Final = 200 * 1024 * 1024
DEFAULT_SCHEDULER: Final = "default-scheduler"


@dataclass(frozen=True, slots=True, eq=False)
class PodView:
    namespace: str
    name: str
    uid: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    scheduler_name: str
    node_name: str  # empty while pending
    priority: int
    priority_class_name: str
    preemption_policy: str
    creation_time: float
    phase: str
    deleting: bool
    requests: Resources
    non_zero_milli_cpu: int
    non_zero_memory: int
    node_selector: Mapping[str, str]
    node_affinity: NodeAffinity | None
    pod_affinity: PodAffinity | None
    pod_anti_affinity: PodAffinity | None
    tolerations: tuple[Toleration, ...]
    spread_constraints: tuple[TopologySpreadConstraint, ...]
    host_ports: tuple[HostPort, ...]
    images: tuple[str, ...]
    scheduling_gates: tuple[str, ...]
    active_deadline_seconds: int | None = None
    start_time: float = 0.0  # status.startTime (seconds since the epoch); 0 until it runs
    # spec.resourceClaims (DRA), and status.resourceClaimStatuses: the ResourceClaim made
    # for each entry from a template ("" where the pod needs none), once the controller has.
    resource_claims: tuple[PodResourceClaim, ...] = ()
    claim_statuses: Mapping[str, str] = field(default_factory=dict)
    # spec.schedulingGroup.podGroupName: the upstream (scheduling.k8s.io) PodGroup it joins.
    scheduling_group: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def is_bound(self) -> bool:
        return bool(self.node_name)

    @property
    def is_finished(self) -> bool:
        return self.phase in ("Succeeded", "Failed")


_FIELDS: Final = tuple(f.name for f in fields(PodView))
_VALUES: Final = attrgetter(*_FIELDS)
_NODE_NAME_AT: Final = _FIELDS.index("node_name")


def bound_to(pod: PodView, node_name: str) -> PodView:
    """`dataclasses.replace(pod, node_name=node_name)` at half the cost (no per-field init
    checks): the snapshot assumes every placed pod, a 1000-pod gang a thousand times."""
    values = list(_VALUES(pod))
    values[_NODE_NAME_AT] = node_name
    return PodView(*values)


def normalized_image(name: str) -> str:
    """Image names as the kubelet reports them: a bare name means the `latest` tag."""
    if "@" in name:
        return name
    last = name.rsplit("/", 1)[-1]
    return name if ":" in last else f"{name}:latest"


def parse_pod(
    obj: Mapping[str, object], priority_classes: Mapping[str, int] | None = None
) -> PodView:
    """Read a Pod as `kubectl get -o yaml` prints it.

    `priority_classes` resolves `priorityClassName` when `spec.priority` is absent (objects from
    files have not been through the API server's admission, which would have set it).
    """
    namespace, name = object_name(obj)
    try:
        meta, namespace, name = metadata(obj)
        return _parse_pod(obj, meta, name, namespace, priority_classes or {})
    except FieldError as err:
        raise InvalidObject("Pod", f"{namespace}/{name}", err.field, err.message) from err
    except QuantityError as err:  # the field once, as InvalidObject prints it
        message = f"invalid quantity {shown(err.value)}: {err.why}"
        raise InvalidObject("Pod", f"{namespace}/{name}", err.field, message) from err


def _parse_pod(
    obj: Mapping[str, object],
    meta: Mapping[str, object],
    name: str,
    namespace: str,
    priority_classes: Mapping[str, int],
) -> PodView:
    spec = as_map(obj.get("spec"), "spec")
    status = as_map(obj.get("status"), "status")
    requests, non_zero, ports, images = _container_facts(spec)
    class_name = as_str(spec.get("priorityClassName"), "spec.priorityClassName")
    priority = _priority(spec, class_name, priority_classes)
    affinity = as_map(spec.get("affinity"), "spec.affinity")
    pod_affinity, pod_anti_affinity = _pod_affinities(affinity, namespace)
    gates = _scheduling_gates(spec)
    labels, annotations, scheduling_group = _gang_facts(meta, spec)
    return PodView(
        namespace=namespace,
        name=name,
        uid=as_str(meta.get("uid"), "metadata.uid") or f"{namespace}/{name}",
        labels=labels,
        annotations=annotations,
        scheduler_name=as_str(spec.get("schedulerName"), "spec.schedulerName", DEFAULT_SCHEDULER),
        node_name=as_str(spec.get("nodeName"), "spec.nodeName"),
        priority=priority,
        priority_class_name=class_name,
        preemption_policy=as_str(
            spec.get("preemptionPolicy"), "spec.preemptionPolicy", "PreemptLowerPriority"
        ),
        creation_time=timestamp(meta.get("creationTimestamp"), "metadata.creationTimestamp"),
        phase=as_str(status.get("phase"), "status.phase", "Pending"),
        deleting=meta.get("deletionTimestamp") is not None,
        requests=requests,
        non_zero_milli_cpu=non_zero.milli_cpu,
        non_zero_memory=non_zero.memory,
        node_selector=str_map(spec.get("nodeSelector"), "spec.nodeSelector"),
        node_affinity=parse_node_affinity(
            affinity.get("nodeAffinity"), "spec.affinity.nodeAffinity"
        ),
        pod_affinity=pod_affinity,
        pod_anti_affinity=pod_anti_affinity,
        tolerations=parse_tolerations(spec.get("tolerations"), "spec.tolerations"),
        spread_constraints=parse_spread_constraints(
            spec.get("topologySpreadConstraints"),
            "spec.topologySpreadConstraints",
            labels,
        ),
        host_ports=ports,
        images=images,
        scheduling_gates=gates,
        active_deadline_seconds=_optional_int(
            spec.get("activeDeadlineSeconds"), "spec.activeDeadlineSeconds"
        ),
        start_time=timestamp(status.get("startTime"), "status.startTime"),
        resource_claims=parse_resource_claims(spec.get("resourceClaims"), "spec.resourceClaims"),
        claim_statuses=parse_claim_statuses(status.get("resourceClaimStatuses")),
        scheduling_group=scheduling_group,
    )


def _pod_affinities(
    affinity: Mapping[str, object], namespace: str
) -> tuple[PodAffinity | None, PodAffinity | None]:
    field = "spec.affinity"
    return (
        parse_pod_affinity(affinity.get("podAffinity"), f"{field}.podAffinity", namespace),
        parse_pod_affinity(affinity.get("podAntiAffinity"), f"{field}.podAntiAffinity", namespace),
    )


def _gang_facts(
    meta: Mapping[str, object], spec: Mapping[str, object]
) -> tuple[dict[str, str], dict[str, str], str]:
    """Labels, annotations and spec.schedulingGroup, checked to name one gang at most."""
    labels = str_map(meta.get("labels"), "metadata.labels")
    annotations = str_map(meta.get("annotations"), "metadata.annotations")
    scheduling_group = _scheduling_group(spec)
    check_one_gang(labels, annotations, scheduling_group)
    return labels, annotations, scheduling_group


def _scheduling_group(spec: Mapping[str, object]) -> str:
    group = as_map(spec.get("schedulingGroup"), "spec.schedulingGroup")
    return as_str(group.get("podGroupName"), "spec.schedulingGroup.podGroupName")


def _scheduling_gates(spec: Mapping[str, object]) -> tuple[str, ...]:
    names: list[str] = []
    for i, raw in enumerate(as_list(spec.get("schedulingGates"), "spec.schedulingGates")):
        field = f"spec.schedulingGates[{i}]"
        names.append(as_str(as_map(raw, field).get("name"), f"{field}.name"))
    return tuple(names)


def _optional_int(value: object, field: str) -> int | None:
    return None if value is None else as_int(value, field)


def _priority(spec: Mapping[str, object], class_name: str, classes: Mapping[str, int]) -> int:
    if spec.get("priority") is not None:
        return as_int(spec.get("priority"), "spec.priority")
    if class_name:
        if class_name not in classes:
            raise FieldError("spec.priorityClassName", f"no PriorityClass named {class_name!r}")
        return classes[class_name]
    return classes.get("", 0)  # the globalDefault class, when one exists


def _container_facts(
    spec: Mapping[str, object],
) -> tuple[Resources, Resources, tuple[HostPort, ...], tuple[str, ...]]:
    app: list[Resources] = []
    app_nz: list[Resources] = []
    init: list[tuple[Resources, bool]] = []
    init_nz: list[tuple[Resources, bool]] = []
    ports: list[HostPort] = []
    images: list[str] = []
    for kind in ("containers", "initContainers"):
        for i, raw in enumerate(as_list(spec.get(kind), f"spec.{kind}")):
            field = f"spec.{kind}[{i}]"
            container = as_map(raw, field)
            req, nz, image = _container_requests(container, field)
            if image:
                images.append(image)
            if kind == "containers":
                app.append(req)
                app_nz.append(nz)
                ports.extend(_host_ports(container, field))
            else:
                sidecar = container.get("restartPolicy") == "Always"
                init.append((req, sidecar))
                init_nz.append((nz, sidecar))
    overhead = Resources.parse(as_map(spec.get("overhead"), "spec.overhead"), "spec.overhead")
    return (
        pod_requests(app, init, overhead),
        pod_requests(app_nz, init_nz, overhead),
        tuple(ports),
        tuple(images),
    )


def _container_requests(
    container: Mapping[str, object], field: str
) -> tuple[Resources, Resources, str]:
    """A container's requests, non-zero requests and normalized image. The pods of a Job, and
    the two versions of a pod the watch shows around its bind, share containers: the answer
    is remembered by the fields it reads (issue #17), only for plain text values, so a value
    that parses differently (an int, a bool equal to 1) never meets another's answer."""
    key = _requests_key(container)
    if key is not None:
        known = _CONTAINERS.get(key)
        if known is not None:
            return known
    declared = _declared_requests(container, field)
    req = Resources.parse(declared, f"{field}.resources.requests")
    raw_image = container.get("image")
    image = normalized_image(as_str(raw_image, f"{field}.image")) if raw_image else ""
    facts = (req, _non_zero(req, declared), image)
    if key is not None and len(_CONTAINERS) < _CONTAINERS_KEPT:
        _CONTAINERS[key] = facts
    return facts


_Key = tuple[tuple[str, str], ...]
_CONTAINERS: Final[dict[tuple[str, _Key, _Key], tuple[Resources, Resources, str]]] = {}
_CONTAINERS_KEPT: Final = 4096


def _requests_key(container: Mapping[str, object]) -> tuple[str, _Key, _Key] | None:
    """(image, limits, requests) as read, or None unless each is absent or plain text."""
    image = container.get("image", "")
    resources = container.get("resources")
    if type(image) is not str:
        return None
    if resources is None:
        return image, (), ()
    if type(resources) is not dict:
        return None
    limits = _text_pairs(resources.get("limits"))
    requests = _text_pairs(resources.get("requests"))
    if limits is None or requests is None:
        return None
    return image, limits, requests


def _text_pairs(value: object) -> _Key | None:
    if value is None:
        return ()
    if type(value) is not dict:
        return None
    pairs = tuple(value.items())
    for name, amount in pairs:
        if type(name) is not str or type(amount) is not str:
            return None
    return pairs


def _declared_requests(container: Mapping[str, object], field: str) -> dict[str, object]:
    # The API server defaults a missing request to the limit; files have not been defaulted yet.
    resources = as_map(container.get("resources"), f"{field}.resources")
    declared = dict(as_map(resources.get("limits"), f"{field}.resources.limits"))
    declared.update(as_map(resources.get("requests"), f"{field}.resources.requests"))
    return declared


def _non_zero(req: Resources, declared: Mapping[str, object]) -> Resources:
    cpu = req.milli_cpu if CPU in declared else DEFAULT_MILLI_CPU_REQUEST
    memory = req.memory if MEMORY in declared else DEFAULT_MEMORY_REQUEST
    return Resources(milli_cpu=cpu, memory=memory)


def _host_ports(container: Mapping[str, object], field: str) -> list[HostPort]:
    found = []
    for j, raw in enumerate(as_list(container.get("ports"), f"{field}.ports")):
        port = as_map(raw, f"{field}.ports[{j}]")
        host_port = as_int(port.get("hostPort"), f"{field}.ports[{j}].hostPort")
        if host_port > 0:
            ip = as_str(port.get("hostIP"), f"{field}.ports[{j}].hostIP") or "0.0.0.0"
            protocol = as_str(port.get("protocol"), f"{field}.ports[{j}].protocol") or "TCP"
            found.append(HostPort(ip, protocol, host_port))
    return found
