"""Small builders for API dicts and views: `make_pod("a").cpu("1").gpus(2).view()`."""

from __future__ import annotations

import copy
from typing import Any

from batchsched.model.node import NodeView, parse_node
from batchsched.model.pod import PodView, parse_pod
from batchsched.snapshot import Snapshot


class PodBuilder:
    def __init__(self, name: str, namespace: str = "default") -> None:
        self._obj: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{namespace}-{name}"},
            "spec": {
                "schedulerName": "gpu-scheduler",
                "containers": [{"name": "main", "image": "busybox"}],
            },
        }

    @property
    def _spec(self) -> dict[str, Any]:
        return self._obj["spec"]  # type: ignore[no-any-return]

    @property
    def _main(self) -> dict[str, Any]:
        return self._spec["containers"][0]  # type: ignore[no-any-return]

    def req(self, name: str, quantity: str | int) -> PodBuilder:
        self._main.setdefault("resources", {}).setdefault("requests", {})[name] = quantity
        return self

    def cpu(self, quantity: str) -> PodBuilder:
        return self.req("cpu", quantity)

    def memory(self, quantity: str) -> PodBuilder:
        return self.req("memory", quantity)

    def gpus(self, count: int) -> PodBuilder:
        # Extended resources need limit == request, or the API server refuses the pod.
        self._main.setdefault("resources", {}).setdefault("limits", {})["nvidia.com/gpu"] = count
        return self.req("nvidia.com/gpu", count)

    def label(self, key: str, value: str) -> PodBuilder:
        self._obj["metadata"].setdefault("labels", {})[key] = value
        return self

    def annotation(self, key: str, value: str) -> PodBuilder:
        self._obj["metadata"].setdefault("annotations", {})[key] = value
        return self

    def created(self, timestamp: str) -> PodBuilder:
        self._obj["metadata"]["creationTimestamp"] = timestamp
        return self

    def scheduler(self, name: str) -> PodBuilder:
        self._spec["schedulerName"] = name
        return self

    def node(self, name: str) -> PodBuilder:
        """Already bound to `name` (a running pod)."""
        self._spec["nodeName"] = name
        self._obj.setdefault("status", {})["phase"] = "Running"
        return self

    def phase(self, phase: str) -> PodBuilder:
        self._obj.setdefault("status", {})["phase"] = phase
        return self

    def priority(self, value: int) -> PodBuilder:
        self._spec["priority"] = value
        return self

    def node_selector(self, **labels: str) -> PodBuilder:
        self._spec.setdefault("nodeSelector", {}).update(labels)
        return self

    def toleration(
        self, key: str = "", value: str = "", effect: str = "", operator: str = "Equal"
    ) -> PodBuilder:
        item = {"key": key, "operator": operator, "value": value, "effect": effect}
        self._spec.setdefault("tolerations", []).append({k: v for k, v in item.items() if v})
        return self

    def host_port(self, port: int, protocol: str = "TCP", ip: str = "") -> PodBuilder:
        entry: dict[str, Any] = {"containerPort": port, "hostPort": port, "protocol": protocol}
        if ip:
            entry["hostIP"] = ip
        self._main.setdefault("ports", []).append(entry)
        return self

    def image(self, name: str) -> PodBuilder:
        self._main["image"] = name
        return self

    def container(self, name: str, image: str = "busybox", **requests: str) -> PodBuilder:
        entry: dict[str, Any] = {"name": name, "image": image}
        if requests:
            entry["resources"] = {"requests": dict(requests)}
        self._spec["containers"].append(entry)
        return self

    def affinity(self, kind: str, value: dict[str, Any]) -> PodBuilder:
        """kind: nodeAffinity | podAffinity | podAntiAffinity, value as in the API."""
        self._spec.setdefault("affinity", {})[kind] = value
        return self

    def spread(
        self,
        max_skew: int,
        topology_key: str,
        when: str = "DoNotSchedule",
        match_labels: dict[str, str] | None = None,
        **extra: Any,
    ) -> PodBuilder:
        item: dict[str, Any] = {
            "maxSkew": max_skew,
            "topologyKey": topology_key,
            "whenUnsatisfiable": when,
            "labelSelector": {"matchLabels": match_labels or {}},
        }
        item.update(extra)
        self._spec.setdefault("topologySpreadConstraints", []).append(item)
        return self

    def set(self, path: str, value: Any) -> PodBuilder:
        """Set any field by dotted path, e.g. set("spec.overhead", {"cpu": "100m"})."""
        target = self._obj
        *parents, last = path.split(".")
        for key in parents:
            target = target.setdefault(key, {})
        target[last] = value
        return self

    def obj(self) -> dict[str, Any]:
        return copy.deepcopy(self._obj)

    def view(self) -> PodView:
        return parse_pod(self._obj)


class NodeBuilder:
    def __init__(self, name: str) -> None:
        self._obj: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "spec": {},
            "status": {"allocatable": {"cpu": "4", "memory": "32Gi", "pods": "110"}},
        }

    def res(self, name: str, quantity: str | int) -> NodeBuilder:
        self._obj["status"]["allocatable"][name] = quantity
        return self

    def cpu(self, quantity: str) -> NodeBuilder:
        return self.res("cpu", quantity)

    def memory(self, quantity: str) -> NodeBuilder:
        return self.res("memory", quantity)

    def pods(self, count: int) -> NodeBuilder:
        return self.res("pods", str(count))

    def gpus(self, count: int) -> NodeBuilder:
        return self.res("nvidia.com/gpu", str(count))

    def label(self, key: str, value: str) -> NodeBuilder:
        self._obj["metadata"]["labels"][key] = value
        return self

    def zone(self, zone: str) -> NodeBuilder:
        return self.label("topology.kubernetes.io/zone", zone)

    def taint(self, key: str, value: str = "", effect: str = "NoSchedule") -> NodeBuilder:
        self._obj["spec"].setdefault("taints", []).append(
            {"key": key, "value": value, "effect": effect}
        )
        return self

    def unschedulable(self) -> NodeBuilder:
        self._obj["spec"]["unschedulable"] = True
        return self

    def annotation(self, key: str, value: str) -> NodeBuilder:
        self._obj["metadata"].setdefault("annotations", {})[key] = value
        return self

    def image(self, names: list[str], size_bytes: int) -> NodeBuilder:
        self._obj["status"].setdefault("images", []).append(
            {"names": names, "sizeBytes": size_bytes}
        )
        return self

    def obj(self) -> dict[str, Any]:
        return copy.deepcopy(self._obj)

    def view(self) -> NodeView:
        return parse_node(self._obj)


def make_pod(name: str = "pod", namespace: str = "default") -> PodBuilder:
    return PodBuilder(name, namespace)


def make_node(name: str = "node") -> NodeBuilder:
    return NodeBuilder(name)


def snapshot_of(
    nodes: list[NodeBuilder],
    pods: list[PodBuilder] = (),  # type: ignore[assignment]
    namespaces: dict[str, dict[str, str]] | None = None,
) -> Snapshot:
    return Snapshot([n.view() for n in nodes], [p.view() for p in pods], namespaces)
