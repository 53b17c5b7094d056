"""Readers for the scheduling parts of a pod spec: tolerations, affinity, topology spread,
resource claims."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from batchsched.model.affinity import (
    NodeAffinity,
    PodAffinity,
    PodAffinityTerm,
    PreferredTerm,
    Toleration,
    TopologySpreadConstraint,
    WeightedPodAffinityTerm,
)
from batchsched.model.fields import (
    FieldError,
    as_int,
    as_list,
    as_map,
    as_str,
    label_selector,
    requirement,
)
from batchsched.model.selectors import (
    IN,
    NODE_OPERATORS,
    LabelSelector,
    NodeSelectorTerm,
    Requirement,
)

TAINT_EFFECTS = frozenset({"NoSchedule", "PreferNoSchedule", "NoExecute"})


@dataclass(frozen=True, slots=True)
class PodResourceClaim:
    """One entry of `spec.resourceClaims` (Dynamic Resource Allocation): the name the pod's
    containers use, and where the claim comes from: an existing ResourceClaim
    (`resourceClaimName`) or one made for the pod from a template
    (`resourceClaimTemplateName`). Exactly one of the two is set."""

    name: str
    claim_name: str = ""
    template_name: str = ""

    @property
    def from_template(self) -> bool:
        return bool(self.template_name)

    def describe(self) -> str:
        """E.g. "gpu (ResourceClaim shared-gpu)" or "scratch (ResourceClaimTemplate tmpl)"."""
        if self.from_template:
            return f"{self.name} (ResourceClaimTemplate {self.template_name})"
        return f"{self.name} (ResourceClaim {self.claim_name})"


def parse_tolerations(value: object, field: str) -> tuple[Toleration, ...]:
    """Remembered by value (issue #17): the API server gives nearly every pod the same two
    (not-ready and unreachable, DefaultTolerationSeconds), and the watch shows each pod twice
    or more. Only lists of plain text and integer values are remembered, so a value that
    reads differently (a bool equal to 1, a float) never meets another's answer."""
    key = _plain_items(value)
    if key is not None:
        known = _TOLERATIONS.get(key)
        if known is not None:
            return known
    parsed = _parse_tolerations(value, field)
    if key is not None and len(_TOLERATIONS) < _TOLERATIONS_KEPT:
        _TOLERATIONS[key] = parsed
    return parsed


_Items = tuple[tuple[tuple[str, str | int], ...], ...]
_TOLERATIONS: Final[dict[_Items, tuple[Toleration, ...]]] = {}
_TOLERATIONS_KEPT: Final = 1024


def _plain_items(value: object) -> _Items | None:
    if type(value) is not list:
        return None
    items = []
    for item in value:
        if type(item) is not dict:
            return None
        pairs = tuple(item.items())
        for name, text in pairs:
            if type(name) is not str or (type(text) is not str and type(text) is not int):
                return None
        items.append(pairs)
    return tuple(items)


def _parse_tolerations(value: object, field: str) -> tuple[Toleration, ...]:
    found = []
    for i, raw in enumerate(as_list(value, field)):
        item = as_map(raw, f"{field}[{i}]")
        operator = as_str(item.get("operator"), f"{field}[{i}].operator") or "Equal"
        if operator not in ("Equal", "Exists"):
            raise FieldError(f"{field}[{i}].operator", f"unknown operator {operator!r}")
        effect = as_str(item.get("effect"), f"{field}[{i}].effect")
        if effect and effect not in TAINT_EFFECTS:
            raise FieldError(f"{field}[{i}].effect", f"unknown taint effect {effect!r}")
        found.append(
            Toleration(
                key=as_str(item.get("key"), f"{field}[{i}].key"),
                operator=operator,
                value=as_str(item.get("value"), f"{field}[{i}].value"),
                effect=effect,
            )
        )
    return tuple(found)


def node_selector_term(value: object, field: str) -> NodeSelectorTerm:
    raw = as_map(value, field)
    exprs = tuple(
        requirement(r, f"{field}.matchExpressions[{i}]", NODE_OPERATORS)
        for i, r in enumerate(as_list(raw.get("matchExpressions"), f"{field}.matchExpressions"))
    )
    fields = tuple(
        requirement(r, f"{field}.matchFields[{i}]", NODE_OPERATORS)
        for i, r in enumerate(as_list(raw.get("matchFields"), f"{field}.matchFields"))
    )
    return NodeSelectorTerm(exprs, fields)


def parse_node_affinity(value: object, field: str) -> NodeAffinity | None:
    if value is None:
        return None
    raw = as_map(value, field)
    required: tuple[NodeSelectorTerm, ...] | None = None
    req_field = f"{field}.requiredDuringSchedulingIgnoredDuringExecution"
    req_raw = raw.get("requiredDuringSchedulingIgnoredDuringExecution")
    if req_raw is not None:
        terms_field = f"{req_field}.nodeSelectorTerms"
        terms = as_list(as_map(req_raw, req_field).get("nodeSelectorTerms"), terms_field)
        required = tuple(node_selector_term(t, f"{terms_field}[{i}]") for i, t in enumerate(terms))
    pref_field = f"{field}.preferredDuringSchedulingIgnoredDuringExecution"
    preferred = []
    for i, p in enumerate(
        as_list(raw.get("preferredDuringSchedulingIgnoredDuringExecution"), pref_field)
    ):
        item = as_map(p, f"{pref_field}[{i}]")
        weight = as_int(item.get("weight"), f"{pref_field}[{i}].weight")
        if not 1 <= weight <= 100:
            raise FieldError(f"{pref_field}[{i}].weight", f"must be 1..100, got {weight}")
        term = node_selector_term(item.get("preference"), f"{pref_field}[{i}].preference")
        preferred.append(PreferredTerm(weight, term))
    return NodeAffinity(required, tuple(preferred))


def pod_affinity_term(value: object, field: str, own_namespace: str) -> PodAffinityTerm:
    raw = as_map(value, field)
    topology_key = as_str(raw.get("topologyKey"), f"{field}.topologyKey")
    if not topology_key:
        raise FieldError(f"{field}.topologyKey", "must not be empty")
    namespaces = frozenset(
        as_str(n, f"{field}.namespaces[{i}]")
        for i, n in enumerate(as_list(raw.get("namespaces"), f"{field}.namespaces"))
    )
    ns_selector = label_selector(raw.get("namespaceSelector"), f"{field}.namespaceSelector")
    if not namespaces and ns_selector is None:
        namespaces = frozenset({own_namespace})
    selector = label_selector(raw.get("labelSelector"), f"{field}.labelSelector")
    return PodAffinityTerm(selector, topology_key, namespaces, ns_selector)


def parse_pod_affinity(value: object, field: str, own_namespace: str) -> PodAffinity | None:
    if value is None:
        return None
    raw = as_map(value, field)
    req_field = f"{field}.requiredDuringSchedulingIgnoredDuringExecution"
    required = tuple(
        pod_affinity_term(t, f"{req_field}[{i}]", own_namespace)
        for i, t in enumerate(
            as_list(raw.get("requiredDuringSchedulingIgnoredDuringExecution"), req_field)
        )
    )
    pref_field = f"{field}.preferredDuringSchedulingIgnoredDuringExecution"
    preferred = []
    for i, p in enumerate(
        as_list(raw.get("preferredDuringSchedulingIgnoredDuringExecution"), pref_field)
    ):
        item = as_map(p, f"{pref_field}[{i}]")
        weight = as_int(item.get("weight"), f"{pref_field}[{i}].weight")
        if not 1 <= weight <= 100:
            raise FieldError(f"{pref_field}[{i}].weight", f"must be 1..100, got {weight}")
        term = pod_affinity_term(
            item.get("podAffinityTerm"), f"{pref_field}[{i}].podAffinityTerm", own_namespace
        )
        preferred.append(WeightedPodAffinityTerm(weight, term))
    if not required and not preferred:
        return None
    return PodAffinity(required, tuple(preferred))


def parse_spread_constraints(
    value: object, field: str, pod_labels: Mapping[str, str]
) -> tuple[TopologySpreadConstraint, ...]:
    found = []
    for i, raw in enumerate(as_list(value, field)):
        f = f"{field}[{i}]"
        item = as_map(raw, f)
        max_skew = as_int(item.get("maxSkew"), f"{f}.maxSkew")
        if max_skew < 1:
            raise FieldError(f"{f}.maxSkew", f"must be at least 1, got {max_skew}")
        when = as_str(item.get("whenUnsatisfiable"), f"{f}.whenUnsatisfiable")
        if when not in ("DoNotSchedule", "ScheduleAnyway"):
            raise FieldError(f"{f}.whenUnsatisfiable", f"unknown value {when!r}")
        min_domains = as_int(item.get("minDomains"), f"{f}.minDomains", 1)
        if min_domains < 1:
            raise FieldError(f"{f}.minDomains", f"must be at least 1, got {min_domains}")
        keys = tuple(
            as_str(k, f"{f}.matchLabelKeys[{j}]")
            for j, k in enumerate(as_list(item.get("matchLabelKeys"), f"{f}.matchLabelKeys"))
        )
        selector = _with_match_label_keys(
            label_selector(item.get("labelSelector"), f"{f}.labelSelector"), keys, pod_labels
        )
        found.append(
            TopologySpreadConstraint(
                max_skew=max_skew,
                topology_key=as_str(item.get("topologyKey"), f"{f}.topologyKey"),
                when_unsatisfiable=when,
                selector=selector,
                min_domains=min_domains,
                node_affinity_policy=_policy(item, "nodeAffinityPolicy", f, "Honor"),
                node_taints_policy=_policy(item, "nodeTaintsPolicy", f, "Ignore"),
            )
        )
    return tuple(found)


def _policy(item: Mapping[str, object], key: str, field: str, default: str) -> str:
    policy = as_str(item.get(key), f"{field}.{key}") or default
    if policy not in ("Honor", "Ignore"):
        raise FieldError(f"{field}.{key}", f"must be Honor or Ignore, got {policy!r}")
    return policy


def _with_match_label_keys(
    selector: LabelSelector | None, keys: tuple[str, ...], pod_labels: Mapping[str, str]
) -> LabelSelector | None:
    # matchLabelKeys narrows the selector to pods sharing this pod's values for those keys.
    if selector is None or not keys:
        return selector
    extra = tuple(Requirement(k, IN, (pod_labels[k],)) for k in keys if k in pod_labels)
    return LabelSelector(selector.match_labels, selector.match_expressions + extra)


def parse_resource_claims(value: object, field: str) -> tuple[PodResourceClaim, ...]:
    """`spec.resourceClaims` as the API server validates it: each entry names itself (once in
    the pod) and exactly one of resourceClaimName and resourceClaimTemplateName."""
    found: list[PodResourceClaim] = []
    seen: set[str] = set()
    for i, raw in enumerate(as_list(value, field)):
        f = f"{field}[{i}]"
        item = as_map(raw, f)
        name = as_str(item.get("name"), f"{f}.name")
        if not name:
            raise FieldError(f"{f}.name", "must not be empty")
        if name in seen:
            raise FieldError(f"{f}.name", f"duplicate claim name {name!r}")
        seen.add(name)
        claim = as_str(item.get("resourceClaimName"), f"{f}.resourceClaimName")
        template = as_str(item.get("resourceClaimTemplateName"), f"{f}.resourceClaimTemplateName")
        if bool(claim) == bool(template):
            raise FieldError(
                f,
                "must set exactly one of resourceClaimName and resourceClaimTemplateName",
            )
        found.append(PodResourceClaim(name, claim, template))
    return tuple(found)


def parse_claim_statuses(
    value: object, field: str = "status.resourceClaimStatuses"
) -> dict[str, str]:
    """`status.resourceClaimStatuses`: pod claim name -> the ResourceClaim made for it."""
    found: dict[str, str] = {}
    for i, raw in enumerate(as_list(value, field)):
        item = as_map(raw, f"{field}[{i}]")
        name = as_str(item.get("name"), f"{field}[{i}].name")
        found[name] = as_str(item.get("resourceClaimName"), f"{field}[{i}].resourceClaimName")
    return found
