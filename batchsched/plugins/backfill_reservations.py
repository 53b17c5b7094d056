"""BackfillReservations: keeps a pod off the nodes where starting it now would delay a gang's
backfill reservation, so it lands where it delays nobody instead of being held back.

The reservations are the scheduler's (`batchsched.backfill`); the runtime or the simulator
attaches a guard that answers, for one pod, which nodes it must not use. Without a guard, or
when nothing reserved is ahead of the pod in line, PreFilter skips the plugin. A pod that runs
into no reservation's window (it ends before the reservation begins) is not refused anywhere,
and one that leaves a reserved node enough room for the reservation may use it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar, Final, Protocol

from batchsched.framework.cycle_state import CycleState, StateKey
from batchsched.framework.interfaces import PreFilterResult
from batchsched.framework.profile import Profile
from batchsched.framework.registry import NoArgs
from batchsched.framework.status import OK, SKIP, Status, unschedulable
from batchsched.model.pod import PodView
from batchsched.snapshot import NodeInfo, Snapshot


def reserved_for(gang: str) -> str:
    """The Filter reason; it names the gang, so the aggregate says whom the pod waits for."""
    return f"node(s) reserved for {gang} (backfill)"


class NodeVerdicts(Protocol):
    def refuses(self, node: str) -> str:
        """The gang whose reservation ahead of this pod it would delay on `node`, or ""."""
        ...


class ReservationGuard(Protocol):
    def verdicts(self, pod: PodView) -> NodeVerdicts | None:
        """None when no reservation ahead of the pod could be delayed by it."""
        ...


_VERDICTS: Final = StateKey[NodeVerdicts]("BackfillReservations")


class BackfillReservations:
    name: ClassVar[str] = "BackfillReservations"

    def __init__(self, args: NoArgs | None = None, guard: ReservationGuard | None = None) -> None:
        self.guard = guard

    def pre_filter(
        self, state: CycleState, pod: PodView, snapshot: Snapshot
    ) -> tuple[PreFilterResult | None, Status]:
        verdicts = self.guard.verdicts(pod) if self.guard is not None else None
        if verdicts is None:
            return None, SKIP
        state.write(_VERDICTS, verdicts)
        return None, OK

    def filter(self, state: CycleState, pod: PodView, node: NodeInfo) -> Status:
        gang = state.read(_VERDICTS).refuses(node.name)
        return unschedulable(reserved_for(gang)) if gang else OK


def attach_reservation_guard(profiles: Mapping[str, Profile], guard: ReservationGuard) -> None:
    """Give every profile's BackfillReservations the scheduler's reservations (the registry
    builds plugins without state)."""
    for profile in profiles.values():
        for plugin in profile.filter:
            if isinstance(plugin, BackfillReservations):
                plugin.guard = guard
