"""TaintToleration: a node's NoSchedule/NoExecute taints must be tolerated; PreferNoSchedule
taints the pod does not tolerate only lower the node's score."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar, Final

from batchsched.framework.cycle_state import CycleState, StateKey
from batchsched.framework.interfaces import MAX_NODE_SCORE
from batchsched.framework.normalize import default_normalize_score
from batchsched.framework.registry import NoArgs
from batchsched.framework.status import OK, SKIP, Status, unresolvable
from batchsched.model.affinity import Taint, Toleration
from batchsched.model.pod import PodView
from batchsched.snapshot import NodeInfo, Snapshot

PREFER_NO_SCHEDULE: Final = "PreferNoSchedule"
# Distinct taints in a cluster are few; the cap only guards against unbounded churn.
_MAX_CACHED_REJECTIONS: Final = 1024

_PREFER_TOLERATIONS: Final[StateKey[tuple[Toleration, ...]]] = StateKey(
    "TaintToleration/preferTolerations"
)


def reason(taint: Taint) -> str:
    return f"node(s) had untolerated taint {taint}"


class TaintToleration:
    name: ClassVar[str] = "TaintToleration"

    def __init__(self, args: NoArgs | None = None) -> None:
        self._rejections: dict[Taint, Status] = {}

    def filter(self, state: CycleState, pod: PodView, node: NodeInfo) -> Status:
        taints = node.node.taints
        if not taints:
            return OK
        tolerations = pod.tolerations
        for taint in taints:
            if taint.effect == PREFER_NO_SCHEDULE:
                continue
            if not any(t.tolerates(taint) for t in tolerations):
                return self._rejection(taint)
        return OK

    def _rejection(self, taint: Taint) -> Status:
        status = self._rejections.get(taint)
        if status is None:
            if len(self._rejections) >= _MAX_CACHED_REJECTIONS:
                self._rejections.clear()
            # Preemption cannot remove a taint, so no victim set can make the node fit.
            status = self._rejections[taint] = unresolvable(reason(taint))
        return status

    def pre_score(
        self, state: CycleState, pod: PodView, snapshot: Snapshot, nodes: Sequence[NodeInfo]
    ) -> Status:
        # Without PreferNoSchedule taints anywhere every node would score the same.
        if not snapshot.has_prefer_no_schedule_taints:
            return SKIP
        state.write(
            _PREFER_TOLERATIONS,
            tuple(t for t in pod.tolerations if t.effect in ("", PREFER_NO_SCHEDULE)),
        )
        return OK

    def score(self, state: CycleState, pod: PodView, node: NodeInfo) -> int:
        """The number of PreferNoSchedule taints the pod does not tolerate (fewer is better)."""
        taints = node.node.taints
        if not taints:
            return 0
        tolerations = state.read(_PREFER_TOLERATIONS)
        count = 0
        for taint in taints:
            if taint.effect == PREFER_NO_SCHEDULE and not any(
                t.tolerates(taint) for t in tolerations
            ):
                count += 1
        return count

    def normalize_scores(
        self, state: CycleState, pod: PodView, nodes: Sequence[NodeInfo], scores: list[int]
    ) -> None:
        default_normalize_score(scores, MAX_NODE_SCORE, reverse=True)
