"""NodeUnschedulable: cordoned nodes take only pods that tolerate the unschedulable taint."""

from __future__ import annotations

from typing import ClassVar, Final

from batchsched.framework.cycle_state import CycleState
from batchsched.framework.registry import NoArgs
from batchsched.framework.status import OK, Status, unresolvable
from batchsched.model.affinity import Taint, tolerates_all
from batchsched.model.pod import PodView
from batchsched.snapshot import NodeInfo

UNSCHEDULABLE_TAINT: Final = Taint("node.kubernetes.io/unschedulable", "", "NoSchedule")
REASON: Final = "node(s) were unschedulable"


class NodeUnschedulable:
    name: ClassVar[str] = "NodeUnschedulable"

    def __init__(self, args: NoArgs | None = None) -> None:
        self._rejected = unresolvable(REASON)

    def filter(self, state: CycleState, pod: PodView, node: NodeInfo) -> Status:
        if not node.node.unschedulable:
            return OK
        if tolerates_all(pod.tolerations, UNSCHEDULABLE_TAINT):
            return OK
        return self._rejected
