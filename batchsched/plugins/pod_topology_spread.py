"""PodTopologySpread: spread matching pods evenly over topology domains (zones, hosts, ...).

DoNotSchedule constraints are a Filter: a node is rejected when placing the pod in its domain
would leave that domain more than maxSkew matching pods above the global minimum.
ScheduleAnyway constraints are a Score that prefers the domains holding fewer matching pods
(weighted by how many domains there are, so a spread over many hosts is not drowned by a
spread over a few zones).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import ClassVar, Final, Literal

from pydantic import Field, model_validator

from batchsched.framework.cycle_state import CycleState, StateKey
from batchsched.framework.interfaces import MAX_NODE_SCORE, PreFilterResult
from batchsched.framework.registry import PluginArgs
from batchsched.framework.status import OK, SKIP, Status, unresolvable, unschedulable
from batchsched.model.affinity import TopologySpreadConstraint, tolerates_all
from batchsched.model.node import NodeView
from batchsched.model.pod import PodView
from batchsched.model.selectors import LabelSelector, terms_match
from batchsched.snapshot import NodeInfo, Snapshot

DO_NOT_SCHEDULE: Final = "DoNotSchedule"
SCHEDULE_ANYWAY: Final = "ScheduleAnyway"
HONOR: Final = "Honor"
HOSTNAME_KEY: Final = "kubernetes.io/hostname"

REASON_SKEW: Final = "node(s) didn't match pod topology spread constraints"
REASON_MISSING_LABEL: Final = f"{REASON_SKEW} (missing required label)"

# Taint effects that keep a pod off a node; PreferNoSchedule only steers scoring.
_HARD_TAINT_EFFECTS: Final = frozenset({"NoSchedule", "NoExecute"})

# kube derives a default constraint's selector from the Services, ReplicaSets and StatefulSets
# that own a pod. Batch pods have none of those; what groups them is the gang (PodGroup label)
# and the Job that created them, so those labels play the owner's part here.
WORKLOAD_LABELS: Final = (
    "scheduling.x-k8s.io/pod-group",
    "pod-group.scheduling.sigs.k8s.io",
    "batch.kubernetes.io/job-name",
)


class DefaultConstraint(PluginArgs):
    """A cluster-wide constraint for pods that declare none; its selector is derived per pod."""

    max_skew: int = Field(ge=1)
    topology_key: str = Field(min_length=1)
    when_unsatisfiable: Literal["DoNotSchedule", "ScheduleAnyway"]


class PodTopologySpreadArgs(PluginArgs):
    default_constraints: tuple[DefaultConstraint, ...] = ()
    # kube defaults to "System" (hostname maxSkew 3 and zone maxSkew 5, ScheduleAnyway), whose
    # selector comes from the Services/ReplicaSets/StatefulSets selecting the pod. Our pods are
    # batch jobs with no such owner, and we do not watch those objects, so "System" would find
    # no selector for any pod: here it means "no default constraints". "List" applies
    # `defaultConstraints` with a selector built from the pod's WORKLOAD_LABELS instead.
    defaulting_type: Literal["System", "List"] = "List"

    @model_validator(mode="after")
    def _check_defaults(self) -> PodTopologySpreadArgs:
        if self.defaulting_type == "System" and self.default_constraints:
            raise ValueError("defaultConstraints must be empty when defaultingType is System")
        seen: set[tuple[str, str]] = set()
        for c in self.default_constraints:
            pair = (c.topology_key, c.when_unsatisfiable)
            if pair in seen:
                raise ValueError(f"defaultConstraints has {pair[0]!r} {pair[1]} twice")
            seen.add(pair)
        return self


@dataclass(frozen=True, slots=True)
class HardConstraint:
    """One DoNotSchedule constraint as Filter checks it, with this cycle's domain counts."""

    topology_key: str
    counts: dict[str, int]  # domain value -> matching pods, over the eligible nodes
    limit: int  # a domain holding more matching pods than this would exceed maxSkew


@dataclass(frozen=True, slots=True)
class SoftConstraint:
    """One ScheduleAnyway constraint as Score applies it."""

    topology_key: str
    selector: LabelSelector | None
    counts: dict[str, int] | None  # None for hostname: Score counts the node's own pods
    weight: float  # log(domains + 2): more domains, more weight per matching pod
    skew_credit: int  # maxSkew - 1 added to every node, which waters down small differences


