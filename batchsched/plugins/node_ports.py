"""NodePorts: a pod's host ports must be free on the node (same protocol and port, and the same
address or either side bound to every address, 0.0.0.0, is a conflict)."""

from __future__ import annotations

from typing import ClassVar, Final

from batchsched.framework.cycle_state import CycleState
from batchsched.framework.interfaces import PreFilterResult
from batchsched.framework.registry import NoArgs
from batchsched.framework.status import OK, SKIP, Status, unschedulable
from batchsched.model.pod import PodView
from batchsched.snapshot import NodeInfo, Snapshot

REASON: Final = "node(s) didn't have free ports for the requested pod ports"


class NodePorts:
    name: ClassVar[str] = "NodePorts"

    def __init__(self, args: NoArgs | None = None) -> None:
        # Unschedulable, not unresolvable: evicting the pod holding the port frees it.
        self._rejected = unschedulable(REASON)

    def pre_filter(
        self, state: CycleState, pod: PodView, snapshot: Snapshot
    ) -> tuple[PreFilterResult | None, Status]:
        # The pod view already holds its host ports, parsed once; Filter reads them there.
        return None, (OK if pod.host_ports else SKIP)

    def filter(self, state: CycleState, pod: PodView, node: NodeInfo) -> Status:
        used = node.used_ports
        if not used:
            return OK
        for wanted in pod.host_ports:
            for taken in used:
                if wanted.conflicts(taken):
                    return self._rejected
        return OK
