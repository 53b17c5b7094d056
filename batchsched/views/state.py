"""What the views read: the cluster's objects, parsed once, and the snapshot built from them.

Purely computational. The live edge (views/live.py) fills `LiveState` from one list of each
kind; the tests build it from dicts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from batchsched.gang.encodings import kueue_group
from batchsched.gang.podgroup import PodGroupView, pod_group_of
from batchsched.model.errors import InvalidObject
from batchsched.model.gang_ref import GangApi, split_gang_key
from batchsched.model.node import NodeView
from batchsched.model.pod import PodView
from batchsched.snapshot import Snapshot
from gpu.topology import NodeTopology


@dataclass(frozen=True, slots=True)
class LiveState:
    nodes: Sequence[NodeView]
    pods: Sequence[PodView]
    pod_groups: Sequence[PodGroupView] = ()
    namespace_labels: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    # Node name -> the node agent's measured GPU topology (NodeResourceTopology).
    topologies: Mapping[str, NodeTopology] = field(default_factory=dict)
    # Pod key -> the message of its PodScheduled=False condition, as the scheduler wrote it.
    scheduled_messages: Mapping[str, str] = field(default_factory=dict)
    now: float = 0.0  # wall clock, seconds since the epoch


def snapshot_of(state: LiveState) -> Snapshot:
    """The scheduler's view of the cluster: every node, every bound pod counted on it."""
    snapshot = Snapshot(state.nodes, (), state.namespace_labels)
    for name, topology in state.topologies.items():
        snapshot.set_measured_topology(name, topology)
    for pod in state.pods:
        if pod.node_name and not pod.is_finished and snapshot.get(pod.node_name) is not None:
            snapshot.assume(pod, pod.node_name)
    return snapshot


def pending_pods(state: LiveState, schedulers: frozenset[str]) -> list[PodView]:
    """Pods of these schedulers waiting for a node."""
    return [
        p
        for p in state.pods
        if not p.node_name and not p.is_finished and p.scheduler_name in schedulers
    ]


def groups_by_key(state: LiveState) -> dict[str, PodGroupView]:
    """Every gang by key: the PodGroup objects, and Kueue groups as their pods describe them
    (Kueue makes no object; the scheduler's gang tracker does the same)."""
    groups = {g.key: g for g in state.pod_groups}
    for pod in state.pods:
        key = pod_group_of(pod)
        if key is None or key in groups:
            continue
        api, _, name = split_gang_key(key)
        if api is GangApi.KUEUE:
            try:
                groups[key] = kueue_group(pod, name)
            except InvalidObject:
                continue  # the scheduler reports it on the pod; here the gang is unknown
    return groups