@dataclass(frozen=True, slots=True)
class ScoreState:
    constraints: tuple[SoftConstraint, ...]
    ignored: frozenset[str]  # feasible nodes lacking a topology key: they score 0


# Typed by annotation: calling StateKey[T](...) fails on a frozen slots dataclass.
_FILTER_STATE: Final[StateKey[tuple[HardConstraint, ...]]] = StateKey("PodTopologySpread/filter")
_SCORE_STATE: Final[StateKey[ScoreState]] = StateKey("PodTopologySpread/score")


class PodTopologySpread:
    name: ClassVar[str] = "PodTopologySpread"

    def __init__(self, args: PodTopologySpreadArgs | None = None) -> None:
        self._args = args if args is not None else PodTopologySpreadArgs()
        self._missing_label = unresolvable(REASON_MISSING_LABEL)
        self._skewed = unschedulable(REASON_SKEW)

    def constraints(self, pod: PodView, when: str) -> tuple[TopologySpreadConstraint, ...]:
        """The pod's own constraints of kind `when`, or the configured defaults if it has none."""
        if pod.spread_constraints:
            return tuple(c for c in pod.spread_constraints if c.when_unsatisfiable == when)
        return default_constraints(self._args, pod, when)

    def pre_filter(
        self, state: CycleState, pod: PodView, snapshot: Snapshot
    ) -> tuple[PreFilterResult | None, Status]:
        hard = self.constraints(pod, DO_NOT_SCHEDULE)
        if not hard:
            return None, SKIP
        counts = count_domains(pod, hard, snapshot.nodes)
        checks = []
        for c, domains in zip(hard, counts, strict=True):
            # Too few eligible domains means some are still empty: the minimum is 0.
            global_min = min(domains.values()) if len(domains) >= c.min_domains else 0
            self_match = 1 if c.selector is not None and c.selector.matches(pod.labels) else 0
            limit = c.max_skew + global_min - self_match
            checks.append(HardConstraint(c.topology_key, domains, limit))
        state.write(_FILTER_STATE, tuple(checks))
        return None, OK

    def filter(self, state: CycleState, pod: PodView, node: NodeInfo) -> Status:
        labels = node.node.labels
        for check in state.read(_FILTER_STATE):
            value = labels.get(check.topology_key)
            if value is None:
                return self._missing_label
            if check.counts.get(value, 0) > check.limit:
                return self._skewed
        return OK

    def pre_score(
        self, state: CycleState, pod: PodView, snapshot: Snapshot, nodes: Sequence[NodeInfo]
    ) -> Status:
        soft = self.constraints(pod, SCHEDULE_ANYWAY)
        if not soft:
            return SKIP
        keys = tuple(c.topology_key for c in soft)
        scored = [info for info in nodes if all(k in info.node.labels for k in keys)]
        scored_names = {info.name for info in scored}
        ignored = frozenset(info.name for info in nodes if info.name not in scored_names)
        prepared = soft_constraints(pod, soft, snapshot.nodes, scored)
        state.write(_SCORE_STATE, ScoreState(prepared, ignored))
        return OK

    def score(self, state: CycleState, pod: PodView, node: NodeInfo) -> int:
        """The node's weighted count of matching pods: lower is better until normalized."""
        prepared = state.read(_SCORE_STATE)
        if node.name in prepared.ignored:
            return 0
        labels = node.node.labels
        total = 0.0
        for c in prepared.constraints:
            if c.counts is None:
                found = matching_pods(node, c.selector, pod.namespace)
            else:
                found = c.counts.get(labels[c.topology_key], 0)
            total += found * c.weight + c.skew_credit
        return int(total + 0.5)  # total >= 0: rounds half up, as kube's math.Round does

    def normalize_scores(
        self, state: CycleState, pod: PodView, nodes: Sequence[NodeInfo], scores: list[int]
    ) -> None:
        """Invert: the fewest matching pods gets 100, relative to the most (kube's formula)."""
        ignored = state.read(_SCORE_STATE).ignored
        kept = [s for info, s in zip(nodes, scores, strict=True) if info.name not in ignored]
        high = max(kept, default=0)
        low = min(kept, default=0)
        for i, info in enumerate(nodes):
            if info.name in ignored:
                scores[i] = 0
            elif high == 0:
                scores[i] = MAX_NODE_SCORE
            else:
                scores[i] = MAX_NODE_SCORE * (high + low - scores[i]) // high


