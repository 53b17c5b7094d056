"""A lone pod's preemption plan, put to the extenders with a preemptVerb before it starts.

The planner is pure and runs inside the cycle; the extenders answer over HTTP. So, as the
verdicts for Filter and Score are fetched before the cycle, the preemption answer is fetched
after it: PostFilter's plan is not started at once but handed here; the extenders are asked
in the background (extenders/preempt.py, kube's semantics) while the preemptor waits in the
pool, and then:

- they keep the plan's node: the plan starts (hold, nomination, evictions) with the victims
  they kept. A victim gang loses a member to the answer only whole: gangs are evicted whole
  or not at all, so a gang unit with a member left out is not evicted;
- they leave the node out: nothing is evicted, and the preemptor is tried again at once
  with that node refused to its preemption plans for a while (REFUSED_FOR_S), so the planner
  offers the next best node. kube sends every candidate node at once and picks among those
  the extenders keep; here they see one candidate per round;
- they keep no victim batchsched chose, or a non-ignorable one fails: nothing is evicted, and
  the preemptor waits out a refusal backoff (as for a PodDisruptionBudget) before it plans
  again, with the reason in a Warning Event.

A gang's plan is not sent. kube's ProcessPreemption is one pod's choice among nodes, each
node's victims enough for that pod alone; a gang plan's victims are chosen for all members
together (room on one node may only help together with room on another, victim gangs span
nodes), so neither a per-member question nor its answer maps onto the plan.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence
from typing import ClassVar, Final

from batchsched.extenders.preempt import Candidate, ExtenderPreemption
from batchsched.framework.cycle_state import CycleState
from batchsched.framework.runner import ProfileRunner
from batchsched.framework.status import OK, Status, unresolvable
from batchsched.gang.podgroup import PodGroupView
from batchsched.model.pod import PodView
from batchsched.preemption.model import PreemptionPlan, VictimGang
from batchsched.runtime.app_extenders import extender_set
from batchsched.runtime.live import Live
from batchsched.snapshot import NodeInfo

logger = logging.getLogger(__name__)

# How long a node the extenders left out of a preemptor's plan is kept out of its next plans.
REFUSED_FOR_S: Final = 60.0
REFUSED: Final = "node(s) were refused for this preemption by an extender"

# Starts the plan, with the victims the extenders kept.
Start = Callable[[PreemptionPlan], None]
# (key, preemptor pods, why) -> the note that says when it plans again
Refuse = Callable[[str, Sequence[PodView], str], str]


def preemption_extenders(live: Live) -> ExtenderPreemption | None:
    extenders = extender_set(live.profiles)
    return extenders.preemption if extenders is not None else None


def kept_units(plan: PreemptionPlan, node: str, kept: Candidate) -> tuple[VictimGang, ...]:
    """The plan's victim units whose pods on `node` the extenders all kept."""
    uids = {v.uid for v in kept.victims}
    return tuple(
        unit
        for unit in plan.victims
        if all(p.uid in uids for p in unit.pods if p.node_name == node)
    )


class RefusedByExtenders:
    """A Filter for the planner's dry runs: the nodes the extenders left out of this
    preemptor's earlier plans cannot hold it."""

    name: ClassVar[str] = "RefusedByExtenders"

    def __init__(self, nodes: frozenset[str]) -> None:
        self.nodes = nodes

    def filter(self, state: CycleState, pod: PodView, node: NodeInfo) -> Status:
        return unresolvable(REFUSED) if node.name in self.nodes else OK


class PreemptionAsking:
    """Plans waiting for the extenders' answer, by preemptor key."""

    def __init__(self, live: Live, refuse: Refuse) -> None:
        self.s = live
        self._refuse = refuse
        self.asking: dict[str, str] = {}  # key -> what the preemptor waits for
        self._uids: dict[str, str] = {}  # key -> the preemptor's uid
        self._left_out: dict[str, dict[str, float]] = {}  # key -> node -> refused until

    def runner(self, key: str, runner: ProfileRunner) -> ProfileRunner:
        """The runner to plan `key`'s preemption with: without the nodes the extenders left
        out of its recent plans."""
        now = self.s.clock.now()
        refused = {n: t for n, t in self._left_out.get(key, {}).items() if t > now}
        if not refused:
            self._left_out.pop(key, None)
            return runner
        self._left_out[key] = refused
        profile = runner.profile
        plugin = RefusedByExtenders(frozenset(refused))
        return ProfileRunner(dataclasses.replace(profile, filter=(*profile.filter, plugin)))

    def ask(
        self,
        key: str,
        pods: Sequence[PodView],
        group: PodGroupView | None,
        plan: PreemptionPlan,
        start: Start,
    ) -> str | None:
        """Send a lone pod's plan to the interested extenders; None when none wants it (the
        caller starts the plan itself). Returns what to tell the user meanwhile."""
        extenders = preemption_extenders(self.s)
        if extenders is None or group is not None or len(pods) != 1:
            return None
        pod = pods[0]
        if not extenders.interested(pod) or len(set(plan.placements.values())) != 1:
            return None
        node = next(iter(plan.placements.values()))
        victims = tuple(v for v in plan.victim_pods() if v.node_name == node)
        note = f"preemption: asking the extenders about {plan.describe()}"
        self.asking[key] = note
        self._uids[key] = pod.uid
        candidates = {node: Candidate(victims, plan.budget_violations)}
        self.s.spawn(self._answer(extenders, key, pod, plan, candidates, start))
        return note

    def forget(self, key: str) -> None:
        """The preemptor was placed or deleted: an answer still to come starts nothing."""
        self.asking.pop(key, None)
        self._uids.pop(key, None)
        self._left_out.pop(key, None)

    def forget_pod(self, uid: str) -> None:
        for key in [k for k, u in self._uids.items() if u == uid]:
            self.forget(key)

    async def _answer(
        self,
        extenders: ExtenderPreemption,
        key: str,
        pod: PodView,
        plan: PreemptionPlan,
        candidates: dict[str, Candidate],
        start: Start,
    ) -> None:
        node = next(iter(candidates))
        try:
            answer = await extenders.process(pod, candidates)
        finally:
            waited = self.asking.pop(key, None)
            self._uids.pop(key, None)
        if waited is None:
            return  # placed or deleted meanwhile
        if isinstance(answer, str):
            self._refused(key, pod, answer)
            return
        kept = answer.get(node)
        if kept is None:
            refused = self._left_out.setdefault(key, {})
            refused[node] = self.s.clock.now() + REFUSED_FOR_S
            logger.info("extenders left out the plan's node pod=%s node=%s", pod.key, node)
            self.s.queue.activate([pod.uid])  # plan again now, without that node
            return
        units = kept_units(plan, node, kept)
        if not units:
            self._refused(key, pod, f"the extenders kept no victim gang whole on node {node}")
            return
        if len(units) < len(plan.victims):
            logger.info(
                "extenders narrowed the victims pod=%s node=%s victims=%d of %d",
                pod.key,
                node,
                len(units),
                len(plan.victims),
            )
        start(dataclasses.replace(plan, victims=units))

    def _refused(self, key: str, pod: PodView, why: str) -> None:
        note = self._refuse(key, [pod], f"preemption refused by the extenders: {why}")
        logger.info("preemption not started key=%s reason=%s", key, note)
        self.s.record(pod, "Warning", "FailedScheduling", "Preempting", note)
