"""Label selectors and node selector terms, evaluated the way the API server defines them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

IN: Final = "In"
NOT_IN: Final = "NotIn"
EXISTS: Final = "Exists"
DOES_NOT_EXIST: Final = "DoesNotExist"
GT: Final = "Gt"
LT: Final = "Lt"

LABEL_OPERATORS: Final = frozenset({IN, NOT_IN, EXISTS, DOES_NOT_EXIST})
NODE_OPERATORS: Final = frozenset({IN, NOT_IN, EXISTS, DOES_NOT_EXIST, GT, LT})


@dataclass(frozen=True, slots=True)
class Requirement:
    """One `key operator values` clause of a label or node selector."""

    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        op = self.operator
        if op == IN:
            return self.key in labels and labels[self.key] in self.values
        if op == NOT_IN:
            return self.key not in labels or labels[self.key] not in self.values
        if op == EXISTS:
            return self.key in labels
        if op == DOES_NOT_EXIST:
            return self.key not in labels
        if op in (GT, LT):
            return _compare_int(labels.get(self.key), self.values, op)
        return False


def _compare_int(actual: str | None, values: tuple[str, ...], op: str) -> bool:
    # Gt/Lt take exactly one integer value; a label that is not an integer never matches.
    if actual is None or len(values) != 1:
        return False
    try:
        have, want = int(actual), int(values[0])
    except ValueError:
        return False
    return have > want if op == GT else have < want


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """metav1.LabelSelector: matchLabels AND matchExpressions; empty selects everything."""

    match_labels: tuple[tuple[str, str], ...] = ()
    match_expressions: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        for key, value in self.match_labels:
            if labels.get(key) != value:
                return False
        return all(req.matches(labels) for req in self.match_expressions)

    def is_empty(self) -> bool:
        return not self.match_labels and not self.match_expressions


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    """A term matches when all its expressions (labels) and fields (metadata.name) match."""

    match_expressions: tuple[Requirement, ...] = ()
    match_fields: tuple[Requirement, ...] = ()

    def matches(self, node_name: str, labels: Mapping[str, str]) -> bool:
        # A term with no requirements matches nothing (API semantics for node selector terms).
        if not self.match_expressions and not self.match_fields:
            return False
        if not all(req.matches(labels) for req in self.match_expressions):
            return False
        fields = {"metadata.name": node_name}
        return all(req.matches(fields) for req in self.match_fields)


def terms_match(
    terms: tuple[NodeSelectorTerm, ...], node_name: str, labels: Mapping[str, str]
) -> bool:
    """Node selector terms are ORed."""
    return any(term.matches(node_name, labels) for term in terms)
