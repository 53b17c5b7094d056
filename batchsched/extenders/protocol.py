"""The extender wire format (k8s.io/kube-scheduler/extender/v1), encoded and decoded purely.

Go writes these structs without json tags, so the keys are the Go field names: ExtenderArgs
{Pod, Nodes, NodeNames}, ExtenderFilterResult {Nodes, NodeNames, FailedNodes,
FailedAndUnresolvableNodes, Error}, HostPriorityList [{Host, Score}], ExtenderBindingArgs
{PodName, PodNamespace, PodUID, Node}, ExtenderBindingResult {Error}, ExtenderPreemptionArgs
{Pod, NodeNameToVictims | NodeNameToMetaVictims} and ExtenderPreemptionResult
{NodeNameToMetaVictims}, whose victims are {Pods, NumPDBViolations} and a MetaPod is {UID}.

batchsched keeps parsed views, not the API objects, so the Pod and Node sent are rebuilt from
them: metadata (name, namespace, uid, labels, annotations), the pod's schedulerName, nodeName,
priority and one container holding its effective requests, and the node's allocatable.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from batchsched.model.node import NodeView
from batchsched.model.pod import PodView

MAX_EXTENDER_PRIORITY: Final = 10  # extenderv1.MaxExtenderPriority
MAX_NODE_SCORE: Final = 100  # framework.MaxNodeScore

Json = dict[str, object]


class ProtocolError(ValueError):
    """An extender's answer that is not what the protocol says (or says Error)."""


@dataclass(frozen=True, slots=True)
class FilterAnswer:
    passed: frozenset[str]
    failed: Mapping[str, str] = field(default_factory=dict)
    unresolvable: Mapping[str, str] = field(default_factory=dict)


def pod_json(pod: PodView) -> Json:
    requests = pod.requests.to_dict()
    spec: Json = {
        "schedulerName": pod.scheduler_name,
        "priority": pod.priority,
        "containers": [{"name": "main", "resources": {"requests": requests, "limits": {}}}],
    }
    if pod.node_name:
        spec["nodeName"] = pod.node_name
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod.name,
            "namespace": pod.namespace,
            "uid": pod.uid,
            "labels": dict(pod.labels),
            "annotations": dict(pod.annotations),
        },
        "spec": spec,
        "status": {"phase": pod.phase or "Pending"},
    }


def node_json(node: NodeView) -> Json:
    allocatable = node.allocatable.to_dict()
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": node.name,
            "labels": dict(node.labels),
            "annotations": dict(node.annotations),
        },
        "spec": {"unschedulable": node.unschedulable} if node.unschedulable else {},
        "status": {"allocatable": allocatable, "capacity": allocatable},
    }


def extender_args(pod: PodView, nodes: Sequence[NodeView], node_cache_capable: bool) -> Json:
    """ExtenderArgs: node names to an extender that caches nodes, whole nodes otherwise."""
    if node_cache_capable:
        return {"Pod": pod_json(pod), "Nodes": None, "NodeNames": [n.name for n in nodes]}
    items = [node_json(n) for n in nodes]
    return {"Pod": pod_json(pod), "Nodes": {"items": items}, "NodeNames": None}


def binding_args(pod: PodView, node: str) -> Json:
    return {"PodName": pod.name, "PodNamespace": pod.namespace, "PodUID": pod.uid, "Node": node}


def parse_filter_result(body: object, node_cache_capable: bool) -> FilterAnswer:
    """ExtenderFilterResult -> the nodes that passed and why the others failed.

    As kube-scheduler reads it: NodeNames from a node-cache-capable extender, Nodes.items
    otherwise; a node in FailedAndUnresolvableNodes is not also counted as merely failed."""
    result = _object(body, "ExtenderFilterResult")
    if result.get("Error"):
        raise ProtocolError(f"extender error: {result['Error']}")
    failed = _string_map(result.get("FailedNodes"), "FailedNodes")
    unresolvable = _string_map(
        result.get("FailedAndUnresolvableNodes"), "FailedAndUnresolvableNodes"
    )
    failed = {name: why for name, why in failed.items() if name not in unresolvable}
    if node_cache_capable:
        names = result.get("NodeNames")
        passed = _strings(names, "NodeNames") if names is not None else []
    else:
        nodes = result.get("Nodes")
        items = _object(nodes, "Nodes").get("items") if nodes is not None else []
        passed = [_node_name(item, i) for i, item in enumerate(_list(items, "Nodes.items"))]
    return FilterAnswer(frozenset(passed), failed, unresolvable)


