"""Preemption in the live scheduler: PostFilter, the evictions, and the capacity held meanwhile.

When a pod, or a complete gang, does not fit, and it is not preempting already:
  1. build a `PreemptionRequest` from live state (start times, budgets, gang membership, what
     its tenant may reclaim) and ask the pure planner on the live snapshot;
  2. a plan: hold the nominated capacity (below), write status.nominatedNodeName, post a
     `Preempting` Event, and evict every victim through the Eviction API, one at a time,
     with a `Preempted` Event on each; the first refusal (a PodDisruptionBudget, 429) ends
     the plan: nothing more is evicted, the hold goes, and the preemptor replans;
  3. each victim that goes moves the unschedulable pool; the preemptor's next cycle binds it,
     or, when every victim is gone and it still does not fit, replans (never evicts more);
  4. a hold that outlives `hold_timeout_s` (victims that never terminate) is released.

Holding the capacity: each preemptor pod is counted on its nominated node as a placeholder
(its own view under the uid `nominated/<uid>`), over-committing the node while the victims
terminate, so no other pod takes what they free. As kube's nominated-pods rule, a cycle for a
pod of higher priority (and the preemptor's own cycle) lifts the placeholders below it and
puts back those still in flight afterwards; whoever loses its room that way replans.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, Protocol

from batchsched.framework.runner import ProfileRunner
from batchsched.gang.podgroup import PodGroupView
from batchsched.kube.binder import ObjectRef
from batchsched.kube.eviction import EvictionResult
from batchsched.model.pod import PodView
from batchsched.model.resources import NVIDIA_GPU
from batchsched.preemption.model import (
    DisruptionBudget,
    NoPlan,
    PreemptionPlan,
    PreemptionRequest,
)
from batchsched.preemption.planner import plan_preemption
from batchsched.runtime.preemption_inputs import any_lower, gang_membership, started_times
from batchsched.snapshot import Snapshot

if TYPE_CHECKING:
    from batchsched.runtime.scheduler import Scheduler

logger = logging.getLogger(__name__)

HOLD_TIMEOUT_S: Final = 300.0
NOMINATED_PREFIX: Final = "nominated/"
NEVER: Final = "Never"

Planner = Callable[[PreemptionRequest, Snapshot, ProfileRunner], PreemptionPlan | NoPlan]


class Evictor(Protocol):
    async def evict(self, namespace: str, name: str, uid: str) -> EvictionResult: ...


class Nominator(Protocol):
    async def set_nominated_node(self, pod: PodView, node_name: str | None) -> None: ...


@dataclass(eq=False)
class InFlight:
    """One preemptor's plan while its victims terminate."""

    key: str  # gang key, or "pod:<ns>/<name>"
    priority: int  # the preemptor's (a gang: its highest member's)
    plan: PreemptionPlan
    preemptors: tuple[PodView, ...]
    group: PodGroupView | None
    deadline: float  # monotonic
    holds: tuple[PodView, ...]  # placeholders, as counted on their nominated nodes
    held: bool = False
    evicted: set[str] = field(default_factory=set)

    def terminated(self, snapshot: Snapshot) -> int:
        return sum(1 for p in self.plan.victim_pods() if snapshot.node_of(p.uid) is None)

    def progress(self, snapshot: Snapshot) -> str:
        total = len(self.plan.victim_pods())
        return f"{self.plan.describe()}, {self.terminated(snapshot)} of {total} terminated"

    def who(self) -> str:
        if self.group is not None:
            return f"gang {self.group.key}"
        return f"pod {self.preemptors[0].key}"


def _placeholders(pods: Sequence[PodView], placements: Mapping[str, str]) -> tuple[PodView, ...]:
    return tuple(
        dataclasses.replace(p, uid=NOMINATED_PREFIX + p.uid, node_name=placements[p.uid])
        for p in pods
        if p.uid in placements
    )


