"""SchedulingGates: a pod with spec.schedulingGates stays out of the active queue."""

from __future__ import annotations

from typing import ClassVar

from batchsched.framework.registry import NoArgs
from batchsched.framework.status import OK, Status, unresolvable
from batchsched.model.pod import PodView


class SchedulingGates:
    name: ClassVar[str] = "SchedulingGates"

    def __init__(self, args: NoArgs | None = None) -> None:
        pass

    def pre_enqueue(self, pod: PodView) -> Status:
        if not pod.scheduling_gates:
            return OK
        return unresolvable(f"waiting for scheduling gates: [{', '.join(pod.scheduling_gates)}]")
