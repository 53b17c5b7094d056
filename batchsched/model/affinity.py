"""Scheduling constraints a pod carries: tolerations, affinity, topology spread, host ports."""

from __future__ import annotations

from dataclasses import dataclass

from batchsched.model.selectors import LabelSelector, NodeSelectorTerm


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str
    effect: str  # NoSchedule | PreferNoSchedule | NoExecute

    def __str__(self) -> str:
        return f"{{{self.key}: {self.value}}}"


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"  # Equal | Exists
    value: str = ""
    effect: str = ""  # empty tolerates every effect

    def tolerates(self, taint: Taint) -> bool:
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        return self.value == taint.value


def tolerates_all(tolerations: tuple[Toleration, ...], taint: Taint) -> bool:
    return any(t.tolerates(taint) for t in tolerations)


@dataclass(frozen=True, slots=True)
class PreferredTerm:
    weight: int
    term: NodeSelectorTerm


@dataclass(frozen=True, slots=True)
class NodeAffinity:
    required: tuple[NodeSelectorTerm, ...] | None = None  # None: no requirement
    preferred: tuple[PreferredTerm, ...] = ()


@dataclass(frozen=True, slots=True)
class PodAffinityTerm:
    """Pods matching `selector` in `namespaces` (or namespaces matching `namespace_selector`)."""

    selector: LabelSelector | None
    topology_key: str
    namespaces: frozenset[str]
    namespace_selector: LabelSelector | None

    def selects_namespace(self, namespace: str, namespace_labels: dict[str, str] | None) -> bool:
        if namespace in self.namespaces:
            return True
        if self.namespace_selector is None:
            return False
        return self.namespace_selector.matches(namespace_labels or {})

    def selects(
        self, namespace: str, labels: dict[str, str], ns_labels: dict[str, str] | None
    ) -> bool:
        if self.selector is None or not self.selects_namespace(namespace, ns_labels):
            return False
        return self.selector.matches(labels)


@dataclass(frozen=True, slots=True)
class WeightedPodAffinityTerm:
    weight: int
    term: PodAffinityTerm


@dataclass(frozen=True, slots=True)
class PodAffinity:
    """Affinity or anti-affinity, depending on which field of PodView holds it."""

    required: tuple[PodAffinityTerm, ...] = ()
    preferred: tuple[WeightedPodAffinityTerm, ...] = ()


@dataclass(frozen=True, slots=True)
class TopologySpreadConstraint:
    max_skew: int
    topology_key: str
    when_unsatisfiable: str  # DoNotSchedule | ScheduleAnyway
    selector: LabelSelector | None
    min_domains: int = 1
    node_affinity_policy: str = "Honor"  # Honor | Ignore
    node_taints_policy: str = "Ignore"  # Honor | Ignore


@dataclass(frozen=True, slots=True)
class HostPort:
    ip: str  # "0.0.0.0" means every address
    protocol: str
    port: int

    def conflicts(self, other: HostPort) -> bool:
        if self.port != other.port or self.protocol != other.protocol:
            return False
        wildcard = "0.0.0.0"
        return self.ip == other.ip or self.ip == wildcard or other.ip == wildcard