class Preempting:
    def __init__(
        self,
        scheduler: Scheduler,
        evictor: Evictor,
        nominator: Nominator,
        *,
        min_runtime_s: float = 0.0,
        budgets: Callable[[], Sequence[DisruptionBudget]] = tuple,
        planner: Planner = plan_preemption,
        hold_timeout_s: float = HOLD_TIMEOUT_S,
    ) -> None:
        self.s = scheduler
        self.evictor = evictor
        self.nominator = nominator
        self.min_runtime_s = min_runtime_s
        self.budgets = budgets
        self.planner = planner
        self.hold_timeout_s = hold_timeout_s
        self.flights: dict[str, InFlight] = {}
        self._by_pod: dict[str, str] = {}  # preemptor uid -> its flight's key

    # Holds

    @contextlib.contextmanager
    def lifted(self, key: str, priority: int) -> Iterator[None]:
        """For one cycle of `key` at `priority`: its own placeholders and those of lower
        priority are not counted; every flight still in progress is held again after."""
        for flight in self.flights.values():
            if flight.key == key or flight.priority < priority:
                self._unhold(flight)
        try:
            yield
        finally:
            for flight in self.flights.values():
                self._hold(flight)

    def _hold(self, flight: InFlight) -> None:
        if flight.held:
            return
        snapshot = self.s.cache.snapshot
        for placeholder in flight.holds:
            if snapshot.get(placeholder.node_name) is not None:
                snapshot.assume(placeholder, placeholder.node_name)
        flight.held = True

    def _unhold(self, flight: InFlight) -> None:
        if not flight.held:
            return
        snapshot = self.s.cache.snapshot
        for placeholder in flight.holds:
            if snapshot.node_of(placeholder.uid) is not None:  # its node may have gone
                snapshot.forget(placeholder)
        flight.held = False

    # PostFilter

    def post_filter(
        self,
        key: str,
        pods: Sequence[PodView],
        group: PodGroupView | None,
        runner: ProfileRunner,
    ) -> str:
        """A pod (or a complete gang: `pods` are its members still to place) did not fit:
        preempt for it, unless it is preempting already. Returns what to tell the user: ""
        when no pod could be a victim (none of lower priority, nothing to reclaim), so the
        common case costs no planner run and changes no message."""
        snapshot = self.s.cache.snapshot
        flight = self.flights.get(key)
        stale: InFlight | None = None
        if flight is not None:
            if flight.terminated(snapshot) < len(flight.plan.victim_pods()):
                return f"preemption: {flight.progress(snapshot)}"
            stale = self._drop(key)  # every victim gone and it still does not fit: replan
            logger.info("preemption plan no longer valid key=%s; replanning", key)
        reclaimable = self.s.tenants.reclaimable(pods) if self.s.tenants is not None else None
        if not reclaimable and not any_lower(snapshot, max(p.priority for p in pods)):
            if stale is not None:
                self._clear_nominations(stale)
            return ""
        if any(p.preemption_policy == NEVER for p in pods):
            return "preemption: not attempted, preemptionPolicy is Never"
        self.s.metrics.preemption_attempts.inc()
        request = self.request(pods, group, reclaimable or frozenset())
        answer = self.planner(request, snapshot, runner)
        if isinstance(answer, NoPlan):
            if stale is not None:
                self._clear_nominations(stale)
            logger.debug("no preemption plan key=%s reason=%s", key, answer.reason)
            return f"preemption: {answer.reason}"
        self._start(key, pods, group, answer)
        return f"preemption: {answer.describe()}"

    def request(
        self,
        pods: Sequence[PodView],
        group: PodGroupView | None,
        reclaimable: frozenset[str] = frozenset(),
    ) -> PreemptionRequest:
        s = self.s
        snapshot = s.cache.snapshot
        now = s.clock.now()
        seen = s.tenants.started if s.tenants is not None else {}
        gang_of, min_member = gang_membership(s.gangs, snapshot)
        return PreemptionRequest(
            preemptor=tuple(pods),
            group=group,
            bound_members=s.gangs.counted(group.key, snapshot) if group is not None else 0,
            now=now,
            started=started_times(snapshot, now, s.clock.wall(), seen),
            min_runtime_s=self.min_runtime_s,
            budgets=tuple(self.budgets()),
            gang_of=gang_of,
            gang_min_member=min_member,
            reclaimable=reclaimable,
        )

    def _start(
        self, key: str, pods: Sequence[PodView], group: PodGroupView | None, plan: PreemptionPlan
    ) -> None:
        s = self.s
        flight = InFlight(
            key,
            max(p.priority for p in pods),
            plan,
            tuple(pods),
            group,
            s.clock.now() + self.hold_timeout_s,
            _placeholders(pods, plan.placements),
        )
        self.flights[key] = flight
        for pod in pods:
            self._by_pod[pod.uid] = key
        self._hold(flight)
        victims = plan.victim_pods()
        s.metrics.preemption_victims.observe(len(victims))
        if plan.budget_violations:
            s.metrics.preemption_budget_violations.inc(plan.budget_violations)
        logger.info(
            "preempting key=%s victims=%d units=%d budget_violations=%d plan=%s",
            key,
            len(victims),
            len(plan.victims),
            plan.budget_violations,
            plan.describe(),
        )
        s.spawn(self._execute(flight))

    # Executing a plan

    async def _execute(self, flight: InFlight) -> None:
        s = self.s
        for pod in flight.preemptors:
            node = flight.plan.placements.get(pod.uid)
            if node is not None:
                s.spawn(self.nominator.set_nominated_node(pod, node))
        s.spawn(
            s.events.record(
                self._regarding(flight),
                "Normal",
                "Preempting",
                "Preempting",
                flight.plan.describe(),
            )
        )
        for victim in self._eviction_order(flight):
            if self.flights.get(flight.key) is not flight:
                return  # released meanwhile: evict nothing more
            result = await self.evictor.evict(victim.namespace, victim.name, victim.uid)
            if not result.accepted:
                if self.flights.get(flight.key) is flight:
                    why = f"the eviction of {victim.key} was refused: {result.message}"
                    self.release(flight.key, why)
                return
            flight.evicted.add(victim.uid)
            note = self._victim_note(flight, victim)
            s.spawn(s.events.record(victim, "Normal", "Preempted", "Preempting", note))

    def _eviction_order(self, flight: InFlight) -> list[PodView]:
        """Victims a budget covers first: if one is refused, nothing else was evicted for it."""
        budgets = self.budgets()
        victims = flight.plan.victim_pods()
        return sorted(victims, key=lambda p: not any(b.covers(p) for b in budgets))

    def _victim_note(self, flight: InFlight, victim: PodView) -> str:
        node = victim.node_name
        there = [p for p in flight.preemptors if flight.plan.placements.get(p.uid) == node]
        gpus = sum(p.requests.scalar.get(NVIDIA_GPU, 0) for p in there)
        room = f"{gpus} {NVIDIA_GPU}" if gpus else f"{len(there)} pod(s)"
        return (
            f"preempted by {flight.who()} (priority {flight.priority}) to make room for "
            f"{room} on {node}"
        )

    def _regarding(self, flight: InFlight) -> PodView | ObjectRef:
        group = flight.group
        if group is None:
            return flight.preemptors[0]
        return ObjectRef(
            "scheduling.x-k8s.io/v1alpha1", "PodGroup", group.namespace, group.name, group.uid
        )

    # Endings

    def placed(self, key: str) -> None:
        """The preemptor was placed: its flight ends (the nominated node stays written)."""
        if self._drop(key) is not None:
            logger.info("preemptor placed key=%s", key)

    def release(self, key: str, why: str) -> None:
        """Give up the plan: the hold goes, the nomination is cleared, the preemptor replans."""
        flight = self._drop(key)
        if flight is None:
            return
        s = self.s
        logger.info("preemption released key=%s why=%s", key, why)
        self._clear_nominations(flight)
        s.spawn(
            s.events.record(
                self._regarding(flight),
                "Normal",
                "PreemptionReleased",
                "Preempting",
                f"{flight.plan.describe()}: released, {why}; it will replan",
            )
        )
        s.queue.move_all("PreemptionReleased")

    def _drop(self, key: str) -> InFlight | None:
        flight = self.flights.pop(key, None)
        if flight is None:
            return None
        self._unhold(flight)
        for pod in flight.preemptors:
            self._by_pod.pop(pod.uid, None)
        return flight

    def _clear_nominations(self, flight: InFlight) -> None:
        for pod in flight.preemptors:
            if pod.uid in flight.plan.placements:
                self.s.spawn(self.nominator.set_nominated_node(pod, None))

    def expire(self, now: float) -> None:
        """Holds past their deadline (victims that never terminated) are released."""
        for key in [k for k, f in self.flights.items() if f.deadline <= now]:
            self.release(key, f"its victims did not terminate within {self.hold_timeout_s:g}s")

    def victim_gone(self, pod: PodView) -> None:
        """A counted pod went: when it was the last victim of a plan, its preemptors are
        tried at once rather than after their backoff."""
        snapshot = self.s.cache.snapshot
        for flight in self.flights.values():
            victims = flight.plan.victim_pods()
            if any(v.uid == pod.uid for v in victims):
                if flight.terminated(snapshot) == len(victims):
                    self.s.queue.activate(p.uid for p in flight.preemptors)
                return

    def pod_deleted(self, pod: PodView) -> None:
        """A pending pod was deleted: if it was preempting, its plan ends with it."""
        key = self._by_pod.get(pod.uid)
        if key is not None:
            self.release(key, f"preemptor {pod.key} was deleted")

    def notes(self) -> dict[str, str]:
        """What each preempting gang waits for, by gang key (the PodGroup annotation)."""
        snapshot = self.s.cache.snapshot
        return {
            key: flight.progress(snapshot)
            for key, flight in self.flights.items()
            if flight.group is not None
        }


