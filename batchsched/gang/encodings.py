"""Gangs described in other APIs than scheduler-plugins', read into the same PodGroupView.

- `parse_k8s_pod_group`: the upstream PodGroup, `scheduling.k8s.io/v1alpha2` (Kubernetes 1.36,
  KEP-4671). The Workload controller copies its template's policy into each PodGroup, so the
  PodGroup alone says how to schedule: `schedulingPolicy.gang.minCount` (or `basic`: every pod
  on its own), `schedulingConstraints.topology[0].key` (all members in one domain of it),
  `priorityClassName`/`priority`.
- `parse_volcano_pod_group`: `scheduling.volcano.sh/v1beta1` PodGroup: `minMember`,
  `minResources`, `queue`, `priorityClassName`, `networkTopology` {mode hard|soft,
  highestTierAllowed}. `minTaskMember` is not supported (the gang counts pods, not tasks).
- `kueue_group`: a Kueue plain-pod group has no object; its size is every member pod's
  `kueue.x-k8s.io/pod-group-total-count` annotation, its topology the pods'
  `kueue.x-k8s.io/podset-required-topology` / `podset-preferred-topology` annotations.

Our own topology annotations (batchsched/gang/topology.py) work on any of them where the
producer's API has no say of its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from batchsched.gang.podgroup import PodGroupView, int32_field, status_count
from batchsched.gang.topology import (
    TopologyAnnotationError,
    TopologyRequest,
    topology_from_annotations,
)
from batchsched.model.errors import InvalidObject
from batchsched.model.fields import (
    FieldError,
    as_list,
    as_map,
    as_str,
    metadata,
    object_name,
    shown,
    str_map,
    timestamp,
)
from batchsched.model.gang_ref import KUEUE_TOTAL_ANNOTATION, GangApi
from batchsched.model.pod import PodView
from batchsched.model.quantity import QuantityError
from batchsched.model.resources import Resources

KUEUE_REQUIRED_TOPOLOGY: Final = "kueue.x-k8s.io/podset-required-topology"
KUEUE_PREFERRED_TOPOLOGY: Final = "kueue.x-k8s.io/podset-preferred-topology"
KUEUE_QUEUE_LABEL: Final = "kueue.x-k8s.io/queue-name"
K8S_KIND: Final = "PodGroup"


def parse_k8s_pod_group(obj: Mapping[str, object]) -> PodGroupView:
    namespace, name = object_name(obj)
    try:
        meta, namespace, name = metadata(obj)
        spec = as_map(obj.get("spec"), "spec")
        annotations = str_map(meta.get("annotations"), "metadata.annotations")
        return PodGroupView(
            namespace=namespace,
            name=name,
            uid=as_str(meta.get("uid"), "metadata.uid") or f"{namespace}/{name}",
            min_member=_min_count(spec),
            min_resources=Resources(),
            schedule_timeout_seconds=None,
            creation_time=timestamp(meta.get("creationTimestamp"), "metadata.creationTimestamp"),
            labels=str_map(meta.get("labels"), "metadata.labels"),
            annotations=annotations,
            api=GangApi.KUBERNETES,
            topology=_k8s_topology(spec) or topology_from_annotations(annotations),
            priority_class_name=as_str(spec.get("priorityClassName"), "spec.priorityClassName"),
            scheduled=_condition_status(obj, "PodGroupScheduled"),
        )
    except (FieldError, TopologyAnnotationError) as err:
        raise InvalidObject(K8S_KIND, f"{namespace}/{name}", err.field, err.message) from err


def _min_count(spec: Mapping[str, object]) -> int:
    policy = as_map(spec.get("schedulingPolicy"), "spec.schedulingPolicy")
    gang, basic = policy.get("gang"), policy.get("basic")
    if (gang is None) == (basic is None):
        raise FieldError("spec.schedulingPolicy", "exactly one of basic and gang must be set")
    if gang is None:
        return 1  # basic: every pod is scheduled on its own
    field = "spec.schedulingPolicy.gang.minCount"
    return int32_field(as_map(gang, "spec.schedulingPolicy.gang").get("minCount"), field, minimum=1)


def _k8s_topology(spec: Mapping[str, object]) -> TopologyRequest | None:
    field = "spec.schedulingConstraints"
    constraints = as_map(spec.get("schedulingConstraints"), field)
    topology = as_list(constraints.get("topology"), f"{field}.topology")
    if not topology:
        return None
    if len(topology) > 1:
        raise FieldError(f"{field}.topology", f"at most one constraint, got {len(topology)}")
    key = as_str(as_map(topology[0], f"{field}.topology[0]").get("key"), f"{field}.topology[0].key")
    if not key:
        raise FieldError(f"{field}.topology[0].key", "must name a node label key")
    return TopologyRequest(key, required=True)


def _condition_status(obj: Mapping[str, object], kind: str) -> str:
    """The status ("True", "False") of the condition of that type; "" when there is none.
    Ours to write, so never a reason to refuse the object."""
    status = obj.get("status")
    conditions = status.get("conditions") if isinstance(status, Mapping) else None
    for condition in conditions if isinstance(conditions, list) else ():
        if isinstance(condition, Mapping) and condition.get("type") == kind:
            return str(condition.get("status", ""))
    return ""


def parse_volcano_pod_group(obj: Mapping[str, object]) -> PodGroupView:
    """A Volcano PodGroup. minMember 0 or absent means a gang of one (Volcano starts such a
    group's pods one by one); a negative one is refused."""
    namespace, name = object_name(obj)
    try:
        meta, namespace, name = metadata(obj)
        spec = as_map(obj.get("spec"), "spec")
        annotations = str_map(meta.get("annotations"), "metadata.annotations")
        min_member = spec.get("minMember")
        return PodGroupView(
            namespace=namespace,
            name=name,
            uid=as_str(meta.get("uid"), "metadata.uid") or f"{namespace}/{name}",
            min_member=max(1, int32_field(min_member, "spec.minMember", minimum=0))
            if min_member is not None
            else 1,
            min_resources=Resources.parse(
                as_map(spec.get("minResources"), "spec.minResources"), "spec.minResources"
            ),
            schedule_timeout_seconds=None,
            creation_time=timestamp(meta.get("creationTimestamp"), "metadata.creationTimestamp"),
            labels=str_map(meta.get("labels"), "metadata.labels"),
            annotations=annotations,
            recorded_succeeded=status_count(obj, "succeeded"),
            recorded_failed=status_count(obj, "failed"),
            recorded_phase=_status_phase(obj),
            api=GangApi.VOLCANO,
            topology=_volcano_topology(spec) or topology_from_annotations(annotations),
            queue=as_str(spec.get("queue"), "spec.queue"),
            priority_class_name=as_str(spec.get("priorityClassName"), "spec.priorityClassName"),
        )
    except (FieldError, TopologyAnnotationError) as err:
        raise InvalidObject("PodGroup", f"{namespace}/{name}", err.field, err.message) from err
    except QuantityError as err:
        message = f"invalid quantity {shown(err.value)}: {err.why}"
        raise InvalidObject("PodGroup", f"{namespace}/{name}", err.field, message) from err


def _status_phase(obj: Mapping[str, object]) -> str:
    status = obj.get("status")
    phase = status.get("phase") if isinstance(status, Mapping) else None
    return phase if isinstance(phase, str) else ""


def _volcano_topology(spec: Mapping[str, object]) -> TopologyRequest | None:
    field = "spec.networkTopology"
    if spec.get("networkTopology") is None:
        return None
    topology = as_map(spec.get("networkTopology"), field)
    mode = as_str(topology.get("mode"), f"{field}.mode", "hard")
    if mode not in ("hard", "soft"):
        raise FieldError(f"{field}.mode", f"must be hard or soft, got {shown(mode)}")
    tier = topology.get("highestTierAllowed", 1)
    return TopologyRequest(
        "",
        required=mode == "hard",
        tier=int32_field(tier, f"{field}.highestTierAllowed", minimum=1),
    )


def kueue_group(pod: PodView, name: str) -> PodGroupView:
    """The group a Kueue plain pod names, as the pod describes it; `InvalidObject` (on the
    pod) when its total-count annotation is missing or not a positive integer."""
    try:
        total = _kueue_total(pod.annotations.get(KUEUE_TOTAL_ANNOTATION))
        topology = _kueue_topology(pod.annotations) or topology_from_annotations(pod.annotations)
    except (FieldError, TopologyAnnotationError) as err:
        raise InvalidObject("Pod", pod.key, err.field, err.message) from err
    return PodGroupView(
        namespace=pod.namespace,
        name=name,
        uid=f"kueue:{pod.namespace}/{name}",
        min_member=total,
        min_resources=Resources(),
        schedule_timeout_seconds=None,
        creation_time=pod.creation_time,
        labels={},
        annotations={},
        api=GangApi.KUEUE,
        topology=topology,
        queue=pod.labels.get(KUEUE_QUEUE_LABEL, ""),
        priority_class_name=pod.priority_class_name,
        event_pod=pod.name,
    )


def _kueue_total(value: str | None) -> int:
    field = f"metadata.annotations[{KUEUE_TOTAL_ANNOTATION}]"
    if value is None:
        raise FieldError(field, "required on every pod of a Kueue pod group: the group's size")
    if not value.strip().isdigit() or int(value) < 1:
        raise FieldError(field, f"must be a positive integer, got {shown(value)}")
    return int32_field(int(value), field, minimum=1)


def _kueue_topology(annotations: Mapping[str, str]) -> TopologyRequest | None:
    required = annotations.get(KUEUE_REQUIRED_TOPOLOGY)
    preferred = annotations.get(KUEUE_PREFERRED_TOPOLOGY)
    if required and preferred:
        raise FieldError(
            f"metadata.annotations[{KUEUE_REQUIRED_TOPOLOGY}]",
            f"{KUEUE_REQUIRED_TOPOLOGY} and {KUEUE_PREFERRED_TOPOLOGY} both set; keep one",
        )
    if required:
        return TopologyRequest(required.strip(), required=True)
    if preferred:
        return TopologyRequest(preferred.strip(), required=False)
    return None
