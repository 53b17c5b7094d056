"""Pods as the chaos checker reads them: raw API objects to `PodState`, what a pod holds on
its node, and when it counts as finished. Purely computational; quantities are parsed with
`batchsched.model.quantity` (the only scheduler code the checker shares)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

from batchsched.model.quantity import QuantityError, milli_value

GROUP_LABELS: Final = ("scheduling.x-k8s.io/pod-group", "pod-group.scheduling.sigs.k8s.io")
TERMINAL: Final = frozenset({"Succeeded", "Failed"})


@dataclass
class PodState:
    uid: str
    key: str  # namespace/name
    gang: str | None  # namespace/group
    node: str
    phase: str
    deleting: bool
    requests: dict[str, int]  # milli-units


def parse_pod(obj: Mapping[str, object]) -> PodState:
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    labels = meta.get("labels")
    labels = labels if isinstance(labels, Mapping) else {}
    namespace = str(meta.get("namespace", ""))
    group = next((labels[k] for k in GROUP_LABELS if isinstance(labels.get(k), str)), None)
    return PodState(
        uid=str(meta.get("uid", "")),
        key=f"{namespace}/{meta.get('name', '')}",
        gang=f"{namespace}/{group}" if group else None,
        node=str_at(obj, "spec", "nodeName"),
        phase=str_at(obj, "status", "phase") or "Pending",
        deleting=bool(meta.get("deletionTimestamp")),
        requests=pod_requests(obj),
    )


def pod_requests(obj: Mapping[str, object]) -> dict[str, int]:
    """What a pod holds on its node, in milli-units: the larger of its containers' sum and
    its biggest init container, plus overhead, plus one `pods`."""
    spec = obj.get("spec")
    spec = spec if isinstance(spec, Mapping) else {}
    total: dict[str, int] = {}
    for container in _list(spec.get("containers")):
        for name, amount in _container_requests(container).items():
            total[name] = total.get(name, 0) + amount
    for container in _list(spec.get("initContainers")):
        for name, amount in _container_requests(container).items():
            total[name] = max(total.get(name, 0), amount)
    overhead = spec.get("overhead")
    for name, amount in amounts(overhead if isinstance(overhead, Mapping) else {}).items():
        total[name] = total.get(name, 0) + amount
    total["pods"] = 1000
    return total


def _container_requests(container: object) -> dict[str, int]:
    resources = container.get("resources") if isinstance(container, Mapping) else None
    resources = resources if isinstance(resources, Mapping) else {}
    requests = resources.get("requests")
    limits = resources.get("limits")
    # Requests default to limits where only a limit is given (the API server fills them in).
    merged = dict(limits) if isinstance(limits, Mapping) else {}
    merged.update(requests if isinstance(requests, Mapping) else {})
    return amounts(merged)


def amounts(values: Mapping[object, object]) -> dict[str, int]:
    out = {}
    for name, value in values.items():
        if isinstance(value, str | int | float):
            try:
                out[str(name)] = milli_value(value, str(name))
            except QuantityError:
                continue
    return out


def finished_by_itself(pod: PodState) -> bool:
    """Succeeded, or Failed before any deletion began (then it was killed, not finished)."""
    return pod.phase == "Succeeded" or (pod.phase == "Failed" and not pod.deleting)


def clock(epoch: float) -> str:
    """Wall-clock time of day in UTC, as the API server's audit log and the logs write it."""
    return datetime.fromtimestamp(epoch, UTC).strftime("%H:%M:%S.%f")[:-3]


def occupies(pod: PodState) -> bool:
    """Bound and not finished: it holds its requests on its node."""
    return bool(pod.node) and pod.phase not in TERMINAL


def _list(value: object) -> list[object]:
    return list(value) if isinstance(value, list) else []


def str_at(obj: Mapping[str, object], section: str, name: str) -> str:
    part = obj.get(section)
    value = part.get(name) if isinstance(part, Mapping) else None
    return value if isinstance(value, str) else ""
