"""The cluster as one scheduling cycle sees it, with a trial overlay for gangs and what-ifs.

A trial records every placement and removal in an undo log: `discard()` rolls them back,
`commit()` keeps them. Trials nest (a gang trial inside a preemption what-if), last in first out.

GPU nodes carry a `GpuLedger` (free milli-GPU per GPU, the GPUs each pod holds). A GPU pod
counted on a node gets a deterministic assignment (the lowest-index GPUs with room) unless one
is known; GpuTopology's Reserve then moves it to the GPUs it chose with `assign_gpus`, which is
undo-logged like placements, so a discarded trial gives back exactly the GPUs it had.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Final

from batchsched.dra.state import DraState
from batchsched.model.node import NodeView
from batchsched.model.pod import PodView, bound_to
from batchsched.node_info import NodeInfo, gpu_host, ledger_for
from gpu.ledger import Grants
from gpu.requests import counted_request
from gpu.topology import GpuLoad, NodeTopology

__all__ = ["NodeInfo", "Snapshot", "Trial"]

_ADD: Final = 1
_REMOVE: Final = 2
_REGRANT: Final = 3
# Grants the scheduler chose, remembered per pod so a pod the API confirms (forgotten, then
# counted again) keeps its GPUs; bounded, oldest dropped first.
_MAX_GPU_HINTS: Final = 65536
_MIN_CHANGES_KEPT: Final = 4096


class Snapshot:
    """Nodes in a stable order, the pods on them, and namespace labels for affinity terms."""

    def __init__(
        self,
        nodes: Iterable[NodeView],
        pods: Iterable[PodView] = (),
        namespace_labels: Mapping[str, Mapping[str, str]] | None = None,
    ) -> None:
        self.nodes: list[NodeInfo] = [NodeInfo(n) for n in nodes]
        # Every node given a new generation, in order (NodeInfo appends itself), so a cache
        # keyed by generations finds what changed in O(changed): `changed_since`. Bounded:
        # the oldest half goes when it outgrows the nodes, and a reader that far behind scans.
        self._changes: list[NodeInfo] = []
        self._changes_dropped = 0
        self.changes_kept: int | None = None  # the log's bound; None: from the node count
        for info in self.nodes:
            info.changes = self._changes
        self._by_name: dict[str, NodeInfo] = {info.name: info for info in self.nodes}
        self._where: dict[str, NodeInfo] = {}
        self.namespace_labels: Mapping[str, Mapping[str, str]] = namespace_labels or {}
        self.image_node_counts: dict[str, int] = {}
        for info in self.nodes:
            for image in info.node.image_sizes:
                self.image_node_counts[image] = self.image_node_counts.get(image, 0) + 1
        self.has_prefer_no_schedule_taints = any(
            t.effect == "PreferNoSchedule" for info in self.nodes for t in info.node.taints
        )
        # How many nodes carry such a taint, so node events can keep the flag above up to date.
        self._prefer_no_schedule_nodes = sum(_has_prefer_no_schedule(i.node) for i in self.nodes)
        self.pods_with_affinity = 0
        self.pods_with_required_anti_affinity = 0
        self.gpu_nodes = sum(1 for info in self.nodes if info.gpu is not None)
        # Node name -> the node agent's topology (NodeResourceTopology), nodes not seen included.
        self._measured: dict[str, NodeTopology] = {}
        # Node name -> its GPUs' measured load from the agent (GpuLoadAware reads it); load
        # is advisory and not undone by trials: no placement changes it.
        self.gpu_load: dict[str, tuple[GpuLoad, ...]] = {}
        self._gpu_hints: dict[str, tuple[str, Grants]] = {}
        # (op, pod, node, GPUs): the GPUs a removed pod held, or a regranted pod's previous ones.
        self._log: list[tuple[int, PodView, NodeInfo, Grants]] = []
        self._trial_marks: list[int] = []
        # Dynamic Resource Allocation: slices, classes, claims, devices in use; its
        # allocations are undone with the trial that made them.
        self.dra = DraState()
        # Bumped by every change that is not a pod placed on or taken off a node (those bump
        # the node's generation): nodes added, updated or removed, measured topology and
        # load. Cached results that read snapshot-wide facts are stale when it moved.
        self.version = 0
        # Bumped only when what a GPU node offers may have changed (a GPU node added or
        # removed, its allocatable cpu or memory, its GPUs' model, count or health): readers
        # that count GPU nodes by kind (GpuTopology's supply) recount then, not on each load
        # sample or heartbeat that bumps `version`.
        self.gpu_hosts_version = 0
        for pod in pods:
            if pod.node_name and not pod.is_finished and pod.node_name in self._by_name:
                self._place(pod, self._by_name[pod.node_name])

    def __len__(self) -> int:
        return len(self.nodes)

    def __iter__(self) -> Iterator[NodeInfo]:
        return iter(self.nodes)

    def get(self, node_name: str) -> NodeInfo | None:
        return self._by_name.get(node_name)

    def node_of(self, pod_uid: str) -> NodeInfo | None:
        return self._where.get(pod_uid)

    def change_mark(self) -> int:
        """Where the change log ends now: pass it to `changed_since` later."""
        self._trim_changes()
        return self._changes_dropped + len(self._changes)

    def _trim_changes(self) -> None:
        changes = self._changes
        kept = self.changes_kept
        if kept is None:
            kept = max(_MIN_CHANGES_KEPT, 2 * len(self.nodes))
        if len(changes) > kept:
            half = max(1, len(changes) // 2)
            del changes[:half]
            self._changes_dropped += half

    def changed_since(self, mark: int) -> list[NodeInfo] | None:
        """The nodes given a new generation since `change_mark()` returned `mark` (a node may
        repeat), or None when the log no longer reaches back that far."""
        start = mark - self._changes_dropped
        return self._changes[start:] if start >= 0 else None

    def assume(self, pod: PodView, node_name: str) -> PodView:
        """Count `pod` on `node_name` at once, as kube-scheduler's assume does; returns it bound."""
        info = self._by_name[node_name]
        bound = pod if pod.node_name == node_name else bound_to(pod, node_name)
        self._place(bound, info)
        if self._trial_marks:
            self._log.append((_ADD, bound, info, ()))
        return bound

    def forget(self, pod: PodView) -> None:
        """Stop counting `pod` (unreserve, or a victim in a preemption what-if)."""
        info = self._where[pod.uid]
        placed = info.pods[pod.uid]
        held = self.gpu_grants(pod.uid)
        self._unplace(placed, info)
        if self._trial_marks:
            self._log.append((_REMOVE, placed, info, held))

    def gpu_grants(self, pod_uid: str) -> Grants:
        """The GPUs a counted pod holds, as (GPU index, milli-GPU) pairs; () for none."""
        info = self._where.get(pod_uid)
        if info is None or info.gpu is None:
            return ()
        return info.gpu.grants.get(pod_uid, ())

    def assign_gpus(self, pod_uid: str, grants: Grants) -> None:
        """Move a counted pod onto exactly these GPUs (Reserve's choice); they must fit once
        the pod's current GPUs are given back. Undo-logged."""
        info = self._where[pod_uid]
        ledger = info.gpu
        if ledger is None:
            raise ValueError(f"node {info.name} has no GPUs to assign to pod {pod_uid}")
        previous = ledger.release(pod_uid)
        try:
            ledger.take(pod_uid, grants)
        except ValueError:
            ledger.take(pod_uid, previous, overcommit=True)
            raise
        info.mark_changed()
        self._remember(pod_uid, info.name, grants)
        if self._trial_marks:
            self._log.append((_REGRANT, info.pods[pod_uid], info, previous))

    def add_node(self, node: NodeView) -> NodeInfo:
        """Append a node to the order (the cache's watch events; never inside a cycle)."""
        if node.name in self._by_name:
            raise ValueError(f"node {node.name} is already in the snapshot")
        info = NodeInfo(node, self._measured.get(node.name))
        info.changes = self._changes
        self.version += 1
        self.nodes.append(info)
        self._by_name[node.name] = info
        self._index_node(node, 1)
        self.gpu_nodes += info.gpu is not None
        self.gpu_hosts_version += info.gpu is not None
        return info

    def update_node(self, node: NodeView) -> NodeInfo:
        """Swap in a newer version of a known node, keeping the pods counted on it."""
        info = self._by_name[node.name]
        if _same_node(info.node, node):
            return info  # a status heartbeat: nothing the scheduler reads moved
        self.version += 1
        host = gpu_host(info)
        self._index_node(info.node, -1)
        info.node = node
        alloc = node.allocatable
        info.alloc_milli_cpu = alloc.milli_cpu
        info.alloc_memory = alloc.memory
        info.alloc_ephemeral = alloc.ephemeral_storage
        info.alloc_pods = alloc.pods
        info.alloc_scalar = alloc.scalar
        self._index_node(node, 1)
        self._refit_gpus(info)
        self.gpu_hosts_version += gpu_host(info) != host
        info.mark_changed()
        return info

    def _refit_gpus(self, info: NodeInfo) -> None:
        """A node update may change its GPUs (count, product, health): rebuild the ledger and
        count the pods again, keeping each pod's GPUs where they still exist."""
        old = info.gpu
        fresh = ledger_for(info.node, self._measured.get(info.name))
        if old is not None and fresh is not None and fresh.topology is old.topology:
            return
        self.gpu_nodes += (fresh is not None) - (old is not None)
        info.gpu = fresh
        if fresh is None:
            return
        for pod in info.pods.values():
            held = old.grants.get(pod.uid, ()) if old is not None else ()
            if held and all(i < len(fresh.free) for i, _ in held):
                fresh.take(pod.uid, held, overcommit=True)
            else:
                self._grant(pod, info, None)

    def set_measured_topology(self, node_name: str, topology: NodeTopology | None) -> None:
        """The node agent's topology for a node (None: back to its labels). Pods keep their
        GPUs where the new topology still has them (the cache's watch events, never in a cycle).
        """
        self.version += 1
        if topology is None:
            self._measured.pop(node_name, None)
        else:
            self._measured[node_name] = topology
        info = self._by_name.get(node_name)
        if info is not None:
            host = gpu_host(info)
            self._refit_gpus(info)
            self.gpu_hosts_version += gpu_host(info) != host
            info.mark_changed()

    def remove_node(self, node_name: str) -> list[PodView]:
        """Drop a node; returns the pods that were counted on it, now counted nowhere."""
        if self._trial_marks:
            # The undo log holds NodeInfo references a rollback would resurrect.
            raise RuntimeError("nodes cannot be removed while a trial is open")
        info = self._by_name.pop(node_name)
        self.version += 1
        self.nodes.remove(info)
        pods = list(info.pods.values())
        for pod in pods:
            self._unplace(pod, info)
        self._index_node(info.node, -1)
        self.gpu_nodes -= info.gpu is not None
        self.gpu_hosts_version += info.gpu is not None
        return pods

    def _index_node(self, node: NodeView, sign: int) -> None:
        counts = self.image_node_counts
        for image in node.image_sizes:
            left = counts.get(image, 0) + sign
            if left:
                counts[image] = left
            else:
                counts.pop(image, None)
        if _has_prefer_no_schedule(node):
            self._prefer_no_schedule_nodes += sign
            self.has_prefer_no_schedule_taints = self._prefer_no_schedule_nodes > 0

    def begin_trial(self) -> Trial:
        self._trial_marks.append(len(self._log))
        self.dra.begin()
        return Trial(self, len(self._trial_marks))

    def _place(self, pod: PodView, info: NodeInfo, grants: Grants | None = None) -> None:
        if pod.uid in self._where:
            raise ValueError(f"pod {pod.key} is already counted on {self._where[pod.uid].name}")
        info.add(pod)
        self._trim_changes()
        self._where[pod.uid] = info
        self._count_affinity(pod, 1)
        if info.gpu is not None:
            self._grant(pod, info, grants)

    def _grant(self, pod: PodView, info: NodeInfo, grants: Grants | None) -> None:
        ledger = info.gpu
        assert ledger is not None
        if grants is None:
            request = counted_request(pod)
            if not request.wants_gpu:
                return
            hint = self._gpu_hints.pop(pod.uid, None)
            if hint is not None and hint[0] == info.name and ledger.fits(hint[1]):
                grants = hint[1]
            else:
                grants = ledger.default_grants(request)
        if grants:
            # Pods bound by the API are counted even where they overcommit a GPU.
            ledger.take(pod.uid, grants, overcommit=True)

    def forget_gpu_hint(self, pod_uid: str) -> None:
        """Drop the GPUs remembered for a pod whose reservation was undone."""
        self._gpu_hints.pop(pod_uid, None)

    def _remember(self, pod_uid: str, node_name: str, grants: Grants) -> None:
        hints = self._gpu_hints
        hints.pop(pod_uid, None)
        if len(hints) >= _MAX_GPU_HINTS:
            del hints[next(iter(hints))]
        hints[pod_uid] = (node_name, grants)

    def _unplace(self, pod: PodView, info: NodeInfo) -> None:
        if info.gpu is not None:
            info.gpu.release(pod.uid)
        info.remove(pod)
        self._trim_changes()
        del self._where[pod.uid]
        self._count_affinity(pod, -1)

    def _count_affinity(self, pod: PodView, sign: int) -> None:
        if pod.pod_affinity is not None or pod.pod_anti_affinity is not None:
            self.pods_with_affinity += sign
        if pod.pod_anti_affinity is not None and pod.pod_anti_affinity.required:
            self.pods_with_required_anti_affinity += sign

    def _end_trial(self, depth: int, keep: bool) -> None:
        if depth != len(self._trial_marks):
            raise RuntimeError("trials must end innermost first")
        mark = self._trial_marks.pop()
        self.dra.end(keep)
        if not keep:
            while len(self._log) > mark:
                op, pod, info, grants = self._log.pop()
                if op == _ADD:
                    self._unplace(pod, info)
                elif op == _REMOVE:
                    self._place(pod, info, grants)
                else:
                    self._restore_grants(pod, info, grants)
        elif not self._trial_marks:
            del self._log[mark:]

    def _restore_grants(self, pod: PodView, info: NodeInfo, grants: Grants) -> None:
        ledger = info.gpu
        assert ledger is not None
        ledger.release(pod.uid)
        ledger.take(pod.uid, grants, overcommit=True)
        info.mark_changed()


def _same_node(old: NodeView, new: NodeView) -> bool:
    return old is new or (
        old.allocatable == new.allocatable
        and old.labels == new.labels
        and old.taints == new.taints
        and old.unschedulable == new.unschedulable
        and old.annotations == new.annotations
        and old.image_sizes == new.image_sizes
    )


def _has_prefer_no_schedule(node: NodeView) -> bool:
    return any(t.effect == "PreferNoSchedule" for t in node.taints)


class Trial:
    """Placements made since `begin_trial()`, kept by `commit()` or rolled back by `discard()`."""

    __slots__ = ("_depth", "_done", "_snapshot")

    def __init__(self, snapshot: Snapshot, depth: int) -> None:
        self._snapshot = snapshot
        self._depth = depth
        self._done = False

    def commit(self) -> None:
        self._finish(keep=True)

    def discard(self) -> None:
        self._finish(keep=False)

    def _finish(self, keep: bool) -> None:
        if self._done:
            raise RuntimeError("trial already ended")
        self._done = True
        self._snapshot._end_trial(self._depth, keep)

    def __enter__(self) -> Trial:
        return self

    def __exit__(self, *exc: object) -> None:
        # Leaving the block without a decision (or on an exception) rolls back.
        if not self._done:
            self.discard()