def parse_priorities(body: object) -> dict[str, int]:
    """HostPriorityList -> score per node (0..MaxExtenderPriority by contract, not clamped)."""
    scores: dict[str, int] = {}
    for i, item in enumerate(_list(body, "HostPriorityList")):
        entry = _object(item, f"HostPriorityList[{i}]")
        host, score = entry.get("Host"), entry.get("Score")
        if not isinstance(host, str) or not isinstance(score, int) or isinstance(score, bool):
            raise ProtocolError(f"HostPriorityList[{i}]: want {{Host: string, Score: integer}}")
        scores[host] = score
    return scores


def scaled(score: int, weight: int) -> int:
    """kube-scheduler: score * weight * (MaxNodeScore / MaxExtenderPriority)."""
    return score * weight * (MAX_NODE_SCORE // MAX_EXTENDER_PRIORITY)


def preemption_args(
    pod: PodView,
    victims: Mapping[str, tuple[Sequence[PodView], int]],
    node_cache_capable: bool,
) -> Json:
    """ExtenderPreemptionArgs from {node: (victims, PDB violations)}: victims' UIDs to an
    extender that caches nodes (NodeNameToMetaVictims), whole Pods otherwise."""
    if node_cache_capable:
        meta = {
            node: {"Pods": [{"UID": v.uid} for v in pods], "NumPDBViolations": violations}
            for node, (pods, violations) in victims.items()
        }
        return {"Pod": pod_json(pod), "NodeNameToVictims": None, "NodeNameToMetaVictims": meta}
    full = {
        node: {"Pods": [pod_json(v) for v in pods], "NumPDBViolations": violations}
        for node, (pods, violations) in victims.items()
    }
    return {"Pod": pod_json(pod), "NodeNameToVictims": full, "NodeNameToMetaVictims": None}


def parse_preemption_result(body: object) -> dict[str, frozenset[str]]:
    """ExtenderPreemptionResult -> the victims' UIDs the extender kept, by node (the nodes it
    left out are no candidates any more; a node with no victims is kept with none)."""
    result = _object(body, "ExtenderPreemptionResult")
    nodes = result.get("NodeNameToMetaVictims")
    kept: dict[str, frozenset[str]] = {}
    for node, victims in (_object(nodes, "NodeNameToMetaVictims") if nodes else {}).items():
        where = f"NodeNameToMetaVictims[{node}]"
        pods = _object(victims, where).get("Pods") if victims is not None else None
        uids = []
        for i, meta in enumerate(_list(pods, f"{where}.Pods")):
            uid = _object(meta, f"{where}.Pods[{i}]").get("UID")
            if not isinstance(uid, str):
                raise ProtocolError(f"{where}.Pods[{i}].UID: want a string")
            uids.append(uid)
        kept[str(node)] = frozenset(uids)
    return kept


def parse_binding_result(body: object) -> None:
    result = _object(body, "ExtenderBindingResult")
    if result.get("Error"):
        raise ProtocolError(f"extender bind error: {result['Error']}")


def _object(value: object, what: str) -> Mapping[str, object]:
    if not isinstance(value, Mapping):
        raise ProtocolError(f"{what}: want a JSON object, got {type(value).__name__}")
    return value


def _list(value: object, what: str) -> list[object]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ProtocolError(f"{what}: want a JSON array, got {type(value).__name__}")
    return value


def _strings(value: object, what: str) -> list[str]:
    items = _list(value, what)
    if not all(isinstance(s, str) for s in items):
        raise ProtocolError(f"{what}: want an array of strings")
    return [str(s) for s in items]


def _string_map(value: object, what: str) -> dict[str, str]:
    if value is None:
        return {}
    mapping = _object(value, what)
    if not all(isinstance(v, str) for v in mapping.values()):
        raise ProtocolError(f"{what}: want an object of strings")
    return {str(k): str(v) for k, v in mapping.items()}


def _node_name(item: object, i: int) -> str:
    meta = _object(item, f"Nodes.items[{i}]").get("metadata")
    name = _object(meta, f"Nodes.items[{i}].metadata").get("name")
    if not isinstance(name, str):
        raise ProtocolError(f"Nodes.items[{i}].metadata.name: want a string")
    return name
