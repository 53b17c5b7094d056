"""NodeAffinity: the pod's nodeSelector and required node affinity (plus any scheduler-enforced
`addedAffinity`) must match; preferred terms add their weights to the score."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar, Final

from pydantic import field_validator

from batchsched.framework.cycle_state import CycleState, StateKey
from batchsched.framework.interfaces import MAX_NODE_SCORE, PreFilterResult
from batchsched.framework.normalize import default_normalize_score
from batchsched.framework.registry import PluginArgs
from batchsched.framework.status import OK, SKIP, Status, unresolvable
from batchsched.model.affinity import PreferredTerm
from batchsched.model.pod import PodView
from batchsched.model.pod_spec import parse_node_affinity
from batchsched.model.selectors import IN, NodeSelectorTerm, terms_match
from batchsched.snapshot import NodeInfo, Snapshot

REASON_POD: Final = "node(s) didn't match Pod's node affinity/selector"
REASON_ENFORCED: Final = "node(s) didn't match scheduler-enforced node affinity"
REASON_CONFLICT: Final = "pod affinity terms conflict"
NODE_NAME_FIELD: Final = "metadata.name"


class NodeAffinityArgs(PluginArgs):
    """`addedAffinity`: a nodeAffinity in API shape that every pod must satisfy as well."""

    added_affinity: dict[str, object] | None = None

    @field_validator("added_affinity")
    @classmethod
    def _readable(cls, value: dict[str, object] | None) -> dict[str, object] | None:
        parse_node_affinity(value, "addedAffinity")  # FieldError is a ValueError: clear message
        return value


@dataclass(frozen=True, slots=True)
class _Required:
    """What the pod itself requires of a node: nodeSelector AND (ORed) required terms."""

    selector: tuple[tuple[str, str], ...]
    terms: tuple[NodeSelectorTerm, ...] | None  # None: no required node affinity


_REQUIRED: Final[StateKey[_Required]] = StateKey("NodeAffinity/required")
_PREFERRED: Final[StateKey[tuple[PreferredTerm, ...]]] = StateKey("NodeAffinity/preferred")


def _required_of(pod: PodView) -> _Required:
    affinity = pod.node_affinity
    return _Required(
        tuple(pod.node_selector.items()), affinity.required if affinity is not None else None
    )


def _node_names_of(terms: tuple[NodeSelectorTerm, ...]) -> frozenset[str] | None:
    """The nodes the terms can match by name, when every term pins metadata.name with In.

    Terms are ORed (union over terms); a term's requirements are ANDed (intersection)."""
    names: set[str] = set()
    for term in terms:
        pinned: frozenset[str] | None = None
        for req in term.match_fields:
            if req.key == NODE_NAME_FIELD and req.operator == IN:
                values = frozenset(req.values)
                pinned = values if pinned is None else pinned & values
        if pinned is None:
            return None  # this term can match any node, and terms are ORed
        names |= pinned
    return frozenset(names)


def _matches(required: _Required, node_name: str, labels: Mapping[str, str]) -> bool:
    for key, value in required.selector:
        if labels.get(key) != value:
            return False
    return required.terms is None or terms_match(required.terms, node_name, labels)


class NodeAffinity:
    name: ClassVar[str] = "NodeAffinity"

    def __init__(self, args: NodeAffinityArgs | None = None) -> None:
        added = parse_node_affinity(args.added_affinity if args else None, "addedAffinity")
        self._added_required = added.required if added is not None else None
        self._added_preferred = added.preferred if added is not None else ()
        self._rejected = unresolvable(REASON_POD)
        self._enforced = unresolvable(REASON_ENFORCED)
        self._conflict = unresolvable(REASON_CONFLICT)

    def pre_filter(
        self, state: CycleState, pod: PodView, snapshot: Snapshot
    ) -> tuple[PreFilterResult | None, Status]:
        required = _required_of(pod)
        if not required.selector and required.terms is None and self._added_required is None:
            return None, SKIP
        state.write(_REQUIRED, required)
        if not required.terms:  # no required affinity, or no terms (which matches no node)
            return None, OK
        names = _node_names_of(required.terms)
        if names is None:
            return None, OK
        if not names:
            return None, self._conflict
        return PreFilterResult(names), OK

    def filter(self, state: CycleState, pod: PodView, node: NodeInfo) -> Status:
        labels = node.node.labels
        added = self._added_required
        if added is not None and not terms_match(added, node.name, labels):
            return self._enforced
        # Without our PreFilter (enabled at Filter only) work it out per node, as kube does.
        required = state.get(_REQUIRED) or _required_of(pod)
        if not _matches(required, node.name, labels):
            return self._rejected
        return OK

    def pre_score(
        self, state: CycleState, pod: PodView, snapshot: Snapshot, nodes: Sequence[NodeInfo]
    ) -> Status:
        own = pod.node_affinity.preferred if pod.node_affinity is not None else ()
        preferred = self._added_preferred + own
        if not preferred:
            return SKIP
        state.write(_PREFERRED, preferred)
        return OK

    def score(self, state: CycleState, pod: PodView, node: NodeInfo) -> int:
        """The summed weights of the preferred terms this node matches."""
        labels = node.node.labels
        total = 0
        for preferred in state.read(_PREFERRED):
            if preferred.term.matches(node.name, labels):
                total += preferred.weight
        return total

    def normalize_scores(
        self, state: CycleState, pod: PodView, nodes: Sequence[NodeInfo], scores: list[int]
    ) -> None:
        default_normalize_score(scores, MAX_NODE_SCORE, reverse=False)
