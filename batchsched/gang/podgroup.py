"""The lean PodGroup view every gang encoding is read into, and scheduler-plugins' PodGroup.

`parse_pod_group` reads scheduling.x-k8s.io/v1alpha1 (what Kubeflow's training operator and
KubeRay create in their scheduler-plugins modes); gang/encodings.py reads the upstream,
Volcano and Kueue encodings into the same view. Parsing is strict where the scheduler must
not guess: a PodGroup it cannot read is reported with the field and the value, and is not
scheduled.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from batchsched.gang.topology import (
    TopologyAnnotationError,
    TopologyRequest,
    topology_from_annotations,
)
from batchsched.model.errors import InvalidObject
from batchsched.model.fields import (
    FieldError,
    as_map,
    as_str,
    metadata,
    object_name,
    shown,
    str_map,
    timestamp,
)
from batchsched.model.gang_ref import (
    LEGACY_POD_GROUP_LABEL,
    POD_GROUP_LABEL,
    GangApi,
    gang_key,
    gang_refs,
)
from batchsched.model.pod import PodView
from batchsched.model.quantity import QuantityError
from batchsched.model.resources import Resources

__all__ = [
    "API_VERSION",
    "KIND",
    "LEGACY_POD_GROUP_LABEL",
    "PHASES",
    "POD_GROUP_LABEL",
    "GangApi",
    "PodGroupView",
    "gang_key",
    "parse_pod_group",
    "pod_group_of",
]

API_VERSION: Final = "scheduling.x-k8s.io/v1alpha1"
KIND: Final = "PodGroup"

PENDING: Final = "Pending"
SCHEDULING: Final = "Scheduling"
SCHEDULED: Final = "Scheduled"
RUNNING: Final = "Running"
FINISHED: Final = "Finished"
FAILED: Final = "Failed"
PHASES: Final = (PENDING, SCHEDULING, SCHEDULED, RUNNING, FINISHED, FAILED)

# The API declares minMember and scheduleTimeoutSeconds as int32.
_MAX_INT32: Final = 2**31 - 1


@dataclass(frozen=True, slots=True)
class PodGroupView:
    namespace: str
    name: str
    uid: str
    min_member: int
    min_resources: Resources
    schedule_timeout_seconds: int | None  # None: the scheduler's configured default
    creation_time: float
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    # status.succeeded / status.failed as the scheduler last wrote them (members that ran to
    # the end, deleted ones included): what a new leader knows of members gone before it.
    recorded_succeeded: int = 0
    recorded_failed: int = 0
    api: GangApi = GangApi.SCHEDULER_PLUGINS
    topology: TopologyRequest | None = None  # all members in one network domain
    queue: str = ""  # the producer's queue (Volcano's spec.queue): a tenant where one is named
    priority_class_name: str = ""
    # The upstream PodGroupScheduled condition's status as last read ("True", "False", "").
    scheduled: str = ""
    # A Kueue group has no object of its own: Events about it go to this member pod.
    event_pod: str = ""
    recorded_phase: str = ""  # status.phase as last read (Volcano's: it gates pod creation)
    # status.scheduled / status.running / status.scheduleStartTime as last read (scheduler-
    # plugins'): with the phase and the finished counts, what the object shows, so that a
    # status it already shows is not written again (gang/status.py, `shows`).
    recorded_scheduled: int = 0
    recorded_running: int = 0
    recorded_start: str = ""

    @property
    def key(self) -> str:
        """What `pod_group_of` returns for its members: "namespace/name", prefixed with the
        API's short name for every API but scheduler-plugins'."""
        return gang_key(self.api, self.namespace, self.name)

    def __hash__(self) -> int:
        # The label and annotation dicts are unhashable; identity is enough to hash by.
        return hash((self.namespace, self.name, self.uid))


def parse_pod_group(obj: Mapping[str, object]) -> PodGroupView:
    """Read a PodGroup as `kubectl get -o yaml` prints it; `InvalidObject` names the bad field.

    minMember must be at least 1 (scheduler-plugins' own bound; our CRD lets 0 through so that
    the scheduler, not the API server, tells the user), quantities must parse, and
    scheduleTimeoutSeconds, when given, must not be negative.
    """
    namespace, name = object_name(obj)
    try:
        meta, namespace, name = metadata(obj)
        spec = as_map(obj.get("spec"), "spec")
        return PodGroupView(
            namespace=namespace,
            name=name,
            uid=as_str(meta.get("uid"), "metadata.uid") or f"{namespace}/{name}",
            min_member=int32_field(spec.get("minMember"), "spec.minMember", minimum=1),
            min_resources=Resources.parse(
                as_map(spec.get("minResources"), "spec.minResources"), "spec.minResources"
            ),
            schedule_timeout_seconds=_optional_int32(
                spec.get("scheduleTimeoutSeconds"), "spec.scheduleTimeoutSeconds", minimum=0
            ),
            creation_time=timestamp(meta.get("creationTimestamp"), "metadata.creationTimestamp"),
            labels=str_map(meta.get("labels"), "metadata.labels"),
            annotations=str_map(meta.get("annotations"), "metadata.annotations"),
            recorded_succeeded=status_count(obj, "succeeded"),
            recorded_failed=status_count(obj, "failed"),
            recorded_phase=status_text(obj, "phase"),
            recorded_scheduled=status_count(obj, "scheduled"),
            recorded_running=status_count(obj, "running"),
            recorded_start=status_text(obj, "scheduleStartTime"),
            topology=topology_from_annotations(
                str_map(meta.get("annotations"), "metadata.annotations")
            ),
        )
    except (FieldError, TopologyAnnotationError) as err:
        raise InvalidObject(KIND, f"{namespace}/{name}", err.field, err.message) from err
    except QuantityError as err:
        message = f"invalid quantity {shown(err.value)}: {err.why}"
        raise InvalidObject(KIND, f"{namespace}/{name}", err.field, message) from err


def status_count(obj: Mapping[str, object], field: str) -> int:
    """A count from the status (ours to write, so never a reason to refuse the object): 0
    when absent or not a non-negative integer."""
    status = obj.get("status")
    value = status.get(field) if isinstance(status, Mapping) else None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return 0
    return value


def status_text(obj: Mapping[str, object], field: str) -> str:
    """A string from the status (ours to write): "" when absent or not a string."""
    status = obj.get("status")
    value = status.get(field) if isinstance(status, Mapping) else None
    return value if isinstance(value, str) else ""


def int32_field(value: object, field: str, *, minimum: int) -> int:
    # Strict, as the API server's schema is: "3" (a string) is not an integer here.
    if value is None:
        raise FieldError(field, f"required: an integer of at least {minimum}")
    if isinstance(value, bool) or not isinstance(value, int):
        raise FieldError(field, f"expected an integer, got {shown(value)}")
    if value < minimum:
        raise FieldError(field, f"must be at least {minimum}, got {value}")
    if value > _MAX_INT32:
        raise FieldError(field, f"must be at most {_MAX_INT32}, got {value}")
    return value


def _optional_int32(value: object, field: str, *, minimum: int) -> int | None:
    return None if value is None else int32_field(value, field, minimum=minimum)


def pod_group_of(pod: PodView) -> str | None:
    """The key of the pod's gang, in whichever encoding it names one; None if it joins none.

    A group is always in the pod's namespace. `parse_pod` refused pods naming two."""
    refs = gang_refs(pod.labels, pod.annotations, pod.scheduling_group)
    return refs[0].key(pod.namespace) if refs else None