Patch = Callable[[str, Mapping[str, object]], Awaitable[object]]
PREEMPTION_ANNOTATION: Final = "batchsched.io/preemption"


class NotePublisher:
    """Writes each preempting gang's progress to its PodGroup as the annotation
    `batchsched.io/preemption` when it changes, and removes it when the preemption ends. (The
    PodGroup status schema has no free-text field; its phase stays Pending meanwhile.)"""

    def __init__(self, notes: Callable[[], Mapping[str, str]], patch: Patch) -> None:
        self.notes = notes
        self.patch = patch
        self._published: dict[str, str] = {}

    async def publish(self) -> None:
        current = self.notes()
        for key, note in current.items():
            if self._published.get(key) != note and await self._write(key, note):
                self._published[key] = note
        for key in [k for k in self._published if k not in current]:
            if await self._write(key, None):
                del self._published[key]

    async def _write(self, key: str, note: str | None) -> bool:
        namespace, name = key.split("/", 1)
        path = f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{namespace}/podgroups/{name}"
        try:
            await self.patch(path, {"metadata": {"annotations": {PREEMPTION_ANNOTATION: note}}})
        except Exception as err:  # a gone PodGroup or a failing API server: try again later
            logger.debug("preemption note not written group=%s error=%s", key, err)
            return False
        return True
