"""InterPodAffinity: place pods with (or away from) the pods they name, per topology domain.

Filter enforces required terms in both directions (the incoming pod's affinity and
anti-affinity, and the required anti-affinity of pods already running); Score follows preferred
terms in both directions, plus existing pods' required affinity at `hardPodAffinityWeight`.
The cluster-wide matching happens once per cycle in PreFilter/PreScore.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar, Final

from pydantic import Field

from batchsched.framework.cycle_state import CycleState, StateKey
from batchsched.framework.interfaces import MAX_NODE_SCORE, PreFilterResult
from batchsched.framework.normalize import min_max_normalize
from batchsched.framework.registry import PluginArgs
from batchsched.framework.status import OK, SKIP, Status, unresolvable, unschedulable
from batchsched.model.pod import PodView
from batchsched.plugins.inter_pod_affinity_filter import (
    FilterState,
    build_filter_state,
    existing_anti_affinity_pairs,
)
from batchsched.plugins.inter_pod_affinity_score import (
    TopologyScores,
    has_preferred_terms,
    topology_scores,
)
from batchsched.snapshot import NodeInfo, Snapshot

AFFINITY_REASON: Final = "node(s) didn't match pod affinity rules"
ANTI_AFFINITY_REASON: Final = "node(s) didn't match pod anti-affinity rules"
EXISTING_ANTI_AFFINITY_REASON: Final = "node(s) didn't satisfy existing pods anti-affinity rules"

_FILTER_STATE: Final = StateKey[FilterState]("InterPodAffinity/filter")
_SCORE_STATE: Final = StateKey[TopologyScores]("InterPodAffinity/score")


class InterPodAffinityArgs(PluginArgs):
    # What each required affinity term of an existing pod that selects the incoming pod adds
    # to the score of that pod's domain; 0 turns this symmetry off.
    hard_pod_affinity_weight: int = Field(default=1, ge=0, le=100)
    # Skip scoring for pods without preferred terms of their own, instead of visiting every
    # pod with affinity in the cluster to honour those pods' preferences.
    ignore_preferred_terms_of_existing_pods: bool = False


def _has_required_terms(pod: PodView) -> bool:
    affinity, anti = pod.pod_affinity, pod.pod_anti_affinity
    return bool(
        (affinity is not None and affinity.required) or (anti is not None and anti.required)
    )


class InterPodAffinity:
    name: ClassVar[str] = "InterPodAffinity"

    def __init__(self, args: InterPodAffinityArgs | None = None) -> None:
        self.args = args if args is not None else InterPodAffinityArgs()
        # Preemption cannot bring a pod that the affinity needs, but evicting the pods that
        # an anti-affinity rule names can free the node; hence the two codes.
        self._affinity_rejected = unresolvable(AFFINITY_REASON)
        self._anti_affinity_rejected = unschedulable(ANTI_AFFINITY_REASON)
        self._existing_rejected = unschedulable(EXISTING_ANTI_AFFINITY_REASON)

    def pre_filter(
        self, state: CycleState, pod: PodView, snapshot: Snapshot
    ) -> tuple[PreFilterResult | None, Status]:
        has_terms = _has_required_terms(pod)
        if not has_terms and not snapshot.pods_with_required_anti_affinity:
            return None, SKIP
        existing = existing_anti_affinity_pairs(pod, snapshot)
        if not has_terms and not existing:
            return None, SKIP
        state.write(_FILTER_STATE, build_filter_state(pod, snapshot, existing))
        return None, OK

    def filter(self, state: CycleState, pod: PodView, node: NodeInfo) -> Status:
        checks = state.read(_FILTER_STATE)
        labels = node.node.labels
        # kube-scheduler's order: the pod's own affinity, its anti-affinity, then others'.
        if checks.affinity_keys and not checks.satisfies_affinity(labels):
            return self._affinity_rejected
        for key, values in checks.anti_affinity_pairs.items():
            value = labels.get(key)
            if value is not None and value in values:
                return self._anti_affinity_rejected
        for key, values in checks.existing_anti_affinity_pairs.items():
            value = labels.get(key)
            if value is not None and value in values:
                return self._existing_rejected
        return OK

    def pre_score(
        self, state: CycleState, pod: PodView, snapshot: Snapshot, nodes: Sequence[NodeInfo]
    ) -> Status:
        if not nodes:
            return SKIP
        own_preferences = has_preferred_terms(pod)
        if not own_preferences and (
            self.args.ignore_preferred_terms_of_existing_pods or not snapshot.pods_with_affinity
        ):
            return SKIP
        scores = topology_scores(pod, snapshot, self.args.hard_pod_affinity_weight)
        if not scores:
            return SKIP
        state.write(_SCORE_STATE, scores)
        return OK

    def score(self, state: CycleState, pod: PodView, node: NodeInfo) -> int:
        labels = node.node.labels
        total = 0
        for key, by_value in state.read(_SCORE_STATE).items():
            value = labels.get(key)
            if value is not None:
                total += by_value.get(value, 0)
        return total

    def normalize_scores(
        self, state: CycleState, pod: PodView, nodes: Sequence[NodeInfo], scores: list[int]
    ) -> None:
        min_max_normalize(scores, MAX_NODE_SCORE)
