"""The scheduler cache: watch events and assumed placements folded into one live Snapshot.

A pod the scheduler places goes through kube-scheduler's assume state machine:

    assume ──finish_binding──> binding finished
      │                            ├── add_pod / update_pod ──> confirmed: an ordinary bound pod
      │                            ├── remove_pod (deleted before the watch confirmed it) ──> gone
      │                            └── cleanup_expired() past a deadline, only with a ttl ──> gone
      └── forget (binding failed) ──> gone

A pod whose Binding the API server accepted is bound: it never expires by default (kube-scheduler
has not expired those since 1.23, durationToExpireAssumedPod = 0). A watch that reconnects
slowly after an API server restart must not free the GPUs of pods that are already bound; the
relist that follows delivers the pod, bound or deleted.

Pods counted by the snapshot are always on exactly one node. A bound pod whose node the cache
does not know (not seen yet, or deleted) waits aside and is counted when the node arrives.
Everything is synchronous: on a single-threaded asyncio loop no cycle sees a half-applied event.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Protocol

from batchsched.clock import Clock
from batchsched.model.node import NodeView
from batchsched.model.pod import PodView
from batchsched.snapshot import Snapshot
from gpu.topology import GpuLoad, NodeTopology

log = logging.getLogger(__name__)


@dataclass(slots=True)
class _Assumed:
    node_name: str
    deadline: float | None = None  # set by finish_binding; until then the pod never expires


class CacheWatcher(Protocol):
    """Told when a pod starts or stops being counted, and when the node set changes (the
    tenant layer's usage and capacity follow the cache this way)."""

    def counted(self, pod: PodView) -> None: ...

    def uncounted(self, pod: PodView) -> None: ...

    def recounted(self, old: PodView, new: PodView) -> None:
        """`uncounted(old)` then `counted(new)`, in one call a watcher may make cheaper."""
        ...

    def nodes_changed(self) -> None: ...


class SchedulerCache:
    """Nodes and bound pods from the watch, plus pods assumed by the scheduler."""

    def __init__(self, clock: Clock, assume_ttl: float | None = None) -> None:
        self.snapshot = Snapshot(())
        self._clock = clock
        self._ttl = assume_ttl
        # Every pod the cache counts or keeps aside, by uid, as bound to its node.
        self._pods: dict[str, PodView] = {}
        self._assumed: dict[str, _Assumed] = {}
        # Node name -> uid -> pod, for pods whose node is not in the snapshot.
        self._aside: dict[str, dict[str, PodView]] = {}
        self.watchers: list[CacheWatcher] = []

    # Nodes

    def add_node(self, node: NodeView) -> None:
        for watcher in self.watchers:
            watcher.nodes_changed()
        if self.snapshot.get(node.name) is not None:
            self.snapshot.update_node(node)
            return
        self.snapshot.add_node(node)
        for pod in self._aside.pop(node.name, {}).values():
            self.snapshot.assume(pod, node.name)

    def update_node(self, old: NodeView, new: NodeView) -> None:
        # An update for a node we never saw (a missed add) is as good as an add.
        self.add_node(new)

    def remove_node(self, node: NodeView) -> None:
        if self.snapshot.get(node.name) is None:
            return
        for watcher in self.watchers:
            watcher.nodes_changed()
        waiting = self._aside.setdefault(node.name, {})
        for pod in self.snapshot.remove_node(node.name):
            # Pods the runner reserved but nobody assumed are not ours to keep.
            if pod.uid in self._pods:
                waiting[pod.uid] = pod
        if not waiting:
            del self._aside[node.name]
        log.debug("node removed node=%s pods_aside=%d", node.name, len(waiting))

    def set_measured_topology(self, node_name: str, topology: NodeTopology | None) -> None:
        """The node agent's GPU topology for a node, or None to fall back to its labels."""
        self.snapshot.set_measured_topology(node_name, topology)

    def set_gpu_load(self, node_name: str, load: tuple[GpuLoad, ...] | None) -> None:
        """The GPUs' measured load on a node, or None when none is published."""
        self.snapshot.version += 1
        if load is None:
            self.snapshot.gpu_load.pop(node_name, None)
        else:
            self.snapshot.gpu_load[node_name] = load

    # Bound pods from the watch

    def add_pod(self, pod: PodView) -> None:
        if not pod.node_name:
            raise ValueError(f"pod {pod.key} is not bound; the cache only takes bound pods")
        if pod.is_finished:
            self._drop(pod.uid)
            return
        assumed = self._assumed.pop(pod.uid, None)
        if assumed is not None and assumed.node_name != pod.node_name:
            log.info(
                "assumed pod bound elsewhere pod=%s assumed=%s bound=%s",
                pod.key,
                assumed.node_name,
                pod.node_name,
            )
        self._replace(pod)

    def update_pod(self, old: PodView, new: PodView) -> None:
        # Resources, labels or deletionTimestamp may change: recount the new version. A
        # terminating pod still holds its resources until it is deleted; a finished one does not.
        self.add_pod(new)

    def remove_pod(self, pod: PodView) -> None:
        self._drop(pod.uid)

    # Pods the scheduler placed

    def assume(self, pod: PodView, node_name: str) -> PodView:
        """Count `pod` on `node_name` now; returns the pod as bound there.

        `ProfileRunner.schedule_one` has usually reserved it in this snapshot already; then the
        cache only records it as assumed.
        """
        uid = pod.uid
        known = self._pods.get(uid)
        if known is not None:
            raise ValueError(f"pod {pod.key} is already in the cache on {known.node_name}")
        reserved = self.snapshot.node_of(uid)
        if reserved is None:
            if self.snapshot.get(node_name) is None:
                raise ValueError(f"cannot assume pod {pod.key} on unknown node {node_name}")
            bound = self.snapshot.assume(pod, node_name)
        elif reserved.name == node_name:
            bound = reserved.pods[uid]
        else:
            raise ValueError(f"pod {pod.key} is reserved on {reserved.name}, not {node_name}")
        self._pods[uid] = bound
        self._assumed[uid] = _Assumed(node_name)
        for watcher in self.watchers:
            watcher.counted(bound)
        return bound

    def finish_binding(self, pod: PodView) -> None:
        """The Binding was accepted. With an `assume_ttl` the watch has that long to confirm
        it; without one (the default) the pod stays counted until the watch says otherwise."""
        assumed = self._assumed.get(pod.uid)
        if assumed is not None and self._ttl is not None:
            assumed.deadline = self._clock.now() + self._ttl

    def forget(self, pod: PodView) -> None:
        """Binding failed: stop counting the pod (a confirmed pod is left alone)."""
        uid = pod.uid
        if self._assumed.pop(uid, None) is not None:
            self._uncount(uid)
        elif uid in self._pods:
            log.warning("not forgetting a pod the API confirmed pod=%s", pod.key)
        elif self.snapshot.node_of(uid) is not None:
            self.snapshot.forget(pod)  # reserved by the runner, never assumed

    def cleanup_expired(self) -> list[PodView]:
        """Drop assumed pods whose binding finished more than `assume_ttl` ago unconfirmed."""
        now = self._clock.now()
        expired = [
            uid
            for uid, assumed in self._assumed.items()
            if assumed.deadline is not None and now > assumed.deadline
        ]
        gone = []
        for uid in expired:
            del self._assumed[uid]
            gone.append(self._uncount(uid))
        return gone

    def is_assumed(self, uid: str) -> bool:
        return uid in self._assumed

    def assumed_uids(self) -> frozenset[str]:
        """Pods placed by us that no watch event has shown bound yet."""
        return frozenset(self._assumed)

    def assumed_count(self) -> int:
        return len(self._assumed)

    # Counting

    def _drop(self, uid: str) -> None:
        self._assumed.pop(uid, None)
        if uid in self._pods:
            self._uncount(uid)

    def _replace(self, pod: PodView) -> None:
        if pod.uid in self._pods:
            old = self._uncount(pod.uid, tell=False)
            for watcher in self.watchers:
                watcher.recounted(old, pod)  # the watch confirming our own binding, mostly
        else:
            reserved = self.snapshot.node_of(pod.uid)
            if reserved is not None:  # reserved by the runner, now bound by the API
                self.snapshot.forget(reserved.pods[pod.uid])
            for watcher in self.watchers:
                watcher.counted(pod)
        self._pods[pod.uid] = pod
        if self.snapshot.get(pod.node_name) is not None:
            self.snapshot.assume(pod, pod.node_name)
        else:
            self._aside.setdefault(pod.node_name, {})[pod.uid] = pod

    def _uncount(self, uid: str, tell: bool = True) -> PodView:
        pod = self._pods.pop(uid)
        for watcher in self.watchers if tell else ():
            watcher.uncounted(pod)
        if self.snapshot.node_of(uid) is not None:
            self.snapshot.forget(pod)
            return pod
        # Not in the snapshot: aside, or already unreserved there by the runner.
        waiting = self._aside.get(pod.node_name, {})
        waiting.pop(uid, None)
        if not waiting:
            self._aside.pop(pod.node_name, None)
        return pod
