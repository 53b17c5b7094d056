"""One preemptor's plan in flight: the capacity it holds, and what it says about itself.

Holding the capacity: each preemptor pod is counted on its nominated node as a placeholder
(its own view under the uid `nominated/<uid>`), over-committing the node while the victims
terminate, so no other pod takes what they free. `Preempting` (runtime/preempting.py) decides
when a flight is held and when lifted.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from batchsched.gang.podgroup import PodGroupView
from batchsched.kube.binder import ObjectRef
from batchsched.model.pod import PodView
from batchsched.model.resources import NVIDIA_GPU
from batchsched.preemption.execution import Execution
from batchsched.preemption.model import PreemptionPlan
from batchsched.snapshot import Snapshot

NOMINATED_PREFIX: Final = "nominated/"


@dataclass(eq=False)
class InFlight:
    """One preemptor's plan: the capacity held while its victims terminate (while it is in
    `Preempting.flights`) and its evictions (while it is in `Preempting.executing`)."""

    key: str  # gang key, or "pod:<ns>/<name>"
    priority: int  # the preemptor's (a gang: its highest member's)
    plan: PreemptionPlan
    preemptors: tuple[PodView, ...]
    group: PodGroupView | None
    deadline: float  # monotonic
    holds: tuple[PodView, ...]  # placeholders, as counted on their nominated nodes
    execution: Execution
    held: bool = False
    evicting: bool = False  # an eviction task runs
    deferred: bool = False  # a preemptor's cycle waited for that task: try it when it ends
    told: str = ""  # the progress last told to its pods while their cycles waited
    told_at: float = float("-inf")  # when progress was last told after the plan (monotonic)
    # Victims whose `Preempted` Event was posted: each is announced before its eviction.
    announced: set[str] = field(default_factory=set)

    def gates_cycles(self, snapshot: Snapshot) -> bool:
        """Whether its preemptors' cycles wait, for a cycle could only find victims in the
        way: while a victim on a nominated node is still there, as its evictions are made
        (the last request included) and then, every eviction accepted, as the victims
        terminate. The going of the last of them sends the preemptors back
        (`Preempting.victim_gone`; the eviction task's end when room was made before).
        Not while an eviction waits for a retry or was given up: the preemptor may find
        room elsewhere then.

        kube-scheduler lets the preemptor be tried during its last victim's DELETE, for the
        deletion's event to send it back; here that event activates it directly, and a
        cycle during the request only failed on the victims still there (a 500-node filter
        pass, a status write and an Event each: 230-410 such cycles in PreemptionBasic)."""
        execution = self.execution
        if not self.evicting and (
            not execution.started or execution.pending() or execution.given_up
        ):
            return False
        return not self.room_made(snapshot)

    def room_made(self, snapshot: Snapshot) -> bool:
        """Whether every victim on a nominated node went (victims elsewhere, the rest of a
        victim gang, may still be going): the preemptors' nodes have their room. A plan
        with no victim on a nominated node waits for all of them."""
        nominated = set(self.plan.placements.values())
        victims = self.plan.victim_pods()
        there = [p for p in victims if p.node_name in nominated] or victims
        return all(snapshot.node_of(p.uid) is None for p in there)

    def terminated(self, snapshot: Snapshot) -> int:
        return sum(1 for p in self.plan.victim_pods() if snapshot.node_of(p.uid) is None)

    def progress(self, snapshot: Snapshot) -> str:
        total = len(self.plan.victim_pods())
        return f"{self.plan.describe()}, {self.terminated(snapshot)} of {total} terminated"

    def who(self) -> str:
        if self.group is not None:
            return f"gang {self.group.key}"
        return f"pod {self.preemptors[0].key}"

    def hold(self, snapshot: Snapshot) -> None:
        """Count the placeholders on their nominated nodes (those that still exist)."""
        if self.held:
            return
        for placeholder in self.holds:
            if snapshot.get(placeholder.node_name) is not None:
                snapshot.assume(placeholder, placeholder.node_name)
        self.held = True

    def unhold(self, snapshot: Snapshot) -> None:
        if not self.held:
            return
        for placeholder in self.holds:
            if snapshot.node_of(placeholder.uid) is not None:  # its node may have gone
                snapshot.forget(placeholder)
        self.held = False

    def victim_note(self, victim: PodView) -> str:
        """The message of the `Preempted` Event on a victim."""
        node = victim.node_name
        there = [p for p in self.preemptors if self.plan.placements.get(p.uid) == node]
        gpus = sum(p.requests.scalar.get(NVIDIA_GPU, 0) for p in there)
        room = f"{gpus} {NVIDIA_GPU}" if gpus else f"{len(there)} pod(s)"
        return (
            f"preempted by {self.who()} (priority {self.priority}) to make room for "
            f"{room} on {node}"
        )

    def regarding(self) -> PodView | ObjectRef:
        """What the plan's own Events are about: the PodGroup, or the lone pod."""
        group = self.group
        if group is None:
            return self.preemptors[0]
        return ObjectRef(
            "scheduling.x-k8s.io/v1alpha1", "PodGroup", group.namespace, group.name, group.uid
        )


def placeholders(pods: Sequence[PodView], placements: Mapping[str, str]) -> tuple[PodView, ...]:
    """Purely computational: each placed preemptor as counted on its nominated node."""
    return tuple(
        dataclasses.replace(p, uid=NOMINATED_PREFIX + p.uid, node_name=placements[p.uid])
        for p in pods
        if p.uid in placements
    )
