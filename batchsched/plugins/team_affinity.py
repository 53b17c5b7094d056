"""TeamAffinity (reference plugin, off by default): keep a team's workloads together, or apart.

The team is a pod label (`teamLabel`). `mode: pack` prefers the nodes already running the most
pods of the pod's team (fewer nodes touched, data and caches shared, whole nodes left for
others); `mode: spread` prefers the fewest (one node's failure hurts a team less). A pod
without the label scores every node alike. Pods of the team count wherever they run, the
gang's members placed earlier in this cycle's trial included.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar, Literal

from batchsched.framework.cycle_state import CycleState
from batchsched.framework.interfaces import MAX_NODE_SCORE
from batchsched.framework.normalize import default_normalize_score
from batchsched.framework.registry import PluginArgs
from batchsched.model.pod import PodView
from batchsched.snapshot import NodeInfo


class TeamAffinityArgs(PluginArgs):
    team_label: str = "batchsched.io/team"
    mode: Literal["pack", "spread"] = "pack"


class TeamAffinity:
    name: ClassVar[str] = "TeamAffinity"

    def __init__(self, args: TeamAffinityArgs | None = None) -> None:
        self.args = args or TeamAffinityArgs()

    def score(self, state: CycleState, pod: PodView, node: NodeInfo) -> int:
        key = self.args.team_label
        team = pod.labels.get(key)
        if team is None:
            return 0
        return sum(1 for p in node.pods.values() if p.labels.get(key) == team and p.uid != pod.uid)

    def normalize_scores(
        self, state: CycleState, pod: PodView, nodes: Sequence[NodeInfo], scores: list[int]
    ) -> None:
        if self.args.team_label not in pod.labels:
            scores[:] = [0] * len(scores)
            return
        default_normalize_score(scores, MAX_NODE_SCORE, reverse=self.args.mode == "spread")
