"""NodeName: a pod that names its node (spec.nodeName set before scheduling) fits only there."""

from __future__ import annotations

from typing import ClassVar, Final

from batchsched.framework.cycle_state import CycleState
from batchsched.framework.interfaces import PreFilterResult
from batchsched.framework.registry import NoArgs
from batchsched.framework.status import OK, SKIP, Status, unresolvable
from batchsched.model.pod import PodView
from batchsched.snapshot import NodeInfo, Snapshot

REASON: Final = "node(s) didn't match the requested node name"


class NodeName:
    name: ClassVar[str] = "NodeName"

    def __init__(self, args: NoArgs | None = None) -> None:
        self._rejected = unresolvable(REASON)

    def pre_filter(
        self, state: CycleState, pod: PodView, snapshot: Snapshot
    ) -> tuple[PreFilterResult | None, Status]:
        # Pods we schedule have no nodeName; one that does is judged by Filter for the message.
        return None, (OK if pod.node_name else SKIP)

    def filter(self, state: CycleState, pod: PodView, node: NodeInfo) -> Status:
        if not pod.node_name or pod.node_name == node.name:
            return OK
        return self._rejected