def soft_constraints(
    pod: PodView,
    soft: Sequence[TopologySpreadConstraint],
    all_nodes: Iterable[NodeInfo],
    scored: Sequence[NodeInfo],
) -> tuple[SoftConstraint, ...]:
    """Domain counts and weights for scoring `scored`, the feasible nodes with every key."""
    # Only domains of the nodes being scored matter; hostname counts are the node's own.
    domains = [
        frozenset[str]()
        if c.topology_key == HOSTNAME_KEY
        else frozenset(info.node.labels[c.topology_key] for info in scored)
        for c in soft
    ]
    # Spreading over hostnames only needs no pass over the cluster.
    counts = count_domains(pod, soft, all_nodes, domains) if any(domains) else [{} for _ in soft]
    prepared = []
    for i, c in enumerate(soft):
        hostname = c.topology_key == HOSTNAME_KEY
        size = len(scored) if hostname else len(domains[i])
        prepared.append(
            SoftConstraint(
                c.topology_key,
                c.selector,
                None if hostname else counts[i],
                math.log(size + 2),
                c.max_skew - 1,
            )
        )
    return tuple(prepared)


def default_constraints(
    args: PodTopologySpreadArgs, pod: PodView, when: str
) -> tuple[TopologySpreadConstraint, ...]:
    """The List defaults of kind `when` for a pod without constraints of its own."""
    if args.defaulting_type != "List" or not args.default_constraints:
        return ()
    owner = tuple(sorted((k, pod.labels[k]) for k in WORKLOAD_LABELS if k in pod.labels))
    if not owner:
        return ()  # as in kube: no owner selector, no default spreading
    selector = LabelSelector(match_labels=owner)
    return tuple(
        TopologySpreadConstraint(c.max_skew, c.topology_key, c.when_unsatisfiable, selector)
        for c in args.default_constraints
        if c.when_unsatisfiable == when
    )


def count_domains(
    pod: PodView,
    constraints: Sequence[TopologySpreadConstraint],
    nodes: Iterable[NodeInfo],
    wanted: Sequence[frozenset[str] | None] | None = None,
) -> list[dict[str, int]]:
    """Matching pods per domain for each constraint, over the nodes eligible for it.

    A node is eligible when it carries every constraint's topology key and passes the
    constraint's inclusion policies. `wanted[i]`, when given and not None, limits constraint i
    to those domains; other domains are left out entirely (scoring looks at no others).
    """
    keys = frozenset(c.topology_key for c in constraints)
    counts: list[dict[str, int]] = [{} for _ in constraints]
    for info in nodes:
        node = info.node
        labels = node.labels
        if not labels.keys() >= keys:
            continue
        selected: bool | None = None  # worked out once per node, and only when a policy asks
        tolerated: bool | None = None
        for i, c in enumerate(constraints):
            value = labels[c.topology_key]
            only = wanted[i] if wanted is not None else None
            if only is not None and value not in only:
                continue
            if c.node_affinity_policy == HONOR:
                if selected is None:
                    selected = node_selection_matches(pod, node)
                if not selected:
                    continue
            if c.node_taints_policy == HONOR:
                if tolerated is None:
                    tolerated = tolerates_hard_taints(pod, node)
                if not tolerated:
                    continue
            domain = counts[i]
            domain[value] = domain.get(value, 0) + matching_pods(info, c.selector, pod.namespace)
    return counts


def node_selection_matches(pod: PodView, node: NodeView) -> bool:
    """The pod's nodeSelector and required node affinity (kube's RequiredNodeAffinity)."""
    labels = node.labels
    for key, value in pod.node_selector.items():
        if labels.get(key) != value:
            return False
    affinity = pod.node_affinity
    if affinity is None or affinity.required is None:
        return True
    return terms_match(affinity.required, node.name, labels)


def tolerates_hard_taints(pod: PodView, node: NodeView) -> bool:
    return all(
        tolerates_all(pod.tolerations, taint)
        for taint in node.taints
        if taint.effect in _HARD_TAINT_EFFECTS
    )


def matching_pods(info: NodeInfo, selector: LabelSelector | None, namespace: str) -> int:
    """Pods on the node in `namespace` that the selector picks, leaving out terminating ones."""
    pods = info.pods
    # kube counts nothing for an empty selector (it would otherwise pick every pod).
    if not pods or selector is None or selector.is_empty():
        return 0
    matches = selector.matches
    found = 0
    for other in pods.values():
        if matches(other.labels) and other.namespace == namespace and not other.deleting:
            found += 1
    return found
