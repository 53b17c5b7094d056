"""Route watch events into the cache and the queue, as kube-scheduler's event handlers do.

Bound pods (spec.nodeName set, any scheduler) count in the cache; pending pods that name one
of our profiles wait in the queue; everything else is ignored. Cluster events that could
make an unschedulable pod fit move the unschedulable pool back.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from batchsched.cache import SchedulerCache
from batchsched.model.node import NodeView
from batchsched.model.pod import PodView
from batchsched.model.priority_class import PriorityClassView
from batchsched.runtime import hints
from batchsched.runtime.gangs import GangTracker
from batchsched.runtime.queue import SchedulingQueue
from gpu.nrt import MeasuredTopology

logger = logging.getLogger(__name__)


def _counts(pod: PodView) -> bool:
    return bool(pod.node_name) and not pod.is_finished


class PodEvents:
    def __init__(
        self,
        cache: SchedulerCache,
        queue: SchedulingQueue,
        admits: Callable[[PodView], bool],
        gangs: GangTracker | None = None,
    ) -> None:
        self.cache = cache
        self.queue = queue
        self.gangs = gangs if gangs is not None else GangTracker()
        self.admits = admits  # ours, and past the profile's PreEnqueue plugins (e.g. gates)
        self.gated: set[str] = set()  # uids of our pending pods that PreEnqueue holds back
        # Told when a pending pod is deleted (a preemptor's plan ends with it).
        self.pending_deleted: list[Callable[[PodView], None]] = []
        # Told when a counted pod stops counting (a victim gone: its preemptor may go now).
        self.assigned_gone: list[Callable[[PodView], None]] = []

    def _pending_ours(self, pod: PodView) -> bool:
        # A pod being deleted is not scheduled (binding it would only be refused), as in kube.
        if pod.node_name or pod.is_finished or pod.deleting:
            self.gated.discard(pod.uid)
            return False
        if self.admits(pod):
            self.gated.discard(pod.uid)
            return True
        if pod.scheduling_gates:
            self.gated.add(pod.uid)
        return False

    def on_add(self, pod: PodView) -> None:
        self.gangs.note_pod(pod)
        if _counts(pod):
            self.cache.add_pod(pod)
        elif self.cache.is_assumed(pod.uid):
            return  # placed by us and binding, or reserved at Permit: not queued again
        elif self._pending_ours(pod):
            self.queue.add(pod)

    def on_update(self, old: PodView, new: PodView) -> None:
        if old.uid != new.uid:  # recreated under the same name: another pod
            self.on_delete(old)
            self.on_add(new)
            return
        self.gangs.note_pod(new)
        if _counts(new):
            if _counts(old):
                self.cache.update_pod(old, new)
            else:
                # Bound now (our binding confirmed, or someone else bound it).
                self.queue.delete(old)
                self.cache.add_pod(new)
            return
        if _counts(old):
            # Finished: its resources are free for pods waiting on them.
            self._assigned_gone(old, "AssignedPodFinished")
        elif self.cache.is_assumed(new.uid) and not new.deleting:
            # Placed by us, binding or waiting at Permit for its gang: an update (our own
            # condition write, an annotation) must not put it back in the queue, or a later
            # cycle would place it a second time.
            return
        elif self._pending_ours(new):
            self.queue.update(old, new)
        elif self._pending_ours(old):
            self.queue.delete(old)

    def on_delete(self, pod: PodView) -> None:
        self.gated.discard(pod.uid)
        self.gangs.forget_pod(pod)
        if _counts(pod):
            self._assigned_gone(pod, "AssignedPodDelete")
        elif not pod.node_name:
            # Assumed (binding or waiting for its gang) but not yet seen bound: its place in
            # the cache goes with it.
            self.cache.remove_pod(pod)
            self.queue.delete(pod)
            for watcher in self.pending_deleted:
                watcher(pod)

    def _assigned_gone(self, pod: PodView, event: str) -> None:
        info = self.cache.snapshot.get(pod.node_name)
        full = info is not None and len(info.pods) >= info.alloc_pods
        self.cache.remove_pod(pod)
        self.queue.move_where(event, hints.after_pod_gone(pod, full))
        for watcher in self.assigned_gone:
            watcher(pod)


def _node_changed_for_scheduling(old: NodeView, new: NodeView) -> bool:
    return (
        old.allocatable != new.allocatable
        or old.labels != new.labels
        or old.taints != new.taints
        or old.unschedulable != new.unschedulable
    )


class NodeEvents:
    def __init__(self, cache: SchedulerCache, queue: SchedulingQueue) -> None:
        self.cache = cache
        self.queue = queue

    def on_add(self, node: NodeView) -> None:
        self.cache.add_node(node)
        self.queue.move_where("NodeAdd", hints.after_node_change(node))

    def on_update(self, old: NodeView, new: NodeView) -> None:
        self.cache.update_node(old, new)
        if _node_changed_for_scheduling(old, new):
            self.queue.move_where("NodeUpdate", hints.after_node_change(new))

    def on_delete(self, node: NodeView) -> None:
        self.cache.remove_node(node)


class PriorityClassEvents:
    """Keeps PriorityClass values; pods from the API already carry spec.priority."""

    def __init__(self) -> None:
        self.classes: dict[str, PriorityClassView] = {}

    def on_add(self, obj: PriorityClassView) -> None:
        self.classes[obj.name] = obj

    def on_update(self, old: PriorityClassView, new: PriorityClassView) -> None:
        self.classes[new.name] = new

    def on_delete(self, obj: PriorityClassView) -> None:
        self.classes.pop(obj.name, None)

    def values(self) -> Mapping[str, int]:
        return {name: c.value for name, c in self.classes.items()}


class TopologyEvents:
    """NodeResourceTopology objects from the node agent: a node's measured GPU topology
    replaces the one derived from its labels; without an object (or with one that has no GPU
    detail) the node falls back to its labels."""

    def __init__(self, cache: SchedulerCache, queue: SchedulingQueue) -> None:
        self.cache = cache
        self.queue = queue

    def on_add(self, measured: MeasuredTopology) -> None:
        self.cache.set_measured_topology(measured.node, measured.topology)
        self.cache.set_gpu_load(measured.node, measured.load)
        self.queue.move_all("NodeResourceTopologyAdd")

    def on_update(self, old: MeasuredTopology, new: MeasuredTopology) -> None:
        # Parsed topologies are cached by their text: the same object means the same GPUs,
        # and a heartbeat alone changes nothing. A new load only changes scores: it frees
        # nothing, so it moves no pod back to the queue.
        self.cache.set_gpu_load(new.node, new.load)
        if new.topology is not old.topology:
            self.cache.set_measured_topology(new.node, new.topology)
            self.queue.move_all("NodeResourceTopologyUpdate")

    def on_delete(self, measured: MeasuredTopology) -> None:
        self.cache.set_measured_topology(measured.node, None)
        self.cache.set_gpu_load(measured.node, None)
        self.queue.move_all("NodeResourceTopologyDelete")

    def drop(self, node_name: str) -> None:
        """A malformed object: its node goes back to its labels until a good one arrives."""
        self.cache.set_measured_topology(node_name, None)
        self.cache.set_gpu_load(node_name, None)
