"""Preemption in the live scheduler: PostFilter, the evictions, and the capacity held meanwhile.

When a pod, or a complete gang, does not fit, and it is not preempting already (nor waiting
out a refusal, below):
  1. build a `PreemptionRequest` from live state (start times, budgets, gang membership, what
     its tenant may reclaim) and ask the pure planner on the live snapshot;
  2. a plan that some PodDisruptionBudget does not allow (it covers more victims than its
     status.disruptionsAllowed) is not started: nothing is evicted, the preemptor is told
     "preemption would violate PodDisruptionBudget ns/name" and may plan again only after a
     backoff (preemption/execution.py `Refusals`: 5 s doubling to 160 s);
  3. otherwise: hold the nominated capacity (below), write status.nominatedNodeName, post a
     `Preempting` Event, and evict the victims through the Eviction API, those a budget
     covers first, one at a time, each announced by a `Preempted` Event before it is
     evicted. A refusal (429: a budget raced us) of the first eviction ends the plan as in
     2. Once one eviction was accepted, every victim goes (`Execution`), even when the
     preemptor is placed early, deleted or gives up: failed evictions are tried again
     after a backoff (`expire` drives it);
  4. while its evictions are made and its victims terminate, its cycles wait, parked (told
     as each goes); the last on its nominated nodes going sends it back, and it binds, or
     replans if it still does not fit (runtime/preemption_waits.py);
  5. a hold that outlives `hold_timeout_s` (victims that never terminate) is released.

Holding the capacity (preemption_flight.py `InFlight`): each preemptor pod counts on its
nominated node as a placeholder while the victims terminate; as kube's nominated-pods rule, a
higher-priority cycle (and the preemptor's own) lifts the placeholders below it meanwhile.
A preempting gang's progress goes to its PodGroup (runtime/preemption_notes.py).
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Callable, Iterator, Sequence
from typing import Final, Protocol

from batchsched.cycle.decision import Preempt
from batchsched.framework.runner import ProfileRunner
from batchsched.gang.podgroup import PodGroupView
from batchsched.model.pod import PodView
from batchsched.preemption.execution import Execution, Refusals, eviction_order
from batchsched.preemption.model import (
    BudgetExcess,
    DisruptionBudget,
    NoPlan,
    PreemptionPlan,
    PreemptionRequest,
    budgets_exceeded,
)
from batchsched.preemption.node_facts import FactsMemo
from batchsched.preemption.planner import plan_preemption
from batchsched.runtime.live import Live
from batchsched.runtime.preemption_evictions import Evictions, Evictor
from batchsched.runtime.preemption_extenders import PreemptionAsking
from batchsched.runtime.preemption_flight import InFlight, placeholders
from batchsched.runtime.preemption_inputs import any_lower, live_request
from batchsched.runtime.preemption_waits import VictimWatch
from batchsched.snapshot import Snapshot

logger = logging.getLogger(__name__)

HOLD_TIMEOUT_S: Final = 300.0
NEVER: Final = "Never"

Planner = Callable[[PreemptionRequest, Snapshot, ProfileRunner], PreemptionPlan | NoPlan]


class Nominator(Protocol):
    async def set_nominated_node(self, pod: PodView, node_name: str | None) -> None: ...


class Preempting:
    def __init__(
        self,
        live: Live,
        evictor: Evictor,
        nominator: Nominator,
        *,
        min_runtime_s: float = 0.0,
        budgets: Callable[[], Sequence[DisruptionBudget]] = tuple,
        planner: Planner | None = None,
        hold_timeout_s: float = HOLD_TIMEOUT_S,
    ) -> None:
        self.s = live
        self.nominator = nominator
        self.min_runtime_s = min_runtime_s
        self.budgets = budgets
        # The default planner keeps per-node facts between plans (preemption/node_facts.py):
        # the live request's start times come from the pods and our own record of them, so a
        # pod's start does not move while its node is unchanged.
        self.planner = planner or functools.partial(plan_preemption, memo=FactsMemo())
        self.hold_timeout_s = hold_timeout_s
        self.flights: dict[str, InFlight] = {}
        self.refusals = Refusals()
        self.evictions = Evictions(live, evictor, self.refusals.forget, self._refused)
        self._by_pod: dict[str, str] = {}  # preemptor uid -> its flight's key
        self.victims = VictimWatch(live)
        self.asking = PreemptionAsking(live, self._refused_by_extenders)  # preemptVerb

    @property
    def executing(self) -> list[InFlight]:
        """Plans with evictions left, held or not."""
        return self.evictions.executing

    @property
    def evictor(self) -> Evictor:
        return self.evictions.evictor

    @evictor.setter
    def evictor(self, evictor: Evictor) -> None:
        self.evictions.evictor = evictor

    def waits_for_victims(self, key: str) -> tuple[bool, str]:
        """Whether `key`'s cycle waits for its plan's victims (`InFlight.gates_cycles`), and
        what to tell its pods: how far the victims are, when that changed since last told
        ("" otherwise). A preemptor that waited is sent back when the eviction task ends, if
        it waits no more then."""
        flight = self.flights.get(key)
        snapshot = self.s.cache.snapshot
        if flight is None or not flight.gates_cycles(snapshot):
            return False, ""
        flight.deferred = True
        note = f"preemption: {flight.progress(snapshot)}"
        if note == flight.told:
            return True, ""
        flight.told = note
        return True, note

    def nominated_node(self, pod: PodView) -> str | None:
        """The node its plan nominated `pod` to, while the plan is in flight: its cycle tries
        that node first (cycle.py), as kube-scheduler's PreferNominatedNode."""
        key = self._by_pod.get(pod.uid)
        flight = self.flights.get(key) if key is not None else None
        return flight.plan.placements.get(pod.uid) if flight is not None else None

    @contextlib.contextmanager
    def lifted(self, key: str, priority: int) -> Iterator[None]:
        """For one cycle of `key` at `priority`: its own placeholders and those of lower
        priority are not counted; those still in flight are held again after (only these:
        500 plans held, every cycle visited each of them twice)."""
        snapshot = self.s.cache.snapshot
        lifted = [f for f in self.flights.values() if f.key == key or f.priority < priority]
        for flight in lifted:
            flight.unhold(snapshot)
        try:
            yield
        finally:
            for flight in lifted:
                if self.flights.get(flight.key) is flight:
                    flight.hold(snapshot)

    def post_filter(
        self,
        key: str,
        pods: Sequence[PodView],
        group: PodGroupView | None,
        runner: ProfileRunner,
    ) -> str:
        """A pod (or a complete gang: `pods` are its members still to place) did not fit:
        decide, then act. Returns what to tell the user: "" when no pod could be a victim
        (none of lower priority, nothing to reclaim), so the common case costs no planner run
        and changes no message."""
        return self.act(key, pods, group, self.decide(key, pods, group, runner))

    def decide(
        self,
        key: str,
        pods: Sequence[PodView],
        group: PodGroupView | None,
        runner: ProfileRunner,
    ) -> Preempt:
        """PostFilter's decision, on the snapshot as it is: reads only (the plan in flight,
        a refusal's backoff, the tenants' guarantees, the budgets), changes nothing."""
        s = self.s
        snapshot = s.cache.snapshot
        flight = self.flights.get(key)
        replaces = False
        if key in self.asking.asking:  # the extenders have not answered about its plan yet
            return Preempt(self.asking.asking[key])
        if flight is not None:
            if flight.terminated(snapshot) < len(flight.plan.victim_pods()):
                return Preempt(f"preemption: {flight.progress(snapshot)}")
            replaces = True  # every victim gone and it still does not fit: replan
        refusal = self.refusals.waiting(key, s.clock.now())
        if refusal is not None:  # not planned again before its backoff ends
            note = f"{refusal.reason}; nothing evicted, planning again in {refusal.wait_s:g}s"
            return Preempt(note, replaces=replaces)
        reclaimable = s.tenants.reclaimable(pods) if s.tenants is not None else None
        if not reclaimable and not any_lower(snapshot, max(p.priority for p in pods)):
            return Preempt(replaces=replaces)
        if any(p.preemption_policy == NEVER for p in pods):
            note = "preemption: not attempted, preemptionPolicy is Never"
            return Preempt(note, replaces=replaces)
        budgets = tuple(self.budgets())
        request = live_request(
            s, pods, group, reclaimable or frozenset(), self.min_runtime_s, budgets
        )
        answer = self.planner(request, snapshot, self.asking.runner(key, runner))
        if isinstance(answer, NoPlan):
            return Preempt(f"preemption: {answer.reason}", attempted=True, replaces=replaces)
        exceeded = tuple(budgets_exceeded(answer.victim_pods(), budgets))
        return Preempt("", answer, budgets, exceeded, attempted=True, replaces=replaces)

    def act(
        self, key: str, pods: Sequence[PodView], group: PodGroupView | None, decision: Preempt
    ) -> str:
        """Carry out `decide`'s answer: drop the plan it replaces, start the new one (hold,
        nominate, announce, evict) or record a budget's refusal. What to tell the user."""
        old = self._drop(key) if decision.replaces else None
        if old is not None:
            logger.info("preemption plan no longer valid key=%s; replanning", key)
        if decision.attempted:
            self.s.metrics.preemption_attempts.inc()
        plan = decision.plan
        message = decision.note
        if plan is None and decision.attempted:
            logger.debug("no preemption plan key=%s reason=%s", key, decision.note)
        elif plan is not None and decision.exceeded:
            message = self._not_started(key, pods, plan, decision.exceeded)
        elif plan is not None:
            budgets = decision.budgets
            asked = self.asking.ask(
                key, pods, group, plan, lambda kept: self._start(key, pods, group, kept, budgets)
            )
            if asked is None:
                self._start(key, pods, group, plan, budgets)
            started = self.flights.get(key)
            message = asked or (started.told if started else f"preemption: {plan.describe()}")
        if old is not None and key not in self.flights:
            self._clear_nominations(old)  # no new plan nominates it
        return message

    def _not_started(
        self,
        key: str,
        pods: Sequence[PodView],
        plan: PreemptionPlan,
        exceeded: Sequence[BudgetExcess],
    ) -> str:
        """The Eviction API would refuse one of the plan's evictions: evict none of them."""
        reason = "preemption would violate " + " and ".join(e.describe() for e in exceeded)
        refusal = self.refusals.refuse(key, reason, self.s.clock.now(), (p.uid for p in pods))
        self.s.metrics.preemption_budget_violations.inc(len(exceeded))
        logger.info(
            "preemption not started key=%s reason=%s wait_s=%g plan=%s",
            key,
            reason,
            refusal.wait_s,
            plan.describe(),
        )
        return f"{reason}; nothing evicted, planning again in {refusal.wait_s:g}s"

    def _start(
        self,
        key: str,
        pods: Sequence[PodView],
        group: PodGroupView | None,
        plan: PreemptionPlan,
        budgets: Sequence[DisruptionBudget],
    ) -> None:
        s = self.s
        now = s.clock.now()
        victims = plan.victim_pods()
        order = eviction_order(victims, budgets, set(plan.placements.values()))
        flight = InFlight(
            key,
            max(p.priority for p in pods),
            plan,
            tuple(pods),
            group,
            now + self.hold_timeout_s,
            placeholders(pods, plan.placements),
            Execution(order, now + self.hold_timeout_s),
        )
        self.flights[key] = flight
        # What its pods are told by this cycle: a waiting cycle tells them again only when
        # a victim went since (`waits_for_victims`), not the same "0 of N" one more time, an
        # Event and a status write per preemptor that said nothing new.
        flight.told = f"preemption: {flight.progress(s.cache.snapshot)}"
        for pod in pods:
            self._by_pod[pod.uid] = key
        self.victims.add(flight)
        flight.hold(s.cache.snapshot)
        s.metrics.preemption_victims.observe(len(victims))
        logger.info(
            "preempting key=%s victims=%d units=%d plan=%s",
            key,
            len(victims),
            len(plan.victims),
            plan.describe(),
        )
        for pod in pods:
            node = plan.placements.get(pod.uid)
            if node is not None:
                s.spawn(self.nominator.set_nominated_node(pod, node))
        regarding = flight.regarding()
        s.spawn(s.events.record(regarding, "Normal", "Preempting", "Preempting", plan.describe()))
        self.evictions.start(flight)

    def _refused(self, flight: InFlight, victim: PodView, message: str) -> None:
        """The first eviction was refused (a budget changed since the plan was checked):
        nothing was evicted; the preemptor waits out a backoff before it plans again."""
        if self.flights.get(flight.key) is not flight:
            return  # placed or given up meanwhile: nobody waits for this plan
        budgets = [f"PodDisruptionBudget {b.key}" for b in self.budgets() if b.covers(victim)]
        reason = (
            f"preemption would violate {' and '.join(budgets) or 'a PodDisruptionBudget'}: "
            f"the eviction of {victim.key} was refused ({message})"
        )
        uids = (p.uid for p in flight.preemptors)
        refusal = self.refusals.refuse(flight.key, reason, self.s.clock.now(), uids)
        self.release(flight.key, reason, f"nothing evicted, planning again in {refusal.wait_s:g}s")

    def _refused_by_extenders(self, key: str, pods: Sequence[PodView], why: str) -> str:
        """The extenders with a preemptVerb refused the plan: nothing evicted, a backoff."""
        refusal = self.refusals.refuse(key, why, self.s.clock.now(), (p.uid for p in pods))
        return f"{why}; nothing evicted, planning again in {refusal.wait_s:g}s"

    # Endings

    def placed(self, key: str) -> None:
        """The preemptor was placed: its hold ends (the nominated node stays written). A plan
        that evicted a victim already still evicts the others."""
        self.refusals.forget(key)
        self.asking.forget(key)
        flight = self._drop(key)
        if flight is not None:
            left = len(flight.execution.pending()) if flight.execution.started else 0
            logger.info("preemptor placed key=%s evictions_left=%d", key, left)

    def release(self, key: str, why: str, then: str = "it will replan") -> None:
        """Give up waiting: the hold goes, the nomination is cleared, the preemptor replans
        (a plan that evicted a victim already still evicts the others)."""
        flight = self._drop(key)
        if flight is None:
            return
        s = self.s
        logger.info("preemption released key=%s why=%s", key, why)
        self._clear_nominations(flight)
        s.spawn(
            s.events.record(
                flight.regarding(),
                "Normal",
                "PreemptionReleased",
                "Preempting",
                f"{flight.plan.describe()}: released, {why}; {then}",
            )
        )
        s.queue.move_all("PreemptionReleased")
        s.queue.activate(p.uid for p in flight.preemptors)  # parked: no event moves them

    def _drop(self, key: str) -> InFlight | None:
        flight = self.flights.pop(key, None)
        if flight is None:
            return None
        flight.execution.abandon()
        flight.unhold(self.s.cache.snapshot)
        for pod in flight.preemptors:
            self._by_pod.pop(pod.uid, None)
        self.victims.drop(flight)
        return flight

    def _clear_nominations(self, flight: InFlight) -> None:
        for pod in flight.preemptors:
            if pod.uid in flight.plan.placements:
                self.s.spawn(self.nominator.set_nominated_node(pod, None))

    def expire(self, now: float) -> None:
        """The timers, called every second or so: holds past their deadline (victims that
        never terminated) are released; preemptors whose refusal backoff ended are tried
        again; evictions due for a retry are made."""
        for key in [k for k, f in self.flights.items() if f.deadline <= now]:
            self.release(key, f"its victims did not terminate within {self.hold_timeout_s:g}s")
        for refusal in self.refusals.ended(now):
            self.s.queue.activate(refusal.uids)
        self.evictions.retry_due(now)

    def victim_gone(self, pod: PodView) -> None:
        """A counted pod went: its preemptors, parked, are sent back when it made their
        room, told how far their victims are otherwise (runtime/preemption_waits.py)."""
        self.victims.gone(pod, self.flights)

    def pod_deleted(self, pod: PodView) -> None:
        """A pending pod was deleted: if it was preempting, its hold ends with it (a plan
        that evicted a victim already still evicts the others)."""
        self.refusals.forget_pod(pod.uid)
        self.asking.forget_pod(pod.uid)
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
