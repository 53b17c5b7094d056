"""PrioritySort: higher priority first, then whoever has waited longer."""

from __future__ import annotations

from typing import ClassVar

from batchsched.framework.interfaces import OrderKey, QueuedPod
from batchsched.framework.registry import NoArgs


class PrioritySort:
    name: ClassVar[str] = "PrioritySort"

    def __init__(self, args: NoArgs | None = None) -> None:
        pass

    def less(self, a: QueuedPod, b: QueuedPod) -> bool:
        if a.pod.priority != b.pod.priority:
            return a.pod.priority > b.pod.priority
        return a.enqueued_at < b.enqueued_at

    def order_key(self, qp: QueuedPod) -> OrderKey:
        return (-qp.pod.priority, qp.enqueued_at)
