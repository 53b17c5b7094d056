"""InterPodAffinity's PreScore work: a score per topology domain, summed per node by Score.

Purely computational. Every existing pod contributes to the domain (topology key, value of its
node) of each term that connects it with the incoming pod, in both directions: the incoming
pod's preferred terms selecting it, and its own terms selecting the incoming pod.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from batchsched.model.affinity import PodAffinityTerm, WeightedPodAffinityTerm
from batchsched.model.pod import PodView
from batchsched.plugins.inter_pod_affinity_filter import (
    LabelHint,
    NamespaceLabels,
    label_hint,
    term_matches,
)
from batchsched.snapshot import Snapshot

# topology key -> topology value -> summed weight
TopologyScores = dict[str, dict[str, int]]


def has_preferred_terms(pod: PodView) -> bool:
    affinity, anti = pod.pod_affinity, pod.pod_anti_affinity
    return bool(
        (affinity is not None and affinity.preferred) or (anti is not None and anti.preferred)
    )


def _add(
    scores: TopologyScores, term: PodAffinityTerm, node_labels: Mapping[str, str], weight: int
) -> None:
    value = node_labels.get(term.topology_key)
    if value is not None:
        by_value = scores.setdefault(term.topology_key, {})
        by_value[value] = by_value.get(value, 0) + weight


def _add_weighted(
    scores: TopologyScores,
    terms: Iterable[WeightedPodAffinityTerm],
    pod: PodView,
    ns_labels: NamespaceLabels,
    node_labels: Mapping[str, str],
    sign: int,
) -> None:
    for weighted in terms:
        if term_matches(weighted.term, pod, ns_labels):
            _add(scores, weighted.term, node_labels, sign * weighted.weight)


# (term, its label hint, signed weight)
_SignedTerm = tuple[PodAffinityTerm, LabelHint, int]


def _incoming_preferences(pod: PodView) -> tuple[_SignedTerm, ...]:
    affinity, anti = pod.pod_affinity, pod.pod_anti_affinity
    pulls = affinity.preferred if affinity is not None else ()
    pushes = anti.preferred if anti is not None else ()
    return tuple(
        (w.term, label_hint(w.term), sign * w.weight)
        for terms, sign in ((pulls, 1), (pushes, -1))
        for w in terms
    )


def _score_their_terms(
    scores: TopologyScores,
    incoming: PodView,
    existing: PodView,
    node_labels: Mapping[str, str],
    ns_labels: NamespaceLabels,
    hard_weight: int,
) -> None:
    """The symmetric half: the existing pod's own terms that select the incoming pod."""
    their_affinity, their_anti = existing.pod_affinity, existing.pod_anti_affinity
    if their_affinity is not None:
        if hard_weight > 0:
            for term in their_affinity.required:
                if term_matches(term, incoming, ns_labels):
                    _add(scores, term, node_labels, hard_weight)
        _add_weighted(scores, their_affinity.preferred, incoming, ns_labels, node_labels, 1)
    if their_anti is not None:
        _add_weighted(scores, their_anti.preferred, incoming, ns_labels, node_labels, -1)


def topology_scores(pod: PodView, snapshot: Snapshot, hard_weight: int) -> TopologyScores:
    """Scores for every domain some existing pod contributes to, over the whole cluster.

    Without preferred terms of its own, the incoming pod can only be scored by existing pods'
    affinity, so only pods that carry affinity are visited.
    """
    scores: TopologyScores = {}
    own = _incoming_preferences(pod)
    ns_labels = snapshot.namespace_labels
    for info in snapshot.nodes:
        if not own and not info.pods_with_affinity:
            continue
        node_labels = info.node.labels
        if not node_labels:
            continue  # no domain to add to
        for existing in info.pods.values():
            labels = existing.labels
            for term, hint, weight in own:
                if hint is not None and labels.get(hint[0]) != hint[1]:
                    continue
                if term_matches(term, existing, ns_labels):
                    _add(scores, term, node_labels, weight)
            if existing.pod_affinity is not None or existing.pod_anti_affinity is not None:
                _score_their_terms(scores, pod, existing, node_labels, ns_labels, hard_weight)
    return scores
