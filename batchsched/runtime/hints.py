"""Queueing hints: which parked pods a cluster event can help, as kube-scheduler's
QueueingHint functions answer it. Purely computational.

A pod parked as unschedulable goes back to be tried only when an event could make it fit.
A hint may say yes when the event does not help in the end (a wasted cycle); it must never
say no when it could help, or the pod would wait for the periodic flush. So each hint is a
cheap necessary condition, not a fit check.
"""

from __future__ import annotations

from collections.abc import Callable

from batchsched.model.node import NodeView
from batchsched.model.pod import PodView
from batchsched.model.resources import PODS

Hint = Callable[[PodView], bool]


def _depends_on_other_pods(pod: PodView) -> bool:
    return bool(pod.pod_affinity or pod.pod_anti_affinity or pod.spread_constraints)


def after_pod_gone(gone: PodView, node_was_full: bool) -> Hint:
    """An assigned pod finished or was deleted: it freed what it requested on its node, and a
    pod slot. Helps a pod that asks for any of what it freed, one that failed on a full node's
    pod count, one whose host ports it may have held, and one whose affinity or spread counts
    pods."""
    freed = frozenset(name for name in gone.requests.names() if name != PODS)
    ports = bool(gone.host_ports)

    def helps(waiting: PodView) -> bool:
        if node_was_full or _depends_on_other_pods(waiting):
            return True
        if ports and waiting.host_ports:
            return True
        return any(name in freed for name in waiting.requests.names())

    return helps


def after_node_change(new: NodeView) -> Hint:
    """A node was added, or changed in what scheduling reads (allocatable, labels, taints,
    unschedulable): it can help only a pod whose request the node could hold when empty."""
    allocatable = new.allocatable

    def helps(waiting: PodView) -> bool:
        return not waiting.requests.insufficient(allocatable)

    return helps
