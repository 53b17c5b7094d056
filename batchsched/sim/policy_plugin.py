"""A paper policy (sim/policies.py) as the only scorer of a profile, and its GPU choice as
Reserve.

The profile keeps every PreFilter and Filter (GpuTopology still decides which nodes have room
for a pod's GPUs); its PreScore and Score plugins give way to the policy, so the policy alone
ranks the feasible nodes, as in the paper's simulator where one score plugin is enabled at a
time; GpuTopology's Reserve gives way to the policy's choice of GPUs inside the node.

Ties: the artifact's kubernetes fork (mental2008/kubernetes v1.20.5-minor, selectHost) takes
the node with the smallest name among the best-scored ones "for reproducibility", where
kube-scheduler draws one at random. That matters: under FGD's coarse score most pods without
GPUs tie everywhere, and the smallest name packs them onto the same nodes where a random draw
spreads them over every GPU node's cpu. Our runner draws at random, so a policy that wants the
artifact's tie-break gets two more scorers, the two base-101 digits of the node's rank in name
order (smallest name highest), weighted below the policy's score: the totals then order by the
policy's score first and by name second. In clusters of more than 101 * 101 nodes the names
past that share rank 0, which the random draw separates.

A cacheable policy's score is kept per (pod demand, node generation): one placement changes one
node, so the next pod with the same demand rescores one node, not a thousand.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import ClassVar, Final

from batchsched.framework.cycle_state import CycleState
from batchsched.framework.interfaces import PreScorePlugin
from batchsched.framework.profile import Profile, WeightedScorer
from batchsched.framework.status import OK, Status, unschedulable
from batchsched.model.pod import PodView
from batchsched.plugins.gpu_scoring import GenerationTables
from batchsched.sim.policies import PodDemand, Policy, min_max
from batchsched.snapshot import NodeInfo, Snapshot
from gpu.requests import InvalidGpuRequest, gpu_request
from gpu.topology import MILLI_PER_GPU

GPU_TOPOLOGY: Final = "GpuTopology"
NO_GPUS: Final = "node(s) had no GPUs the policy could give the pod"
_DIGIT: Final = 101  # a score's 0..100


def pod_demand(pod: PodView) -> PodDemand:
    """The pod as a policy reads it; a malformed GPU request counts as none (GpuTopology's
    PreFilter has rejected such a pod before any score runs)."""
    requests = pod.requests
    try:
        request = gpu_request(pod)
    except InvalidGpuRequest:
        return PodDemand(requests.milli_cpu, requests.memory)
    if request.count:
        return PodDemand(requests.milli_cpu, requests.memory, request.count, MILLI_PER_GPU)
    if request.milli:
        return PodDemand(requests.milli_cpu, requests.memory, 1, request.milli)
    return PodDemand(requests.milli_cpu, requests.memory)


class PolicyScore:
    """PreScore, Score, NormalizeScore and Reserve for one policy."""

    name: ClassVar[str] = "PaperPolicy"

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self._tables = GenerationTables[PodDemand]()
        self._pod: PodView | None = None
        self._demand = PodDemand(0, 0)
        self._table: dict[int, int] | None = None
        self._no_gpus = unschedulable(NO_GPUS).with_plugin(self.name)

    def pre_score(
        self, state: CycleState, pod: PodView, snapshot: Snapshot, nodes: Sequence[NodeInfo]
    ) -> Status:
        demand = pod_demand(pod)
        self._pod, self._demand = pod, demand
        self._table = self._table_for(demand) if self.policy.cacheable else None
        return OK

    def _table_for(self, demand: PodDemand) -> dict[int, int]:
        return self._tables.table(demand)

    def score(self, state: CycleState, pod: PodView, node: NodeInfo) -> int:
        demand = self._demand if pod is self._pod else pod_demand(pod)
        table = self._table if pod is self._pod else None
        if table is None:
            return self.policy.score(demand, node)
        found = table.get(node.generation)
        if found is None:
            found = table[node.generation] = self.policy.score(demand, node)
        return found

    def normalize_scores(
        self, state: CycleState, pod: PodView, nodes: Sequence[NodeInfo], scores: list[int]
    ) -> None:
        if self.policy.min_max:
            min_max(scores)

    def reserve(
        self, state: CycleState, pod: PodView, node_name: str, snapshot: Snapshot
    ) -> Status:
        demand = pod_demand(pod)
        if not demand.gpus:
            return OK
        info = snapshot.get(node_name)
        if info is None or info.gpu is None:
            return self._no_gpus
        held = snapshot.gpu_grants(pod.uid)
        free = list(info.gpu.free)
        for index, milli in held:  # choose as if the pod held nothing yet
            free[index] += milli
        free = [f if f > 0 else 0 for f in free]  # an overcommitted GPU offers nothing
        chosen = self.policy.choose(demand, info, free)
        if chosen is None:
            return self._no_gpus
        grants = tuple((index, demand.milli) for index in chosen)
        if grants != held:
            snapshot.assign_gpus(pod.uid, grants)
        return OK

    def unreserve(
        self, state: CycleState, pod: PodView, node_name: str, snapshot: Snapshot
    ) -> None:
        # The runner forgets the pod right after, which gives its GPUs back.
        snapshot.forget_gpu_hint(pod.uid)


class NameRank:
    """PreScore: each node's rank in name order, smallest name highest (see the module
    docstring), computed once per snapshot and node count."""

    name: ClassVar[str] = "PaperTieBreak"

    def __init__(self) -> None:
        self.ranks: dict[str, int] = {}
        self._of: tuple[int, int] = (0, -1)

    def pre_score(
        self, state: CycleState, pod: PodView, snapshot: Snapshot, nodes: Sequence[NodeInfo]
    ) -> Status:
        key = (id(snapshot), len(snapshot))
        if key != self._of:
            names = sorted(info.name for info in snapshot.nodes)
            top = min(len(names), _DIGIT * _DIGIT) - 1
            self.ranks = {name: max(top - i, 0) for i, name in enumerate(names)}
            self._of = key
        return OK


class NameRankHigh:
    name: ClassVar[str] = "PaperTieBreakHigh"

    def __init__(self, rank: NameRank) -> None:
        self._rank = rank

    def score(self, state: CycleState, pod: PodView, node: NodeInfo) -> int:
        return self._rank.ranks.get(node.name, 0) // _DIGIT


class NameRankLow:
    name: ClassVar[str] = "PaperTieBreakLow"

    def __init__(self, rank: NameRank) -> None:
        self._rank = rank

    def score(self, state: CycleState, pod: PodView, node: NodeInfo) -> int:
        return self._rank.ranks.get(node.name, 0) % _DIGIT


def policy_profile(base: Profile, policy: Policy) -> Profile:
    """`base` with `policy` as its only scorer and its GPU choice in place of GpuTopology's
    Reserve (where `base` has no GpuTopology Reserve, the policy's comes first); with the
    policy's `by_name`, ties go to the smallest node name."""
    plugin = PolicyScore(policy)
    normalizer = plugin if policy.min_max else None
    pre_score: tuple[PreScorePlugin, ...] = (plugin,)
    scores: tuple[WeightedScorer, ...] = (WeightedScorer(plugin, 1, normalizer),)
    if policy.by_name:
        rank = NameRank()
        pre_score = (plugin, rank)
        scores = (
            WeightedScorer(plugin, _DIGIT * _DIGIT, normalizer),
            WeightedScorer(NameRankHigh(rank), _DIGIT, None),
            WeightedScorer(NameRankLow(rank), 1, None),
        )
    reserve = [plugin if p.name == GPU_TOPOLOGY else p for p in base.reserve]
    if plugin not in reserve:
        reserve.insert(0, plugin)
    return dataclasses.replace(base, pre_score=pre_score, score=scores, reserve=tuple(reserve))
