"""Plugin results: a code that separates "doesn't fit" from "preemption can't help" from a bug."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Final


class Code(IntEnum):
    SUCCESS = 0
    ERROR = 1
    UNSCHEDULABLE = 2
    UNSCHEDULABLE_AND_UNRESOLVABLE = 3
    WAIT = 4
    SKIP = 5

    @property
    def kube_name(self) -> str:
        """The spelling kube-scheduler uses in metric labels: "Success", "Unschedulable", ..."""
        return "".join(part.capitalize() for part in self.name.split("_"))


@dataclass(frozen=True, slots=True)
class Status:
    code: Code
    reasons: tuple[str, ...] = ()
    plugin: str = ""

    @property
    def is_success(self) -> bool:
        return self.code is Code.SUCCESS

    @property
    def is_rejection(self) -> bool:
        return self.code in (Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE)

    def message(self) -> str:
        return ", ".join(self.reasons)

    def with_plugin(self, plugin: str) -> Status:
        return self if self.plugin else Status(self.code, self.reasons, plugin)


# Plugins return this very object on success; the runner checks identity first (hot path).
OK: Final = Status(Code.SUCCESS)
SKIP: Final = Status(Code.SKIP)


def unschedulable(*reasons: str) -> Status:
    return Status(Code.UNSCHEDULABLE, reasons)


def unresolvable(*reasons: str) -> Status:
    return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, reasons)


def error(reason: str) -> Status:
    return Status(Code.ERROR, (reason,))


def is_ok(status: Status) -> bool:
    return status is OK or status.code is Code.SUCCESS
