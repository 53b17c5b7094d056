"""InterPodAffinity's PreFilter work: the topology pairs that Filter checks each node against.

Purely computational. Everything here runs once per scheduling cycle, so that Filter, which
runs once per node, is a handful of dict lookups on the node's labels.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from batchsched.model.affinity import PodAffinityTerm
from batchsched.model.pod import PodView
from batchsched.snapshot import Snapshot

NamespaceLabels = Mapping[str, Mapping[str, str]]
# topology key -> the values of that key (i.e. the domains) holding at least one matching pod
TopologyPairs = dict[str, set[str]]

_NO_LABELS: Final[Mapping[str, str]] = {}


def term_matches(term: PodAffinityTerm, pod: PodView, namespace_labels: NamespaceLabels) -> bool:
    """Does `pod` fall under `term`: in one of its namespaces (listed, or selected by the
    namespace selector; an empty selector selects every namespace) and matching its selector?

    A term without a label selector selects no pod, as in the API.
    """
    selector = term.selector
    if selector is None:
        return False
    if pod.namespace not in term.namespaces:
        ns_selector = term.namespace_selector
        if ns_selector is None:
            return False
        if not ns_selector.matches(namespace_labels.get(pod.namespace, _NO_LABELS)):
            return False
    return selector.matches(pod.labels)


def matches_all(
    terms: Iterable[PodAffinityTerm], pod: PodView, namespace_labels: NamespaceLabels
) -> bool:
    return all(term_matches(t, pod, namespace_labels) for t in terms)


LabelHint = tuple[str, str] | None
HintedTerm = tuple[PodAffinityTerm, LabelHint]


def label_hint(term: PodAffinityTerm) -> LabelHint:
    """The term's first matchLabels entry. Scans over every pod in the cluster check that one
    label inline first: most pods fail it, and the full match costs ten times as much."""
    selector = term.selector
    return selector.match_labels[0] if selector is not None and selector.match_labels else None


def hinted(terms: Iterable[PodAffinityTerm]) -> tuple[HintedTerm, ...]:
    return tuple((t, label_hint(t)) for t in terms)


def _add_pair(pairs: TopologyPairs, key: str, node_labels: Mapping[str, str]) -> None:
    value = node_labels.get(key)
    if value is not None:  # a node without the topology label is in no domain of that key
        pairs.setdefault(key, set()).add(value)


@dataclass(frozen=True, slots=True)
class FilterState:
    """What Filter needs for one pod; empty collections mean "nothing to check"."""

    affinity_keys: tuple[str, ...]  # topology keys of the pod's required affinity terms
    affinity_pairs: TopologyPairs  # domains holding pods that match all those terms
    first_of_its_kind: bool  # no pod matches anywhere, but the pod matches its own terms
    anti_affinity_pairs: TopologyPairs  # domains holding pods the pod's anti-affinity repels
    existing_anti_affinity_pairs: TopologyPairs  # domains whose pods' anti-affinity repels it

    def satisfies_affinity(self, node_labels: Mapping[str, str]) -> bool:
        pods_found = True
        for key in self.affinity_keys:
            value = node_labels.get(key)
            if value is None:
                return False  # the node must carry every topology key, even for a first pod
            if value not in self.affinity_pairs.get(key, ()):
                pods_found = False
        return pods_found or self.first_of_its_kind


def existing_anti_affinity_pairs(pod: PodView, snapshot: Snapshot) -> TopologyPairs:
    """Domains of existing pods whose required anti-affinity selects the incoming pod."""
    pairs: TopologyPairs = {}
    if not snapshot.pods_with_required_anti_affinity:
        return pairs
    ns_labels = snapshot.namespace_labels
    for info in snapshot.nodes:
        if not info.pods_with_required_anti_affinity:
            continue
        node_labels = info.node.labels
        for existing in info.pods.values():
            anti = existing.pod_anti_affinity
            if anti is None:
                continue
            for term in anti.required:
                if term_matches(term, pod, ns_labels):
                    _add_pair(pairs, term.topology_key, node_labels)
    return pairs


def _incoming_pairs(pod: PodView, snapshot: Snapshot) -> tuple[TopologyPairs, TopologyPairs]:
    """Match every existing pod against the incoming pod's required terms, once per cycle.

    Affinity counts a pod only if it matches all the terms (then in each term's domain);
    anti-affinity counts a pod in the domain of each term it matches.
    """
    affinity = hinted(pod.pod_affinity.required if pod.pod_affinity is not None else ())
    anti = hinted(pod.pod_anti_affinity.required if pod.pod_anti_affinity is not None else ())
    ns_labels = snapshot.namespace_labels
    affinity_pairs: TopologyPairs = {}
    anti_pairs: TopologyPairs = {}
    for info in snapshot.nodes:
        node_labels = info.node.labels
        for other in info.pods.values():
            labels = other.labels
            if affinity and all(
                (hint is None or labels.get(hint[0]) == hint[1])
                and term_matches(term, other, ns_labels)
                for term, hint in affinity
            ):
                for term, _ in affinity:
                    _add_pair(affinity_pairs, term.topology_key, node_labels)
            for term, hint in anti:
                if hint is not None and labels.get(hint[0]) != hint[1]:
                    continue
                if term_matches(term, other, ns_labels):
                    _add_pair(anti_pairs, term.topology_key, node_labels)
    return affinity_pairs, anti_pairs


def build_filter_state(pod: PodView, snapshot: Snapshot, existing: TopologyPairs) -> FilterState:
    affinity = pod.pod_affinity.required if pod.pod_affinity is not None else ()
    has_anti = pod.pod_anti_affinity is not None and bool(pod.pod_anti_affinity.required)
    affinity_pairs: TopologyPairs = {}
    anti_pairs: TopologyPairs = {}
    if affinity or has_anti:
        affinity_pairs, anti_pairs = _incoming_pairs(pod, snapshot)
    return FilterState(
        affinity_keys=tuple(dict.fromkeys(t.topology_key for t in affinity)),
        affinity_pairs=affinity_pairs,
        first_of_its_kind=not affinity_pairs
        and matches_all(affinity, pod, snapshot.namespace_labels),
        anti_affinity_pairs=anti_pairs,
        existing_anti_affinity_pairs=existing,
    )
