"""Which gang a pod says it belongs to, in each encoding users' tools produce.

A pod joins a gang through a label, an annotation or a spec field, depending on who made it:

- SCHEDULER_PLUGINS: label scheduling.x-k8s.io/pod-group (before v0.24:
  pod-group.scheduling.sigs.k8s.io);
- KUBERNETES: spec.schedulingGroup.podGroupName (scheduling.k8s.io/v1alpha2, Kubernetes 1.36);
- VOLCANO: annotation scheduling.k8s.io/group-name (or scheduling.volcano.sh/group-name);
- KUEUE: label kueue.x-k8s.io/pod-group-name, with the group's size in the annotation
  kueue.x-k8s.io/pod-group-total-count.

A pod that names groups in two encodings is refused when it is parsed (an Event says so):
the scheduler does not guess which one the user meant.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Final

from batchsched.model.fields import FieldError


class GangApi(Enum):
    """The API a gang was described in; its status is written back in that API's terms."""

    SCHEDULER_PLUGINS = "scheduling.x-k8s.io/v1alpha1"  # PodGroup (Kubeflow, scheduler-plugins)
    KUBERNETES = "scheduling.k8s.io/v1alpha2"  # upstream PodGroup (KEP-4671, 1.36)
    VOLCANO = "scheduling.volcano.sh/v1beta1"  # Volcano PodGroup
    KUEUE = "kueue.x-k8s.io/pod-group"  # Kueue plain-pod group: labels on pods, no object

    @property
    def prefix(self) -> str:
        """What a gang key starts with: nothing for scheduler-plugins' PodGroups (the keys
        they always had), the API's short name for the others."""
        return _PREFIXES[self]

    @property
    def title(self) -> str:
        return _TITLES[self]


_PREFIXES: Final = {
    GangApi.SCHEDULER_PLUGINS: "",
    GangApi.KUBERNETES: "k8s:",
    GangApi.VOLCANO: "volcano:",
    GangApi.KUEUE: "kueue:",
}
_TITLES: Final = {
    GangApi.SCHEDULER_PLUGINS: "scheduler-plugins PodGroup",
    GangApi.KUBERNETES: "scheduling.k8s.io PodGroup",
    GangApi.VOLCANO: "Volcano PodGroup",
    GangApi.KUEUE: "Kueue pod group",
}

POD_GROUP_LABEL: Final = "scheduling.x-k8s.io/pod-group"
# The label of scheduler-plugins releases before the API moved to x-k8s.io (v0.24 and older).
LEGACY_POD_GROUP_LABEL: Final = "pod-group.scheduling.sigs.k8s.io"
VOLCANO_GROUP_ANNOTATION: Final = "scheduling.k8s.io/group-name"
VOLCANO_GROUP_ANNOTATION_NEW: Final = "scheduling.volcano.sh/group-name"
KUEUE_GROUP_LABEL: Final = "kueue.x-k8s.io/pod-group-name"
KUEUE_TOTAL_ANNOTATION: Final = "kueue.x-k8s.io/pod-group-total-count"


@dataclass(frozen=True, slots=True)
class GangRef:
    api: GangApi
    name: str

    def key(self, namespace: str) -> str:
        return gang_key(self.api, namespace, self.name)


def gang_key(api: GangApi, namespace: str, name: str) -> str:
    """The gang's key: "namespace/name", prefixed for every API but scheduler-plugins'."""
    return f"{api.prefix}{namespace}/{name}"


def split_gang_key(key: str) -> tuple[GangApi, str, str]:
    """(api, namespace, name) of a key `gang_key` made."""
    api = GangApi.SCHEDULER_PLUGINS
    for candidate, prefix in _PREFIXES.items():
        if prefix and key.startswith(prefix):
            api, key = candidate, key[len(prefix) :]
            break
    namespace, name = key.split("/", 1)
    return api, namespace, name


def gang_refs(
    labels: Mapping[str, str], annotations: Mapping[str, str], scheduling_group: str
) -> list[GangRef]:
    """Every group the pod names, one per encoding (within an encoding, the current key wins
    over the older one, as those releases do)."""
    refs = []
    sp = labels.get(POD_GROUP_LABEL) or labels.get(LEGACY_POD_GROUP_LABEL)
    if sp:
        refs.append(GangRef(GangApi.SCHEDULER_PLUGINS, sp))
    if scheduling_group:
        refs.append(GangRef(GangApi.KUBERNETES, scheduling_group))
    volcano = annotations.get(VOLCANO_GROUP_ANNOTATION) or annotations.get(
        VOLCANO_GROUP_ANNOTATION_NEW
    )
    if volcano:
        refs.append(GangRef(GangApi.VOLCANO, volcano))
    kueue = labels.get(KUEUE_GROUP_LABEL)
    if kueue:
        refs.append(GangRef(GangApi.KUEUE, kueue))
    return refs


def check_one_gang(
    labels: Mapping[str, str], annotations: Mapping[str, str], scheduling_group: str
) -> None:
    """FieldError when the pod names groups in more than one encoding."""
    refs = gang_refs(labels, annotations, scheduling_group)
    if len(refs) > 1:
        named = " and ".join(f"{r.api.title} {r.name!r}" for r in refs)
        raise FieldError(
            "metadata",
            f"the pod names two gangs ({named}); a pod may join one gang: remove all but one",
        )
