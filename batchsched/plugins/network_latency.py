"""NetworkLatency (reference plugin, off by default): place a gang's members where the network
latency to the members already placed is lowest.

Nodes are grouped into domains by a label (`topologyKey`: a zone, or a rack label); the
operator gives the latency between domains (`latencies`, milliseconds, one direction given is
enough) and within one (`sameDomain`). PreScore finds where the pod's gang has members (the
ones bound, and the ones placed earlier in this cycle's trial); Score is a node's mean latency
to them, so lower is better and NormalizeScore reverses it. A pod without a gang, or whose
gang has no member placed yet, scores every node alike. A pair of domains the matrix lacks,
or a node without the label, costs `unknown`.

It needs its PreScore: enable it in `multiPoint` (or at both preScore and score).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar, Final

from pydantic import Field, field_validator

from batchsched.framework.cycle_state import CycleState, StateKey
from batchsched.framework.interfaces import MAX_NODE_SCORE
from batchsched.framework.normalize import default_normalize_score
from batchsched.framework.registry import PluginArgs
from batchsched.framework.status import OK, SKIP, Status
from batchsched.gang.podgroup import pod_group_of
from batchsched.model.pod import PodView
from batchsched.snapshot import NodeInfo, Snapshot


class NetworkLatencyArgs(PluginArgs):
    topology_key: str = "topology.kubernetes.io/zone"
    latencies: dict[str, dict[str, float]] = Field(default_factory=dict)
    same_domain: float = Field(default=0.0, ge=0)
    unknown: float = Field(default=100.0, ge=0)

    @field_validator("latencies")
    @classmethod
    def _not_negative(cls, value: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
        for a, row in value.items():
            for b, ms in row.items():
                if ms < 0:
                    raise ValueError(f"latency {a} -> {b} is negative: {ms}")
        return value


@dataclass(frozen=True, slots=True)
class _Members:
    domains: tuple[str | None, ...]  # the domain of each placed member (None: unlabelled node)


_MEMBERS: Final[StateKey[_Members]] = StateKey("NetworkLatency/members")


class NetworkLatency:
    name: ClassVar[str] = "NetworkLatency"

    def __init__(self, args: NetworkLatencyArgs | None = None) -> None:
        self.args = args or NetworkLatencyArgs()
        self._matrix = _symmetric(self.args.latencies)

    def latency(self, a: str | None, b: str | None) -> float:
        if a is None or b is None:
            return self.args.unknown
        if a == b:
            return self._matrix.get((a, b), self.args.same_domain)
        return self._matrix.get((a, b), self.args.unknown)

    def pre_score(
        self, state: CycleState, pod: PodView, snapshot: Snapshot, nodes: Sequence[NodeInfo]
    ) -> Status:
        group = pod_group_of(pod)
        if group is None:
            return SKIP
        key = self.args.topology_key
        domains = tuple(
            info.node.labels.get(key)
            for info in snapshot
            for other in info.pods.values()
            if other.uid != pod.uid and pod_group_of(other) == group
        )
        if not domains:
            return SKIP  # the first member: nothing to be near yet
        state.write(_MEMBERS, _Members(domains))
        return OK

    def score(self, state: CycleState, pod: PodView, node: NodeInfo) -> int:
        members = state.get(_MEMBERS)
        if members is None:
            return 0
        here = node.node.labels.get(self.args.topology_key)
        total = sum(self.latency(here, there) for there in members.domains)
        return round(1000 * total / len(members.domains))  # mean, in microseconds

    def normalize_scores(
        self, state: CycleState, pod: PodView, nodes: Sequence[NodeInfo], scores: list[int]
    ) -> None:
        if state.get(_MEMBERS) is None:
            scores[:] = [0] * len(scores)
            return
        default_normalize_score(scores, MAX_NODE_SCORE, reverse=True)


def _symmetric(given: Mapping[str, Mapping[str, float]]) -> dict[tuple[str, str], float]:
    """Both directions of each pair; where both are given, the one given for (a, b) wins."""
    matrix: dict[tuple[str, str], float] = {}
    for a, row in given.items():
        for b, ms in row.items():
            matrix.setdefault((b, a), ms)
            matrix[(a, b)] = ms
    return matrix
