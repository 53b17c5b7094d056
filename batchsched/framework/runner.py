"""The scheduling cycle of one profile for one pod: PreFilter through Permit, pure and seeded.

Follows kube-scheduler's algorithm: filter from a rotating start index until enough feasible
nodes are found (percentageOfNodesToScore), score them, sum weighted normalized scores, and
break ties among the best nodes by reservoir sampling with a seeded generator.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import chain

from batchsched.framework.cycle_state import CycleState, MissingState
from batchsched.framework.failure import FitError
from batchsched.framework.filter_columns import filter_every_node
from batchsched.framework.interfaces import MAX_NODE_SCORE, MIN_NODE_SCORE
from batchsched.framework.profile import Profile
from batchsched.framework.status import OK, Code, Status, error, is_ok, unresolvable
from batchsched.model.pod import PodView
from batchsched.snapshot import NodeInfo, Snapshot

MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5
DEFAULT_PERCENTAGE_OF_NODES_TO_SCORE = 0  # adaptive


def num_feasible_nodes_to_find(percentage: int | None, num_all_nodes: int) -> int:
    """How many feasible nodes to look for before scoring (kube-scheduler's rule)."""
    if num_all_nodes < MIN_FEASIBLE_NODES_TO_FIND:
        return num_all_nodes
    adaptive = percentage or 0
    if adaptive >= 100:
        return num_all_nodes
    if adaptive <= 0:
        adaptive = max(50 - num_all_nodes // 125, MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND)
    return max(num_all_nodes * adaptive // 100, MIN_FEASIBLE_NODES_TO_FIND)


@dataclass(frozen=True, slots=True)
class Within:
    """The nodes a pod may go to beyond what its PreFilters allow (a gang's topology domain),
    and the reason the others show in its FitError."""

    nodes: frozenset[str]
    reason: str = "node(s) outside the gang's topology domain"


@dataclass(frozen=True, slots=True)
class RunnerMark:
    """A runner's tie-break generator and rotating start index at one moment: `rewind` to it
    and the same pods on the same snapshot are placed the same way again."""

    rng_state: tuple[object, ...]
    next_start: int


@dataclass(slots=True)
class ScheduleResult:
    """Where the pod goes (node_name), or why not (failure / status)."""

    pod: PodView
    status: Status
    node_name: str | None = None
    failure: FitError | None = None
    nominated_node: str | None = None
    evaluated_nodes: int = 0
    feasible_nodes: int = 0
    permit_timeout: float = 0.0
    state: CycleState = field(default_factory=CycleState)

    @property
    def placed(self) -> bool:
        return self.node_name is not None and self.status.code in (Code.SUCCESS, Code.WAIT)

    def message(self) -> str:
        if self.failure is not None:
            return self.failure.message()
        return self.status.message()


class ProfileRunner:
    """Runs one profile's cycle. Keeps kube-scheduler's rotating start index between pods."""

    def __init__(self, profile: Profile, seed: int = 0) -> None:
        self.profile = profile
        self.rng = random.Random(seed)
        self.next_start = 0

    def mark(self) -> RunnerMark:
        return RunnerMark(self.rng.getstate(), self.next_start)

    def rewind(self, mark: RunnerMark) -> None:
        self.rng.setstate(mark.rng_state)
        self.next_start = mark.next_start

    def schedule_one(
        self, pod: PodView, snapshot: Snapshot, within: Within | None = None
    ) -> ScheduleResult:
        """Find a node, assume the pod there, run Reserve and Permit."""
        result = self.find_node(pod, snapshot, within=within)
        if result.node_name is None:
            return result
        status = self.reserve(result.state, pod, result.node_name, snapshot)
        if not is_ok(status):
            return ScheduleResult(pod, status, evaluated_nodes=result.evaluated_nodes)
        status, timeout = self.permit(result.state, pod, result.node_name)
        if status.is_rejection or status.code is Code.ERROR:
            self.unreserve(result.state, pod, result.node_name, snapshot)
            return ScheduleResult(pod, status, evaluated_nodes=result.evaluated_nodes)
        result.status = status
        result.permit_timeout = timeout
        return result

    def find_node(
        self,
        pod: PodView,
        snapshot: Snapshot,
        state: CycleState | None = None,
        within: Within | None = None,
    ) -> ScheduleResult:
        """PreFilter, Filter, (PostFilter), PreScore, Score and host selection; no side effects.

        `within`: only these nodes are considered, as if a PreFilter had narrowed them."""
        state = state if state is not None else CycleState()
        try:
            return self._find_node(pod, snapshot, state, within)
        except MissingState as err:
            # A plugin enabled at Filter/Score whose PreFilter/PreScore the config disabled.
            message = (
                f"plugin state {err.args[0]!r} missing: a plugin runs at Filter or Score while "
                "its PreFilter or PreScore is disabled in the profile"
            )
            return ScheduleResult(pod, error(message), state=state)

    def _find_node(
        self, pod: PodView, snapshot: Snapshot, state: CycleState, within: Within | None
    ) -> ScheduleResult:
        total = len(snapshot)
        if total == 0:
            return ScheduleResult(
                pod, unresolvable("no nodes available to schedule pods"), state=state
            )
        candidates, left_out = self.run_pre_filter(state, pod, snapshot, within)
        if isinstance(candidates, Status):
            failure = FitError(pod, total, {}, candidates.message())
            # kube: a PreFilter's UnschedulableAndUnresolvable marks every node so; no
            # preemption can help.
            hopeless = candidates.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
            code = Code.UNSCHEDULABLE_AND_UNRESOLVABLE if hopeless else Code.UNSCHEDULABLE
            return self._failed(state, pod, snapshot, failure, code)
        feasible, failed, processed = self._filter_nodes(state, pod, candidates, total)
        if isinstance(feasible, Status):
            return ScheduleResult(pod, feasible, state=state, evaluated_nodes=processed)
        if not feasible:
            failed.update(left_out())
            return self._failed(state, pod, snapshot, FitError(pod, total, failed))
        chosen = feasible[0] if len(feasible) == 1 else self._best(state, pod, snapshot, feasible)
        if isinstance(chosen, Status):
            return ScheduleResult(pod, chosen, state=state, evaluated_nodes=processed)
        return ScheduleResult(
            pod,
            OK,
            chosen.name,
            evaluated_nodes=processed,
            feasible_nodes=len(feasible),
            state=state,
        )

    def run_pre_filter(
        self,
        state: CycleState,
        pod: PodView,
        snapshot: Snapshot,
        within: Within | None = None,
        hints: list[frozenset[str]] | None = None,
    ) -> tuple[Sequence[NodeInfo] | Status, Callable[[], dict[str, Status]]]:
        """The nodes to filter, and a function giving the statuses of those PreFilter (or
        `within`) left out: only a pod that fits nowhere needs them, for its FitError.
        Given `hints`, a hint (PreFilterResult.hint) leaves out no node: its nodes are
        appended there instead."""
        allowed: frozenset[str] | None = None
        narrowing: list[str] = []
        for plugin in self.profile.pre_filter:
            result, status = plugin.pre_filter(state, pod, snapshot)
            if status.code is Code.SKIP:
                state.skip_filter.add(plugin.name)
                continue
            if not is_ok(status):
                return status.with_plugin(plugin.name), dict
            if result is not None and result.hint and hints is not None:
                hints.append(result.node_names)
            elif result is not None:
                allowed = result.node_names if allowed is None else allowed & result.node_names
                narrowing.append(plugin.name)
        if within is not None:
            return _narrow_within(snapshot, allowed, narrowing, within)
        if allowed is None:
            return snapshot.nodes, dict
        reason = unresolvable(f"node(s) didn't satisfy plugin(s) [{', '.join(narrowing)}]")
        if not allowed:
            return reason, dict
        kept = [info for info in snapshot.nodes if info.name in allowed]
        return kept, lambda: {i.name: reason for i in snapshot.nodes if i.name not in allowed}

    def _filter_nodes(
        self, state: CycleState, pod: PodView, nodes: Sequence[NodeInfo], total: int
    ) -> tuple[list[NodeInfo] | Status, dict[str, Status], int]:
        wanted = num_feasible_nodes_to_find(self.profile.percentage_of_nodes_to_score, len(nodes))
        filters = [
            (p.name, p.filter) for p in self.profile.filter if p.name not in state.skip_filter
        ]
        feasible: list[NodeInfo] = []
        failed: dict[str, Status] = {}
        count = len(nodes)
        whole = count == total
        start = self.next_start % count if whole else 0
        processed = 0
        success = Code.SUCCESS
        if wanted >= count:
            # Every node will be processed: the column-wise pass finds the same result.
            done = filter_every_node(state, pod, [*nodes[start:], *nodes[:start]], filters)
            if done is not None:
                return done[0], done[1], count  # start + count: the start index stays
        for processed, info in enumerate(chain(nodes[start:], nodes[:start]), 1):
            for name, check in filters:
                status = check(state, pod, info)
                if status is not OK and status.code is not success:
                    if status.code is Code.ERROR:
                        return status.with_plugin(name), failed, processed
                    failed[info.name] = status.with_plugin(name)
                    break
            else:
                feasible.append(info)
                if len(feasible) >= wanted:
                    break
        if whole:
            self.next_start = (start + processed) % count
        return feasible, failed, processed

    def _best(
        self, state: CycleState, pod: PodView, snapshot: Snapshot, nodes: list[NodeInfo]
    ) -> NodeInfo | Status:
        for pre_score in self.profile.pre_score:
            status = pre_score.pre_score(state, pod, snapshot, nodes)
            if status.code is Code.SKIP:
                state.skip_score.add(pre_score.name)
            elif not is_ok(status):
                return status.with_plugin(pre_score.name)
        totals = [0] * len(nodes)
        for scorer in self.profile.score:
            plugin = scorer.plugin
            if plugin.name in state.skip_score:
                continue
            score = plugin.score
            scores = [score(state, pod, info) for info in nodes]
            if scorer.normalizer is not None:
                scorer.normalizer.normalize_scores(state, pod, nodes, scores)
            # min/max and a comprehension instead of one Python loop: this runs for every
            # feasible node and scorer (the simulator's paper method scores every node).
            if min(scores) < MIN_NODE_SCORE or max(scores) > MAX_NODE_SCORE:
                i, value = next(
                    (i, v)
                    for i, v in enumerate(scores)
                    if not MIN_NODE_SCORE <= v <= MAX_NODE_SCORE
                )
                return error(
                    f"plugin {plugin.name} scored node {nodes[i].name} {value}, outside 0..100"
                )
            weight = scorer.weight
            totals = [t + v * weight for t, v in zip(totals, scores, strict=True)]
        return self._select(nodes, totals)

    def _select(self, nodes: list[NodeInfo], totals: list[int]) -> NodeInfo:
        """A uniformly random node among the best, drawn from the seeded generator."""
        best = max(totals)
        ties = [i for i, value in enumerate(totals) if value == best]
        return nodes[ties[0] if len(ties) == 1 else ties[self.rng.randrange(len(ties))]]

    def _failed(
        self,
        state: CycleState,
        pod: PodView,
        snapshot: Snapshot,
        failure: FitError,
        code: Code = Code.UNSCHEDULABLE,
    ) -> ScheduleResult:
        nominated: str | None = None
        message = ""
        for plugin in self.profile.post_filter:
            nominated, status = plugin.post_filter(
                state, pod, snapshot, dict(failure.node_statuses)
            )
            if is_ok(status):
                break
            message = status.message()
        if message:
            failure = failure.with_post_filter(message)
        return ScheduleResult(
            pod,
            Status(code, (failure.message(),)),
            failure=failure,
            nominated_node=nominated,
            evaluated_nodes=failure.num_all_nodes,
            state=state,
        )

    def reserve(
        self, state: CycleState, pod: PodView, node_name: str, snapshot: Snapshot
    ) -> Status:
        """Assume the pod on the node, then run Reserve; on failure undo everything."""
        snapshot.assume(pod, node_name)
        for i, plugin in enumerate(self.profile.reserve):
            status = plugin.reserve(state, pod, node_name, snapshot)
            if not is_ok(status):
                for done in reversed(self.profile.reserve[: i + 1]):
                    done.unreserve(state, pod, node_name, snapshot)
                snapshot.forget(pod)
                return status.with_plugin(plugin.name)
        return OK

    def unreserve(
        self, state: CycleState, pod: PodView, node_name: str, snapshot: Snapshot
    ) -> None:
        for plugin in reversed(self.profile.reserve):
            plugin.unreserve(state, pod, node_name, snapshot)
        snapshot.forget(pod)

    def permit(self, state: CycleState, pod: PodView, node_name: str) -> tuple[Status, float]:
        """The strictest answer wins: a rejection, else the longest wait, else success."""
        waiting = 0.0
        for plugin in self.profile.permit:
            status, timeout = plugin.permit(state, pod, node_name)
            if status.code is Code.WAIT:
                waiting = max(waiting, timeout)
            elif not is_ok(status):
                return status.with_plugin(plugin.name), 0.0
        if waiting > 0:
            return Status(Code.WAIT), waiting
        return OK, 0.0


def _narrow_within(
    snapshot: Snapshot, allowed: frozenset[str] | None, narrowing: list[str], within: Within
) -> tuple[Sequence[NodeInfo] | Status, Callable[[], dict[str, Status]]]:
    """PreFilter's nodes (all when `allowed` is None) inside `within`; the others are left out
    with the reason of whichever excluded them, PreFilter's first."""
    outside = unresolvable(within.reason)
    refused = unresolvable(f"node(s) didn't satisfy plugin(s) [{', '.join(narrowing)}]")
    inside = within.nodes
    kept = [
        info
        for info in snapshot.nodes
        if info.name in inside and (allowed is None or info.name in allowed)
    ]
    if not kept:
        return (outside if allowed is None or allowed & inside else refused), dict

    def left_out() -> dict[str, Status]:
        return {
            info.name: refused if allowed is not None and info.name not in allowed else outside
            for info in snapshot.nodes
            if info.name not in inside or (allowed is not None and info.name not in allowed)
        }

    return kept, left_out
