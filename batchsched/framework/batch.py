"""Opportunistic batching of a gang's identical members: filter and score once, reuse per member.

kube-scheduler 1.35 (KEP-5598) reuses one pod's filter and score results for the next pod with
the same scheduling signature. Here the reuse is scoped to one gang trial and must give the very
placement the unbatched runner gives (same rotating sample, same normalization, same seeded tie
break), so the rules are:

- Which pods and plugins can be batched at all: framework/batch_build.py.
- Verdicts and raw scores of every candidate are computed once; placing a member changes one
  node, and only that node is evaluated again. Each member's sample is the same window of the
  rotating start index the runner would filter, its normalized scores are recomputed over that
  window by the plugin's own NormalizeScore (a scorer whose raw score is one value everywhere
  shifts every total alike and is left out), and ties draw from the runner's generator.
- Anything unusual (a filter error, a score out of range, no feasible node) hands that member
  to the unbatched runner, which then reports exactly what it always did.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from itertools import compress, repeat

from batchsched.framework.batch_eval import FilterFn, evaluate_nodes
from batchsched.framework.batch_totals import (
    FeasibleRows,
    NodesOf,
    Points,
    Scorer,
    WindowRows,
    feasible_points,
    fresh_totals,
    keep_few,
    uncount,
)
from batchsched.framework.cycle_state import CycleState, MissingState
from batchsched.framework.interfaces import MAX_NODE_SCORE, MIN_NODE_SCORE
from batchsched.framework.runner import (
    ProfileRunner,
    ScheduleResult,
    num_feasible_nodes_to_find,
)
from batchsched.framework.status import OK, Code, is_ok
from batchsched.model.pod import PodView
from batchsched.snapshot import NodeInfo, Snapshot

# Changed nodes fewer than this are evaluated one by one (`_evaluate`), more plugin by plugin.
_FEW_CHANGED = 4

ScoreFn = Callable[[CycleState, PodView, NodeInfo], int]


class SignatureBatch:
    """One signature's verdicts and raw scores over one candidate list, kept across members."""

    __slots__ = (
        "_base",
        "_candidates",
        "_counts",
        "_dirty",
        "_feasible",
        "_filters",
        "_fits",
        "_fixed",
        "_hints",
        "_log",
        "_normalized",
        "_plain",
        "_points",
        "_position",
        "_raw",
        "_rows",
        "_runner",
        "_seen",
        "_snapshot",
        "_wanted",
        "_whole",
        "_windows",
        "feasible_picks",
        "kept_picks",
    )

    def __init__(
        self,
        runner: ProfileRunner,
        snapshot: Snapshot,
        base: CycleState,
        candidates: Sequence[NodeInfo],
        filters: list[FilterFn],
        scorers: list[Scorer],
        hints: Sequence[frozenset[str]] = (),
    ) -> None:
        self._runner, self._snapshot, self._base = runner, snapshot, base
        self._hints = hints  # PreFilter's hints: the other nodes fail a filter at first
        self._candidates = list(candidates)
        self._position = {info.name: i for i, info in enumerate(self._candidates)}
        self._filters = filters
        count = len(candidates)
        percentage = runner.profile.percentage_of_nodes_to_score
        self._wanted = num_feasible_nodes_to_find(percentage, count)
        self._whole = count == len(snapshot)
        self._plain = [s for s in scorers if s.normalizer is None]
        self._normalized = [s for s in scorers if s.normalizer is not None]
        self._fixed = [0] * count  # weighted sum of the scorers without NormalizeScore
        self._raw = [[0] * count for _ in self._normalized]
        # Per normalized scorer: how many feasible nodes have each raw value (one value
        # everywhere: the scorer shifts every total alike and cannot change the choice).
        self._counts: list[dict[int, int]] = [{} for _ in self._normalized]
        self._fits = [False] * count
        self._feasible: list[int] = []  # positions of feasible candidates, ascending
        self._dirty: set[int] = set(range(count))
        self._log: list[int] = []  # positions evaluated again since the first evaluation
        self._windows: dict[int, WindowRows] = {}  # by first position (batch_totals)
        self._seen: dict[int, list[int]] = {}  # windows computed in full once, by first
        self._points: Points = {}  # normalized points by scorer and distinct values
        self._rows: FeasibleRows | None = None  # built at the first pick of every feasible node
        self.kept_picks = 0  # picks made from a kept window's rows (tests read it)
        self.feasible_picks = 0  # picks made from the rows of every feasible node (as well)

    def changed(self, node_name: str) -> None:
        """A placement (or its undo) touched this node: evaluate it again before the next pick."""
        at = self._position.get(node_name)
        if at is not None:
            self._dirty.add(at)

    def changed_nodes(self, nodes: Iterable[NodeInfo]) -> None:
        """`changed` for each of `nodes`."""
        position = self._position
        self._dirty.update(at for info in nodes if (at := position.get(info.name)) is not None)

    def refresh(self, pod: PodView) -> bool:
        """Evaluate the nodes changed since the last pick; False when a plugin errs or scores
        out of range there (the runner then takes over)."""
        dirty = sorted(self._dirty)
        self._dirty.clear()
        if len(dirty) == len(self._candidates) and not self._feasible:
            return self._evaluate_every_node(pod)
        if len(dirty) < _FEW_CHANGED:
            return all(self._evaluate(pod, i) for i in dirty)
        return self._evaluate_changed(pod, dirty)

    def _evaluate_every_node(self, pod: PodView) -> bool:
        """The first evaluation (`_evaluate_nodes` over every candidate PreFilter's hints
        leave in)."""
        nodes = self._candidates
        alive = list(range(len(nodes)))
        for hint in self._hints:  # a node left out fails a filter now: it stays unfit
            alive = [i for i in alive if nodes[i].name in hint]
        passed = self._evaluate_nodes(pod, alive)
        if passed is None:
            return False
        self._feasible = passed
        self._rows = None
        return True

    def _evaluate_changed(self, pod: PodView, dirty: list[int]) -> bool:
        """`_evaluate` of each of `dirty` (ascending), the plugins called one at a time over
        them all, as `_evaluate_nodes` does."""
        self._log.extend(dirty)
        fits, feasible, rows = self._fits, self._feasible, self._rows
        for i in dirty:
            if fits[i]:
                fits[i] = False
                for k, counts in enumerate(self._counts):
                    uncount(counts, self._raw[k][i])
                del feasible[bisect_left(feasible, i)]
                if rows is not None:
                    rows.remove(i)
        passed = self._evaluate_nodes(pod, dirty)
        if passed is None:
            return False
        for i in passed:
            insort(feasible, i)
            if rows is not None:
                rows.add(i, self._fixed, self._raw)
        return True

    def _evaluate_nodes(self, pod: PodView, alive: list[int]) -> list[int] | None:
        """`evaluate_nodes` over the unfit candidates `alive`: record the verdicts and scores
        of those passing and return them (None as it does)."""
        found = evaluate_nodes(
            self._filters, self._plain, self._normalized, self._base, pod, self._candidates, alive
        )
        if found is None:
            return None
        passed, totals, raws = found
        fixed = self._fixed
        for i, total in zip(passed, totals, strict=True):
            fixed[i] = total
        for raw, counts, values in zip(self._raw, self._counts, raws, strict=True):
            for i, value in zip(passed, values, strict=True):
                raw[i] = value
            for value, count in Counter(values).items():
                counts[value] = counts.get(value, 0) + count
        for i in passed:
            self._fits[i] = True
        return passed

    def rescore(self, pod: PodView, moved: frozenset[str]) -> bool:
        """Score again with the Score plugins named in `moved` when nothing but their own
        scoring moved (a learning scorer's target, lone_batches.py): a rebuild would give
        the same verdicts and the other plugins' scores, since those read only the pod's
        signature and the nodes. Their PreScore runs again and their raw scores are recomputed
        over the feasible nodes (a changed node is evaluated in full at the next refresh).
        False when a PreScore answers otherwise than at the build: rebuild then."""
        state, nodes = self._base, self._candidates
        for plugin in self._runner.profile.pre_score:
            if plugin.name in moved:
                code = plugin.pre_score(state, pod, self._snapshot, nodes).code
                if code not in (Code.SUCCESS, Code.SKIP) or (
                    (code is Code.SKIP) != (plugin.name in state.skip_score)
                ):
                    return False
        if any(s.name in moved for s in self._plain):
            return False  # their sum is kept, not their scores: rebuild
        stale = [i for i in self._feasible if i not in self._dirty]
        for k, scorer in enumerate(self._normalized):
            if scorer.name in moved:
                raw = self._raw[k]
                values = map(
                    scorer.score, repeat(state), repeat(pod), map(nodes.__getitem__, stale)
                )
                for i, value in zip(stale, values, strict=True):
                    raw[i] = value
                self._counts[k] = dict(Counter(map(raw.__getitem__, self._feasible)))
        # Rows and points kept were computed with the old raw scores.
        self._rows = None
        self._windows.clear()
        self._seen.clear()
        self._points.clear()
        self._log.clear()
        return True

    def _evaluate(self, pod: PodView, i: int) -> bool:
        info, state = self._candidates[i], self._base
        self._log.append(i)
        fits = True
        for check in self._filters:
            status = check(state, pod, info)
            if status is not OK and status.code is not Code.SUCCESS:
                if status.code is Code.ERROR:
                    return False
                fits = False
                break
        if self._fits[i]:
            for k, counts in enumerate(self._counts):
                uncount(counts, self._raw[k][i])
            del self._feasible[bisect_left(self._feasible, i)]
            if self._rows is not None:
                self._rows.remove(i)
        self._fits[i] = fits
        if not fits:
            return True
        fixed = 0
        for scorer in self._plain:
            value = scorer.score(state, pod, info)
            if not MIN_NODE_SCORE <= value <= MAX_NODE_SCORE:
                return False
            fixed += value * scorer.weight
        self._fixed[i] = fixed
        for k, scorer in enumerate(self._normalized):
            value = self._raw[k][i] = scorer.score(state, pod, info)
            self._counts[k][value] = self._counts[k].get(value, 0) + 1
        insort(self._feasible, i)
        if self._rows is not None:
            self._rows.add(i, self._fixed, self._raw)
        return True

    def sample(self) -> tuple[list[int], int, int] | None:
        """The feasible positions the runner would score next, in its order, how many nodes it
        would have filtered, and its next start index; None when none is feasible."""
        feasible, count, wanted = self._feasible, len(self._candidates), self._wanted
        if not feasible:
            return None
        start = self._runner.next_start % count if self._whole else 0
        at = bisect_left(feasible, start)
        if wanted >= count or len(feasible) < wanted:
            # Every node is filtered: the start index stays where it is.
            return feasible[at:] + feasible[:at], count, self._runner.next_start
        window = feasible[at : at + wanted]
        if len(window) < wanted:
            window += feasible[: wanted - len(window)]
        processed = (window[-1] - start) % count + 1
        following = (start + processed) % count if self._whole else self._runner.next_start
        return window, processed, following

    def pick(self, pod: PodView, window: list[int]) -> int | None:
        """The runner's choice among `window` (its generator drawn for ties as `_select`
        does); None when a normalized score falls outside 0..100 (the runner reports it)."""
        if len(window) == 1:
            return window[0]
        # A scorer with one raw value over every feasible node shifts every total alike.
        included = tuple(k for k, counts in enumerate(self._counts) if len(counts) > 1)
        nodes = NodesOf(self._candidates, window)
        if len(window) == len(self._feasible) and all(
            self._normalized[k].by_value for k in included
        ):
            return self._pick_feasible(pod, window, included, nodes)
        kept = self._kept(window, included)
        if kept is not None:
            offsets = kept.best(self._normalized, self._base, pod, nodes, self._points)
            if offsets is None:
                return None
            self.kept_picks += 1
            if len(offsets) == 1:
                return window[offsets[0]]
            return window[offsets[self._runner.rng.randrange(len(offsets))]]  # the runner's draw
        totals = fresh_totals(
            window, included, self._fixed, self._raw, self._normalized, self._base, pod, nodes
        )
        if totals is None:
            return None
        best = max(totals)
        if totals.count(best) == 1:
            return window[totals.index(best)]
        # The best nodes in window order, as _select lists them.
        ties = list(compress(window, map(best.__eq__, totals)))
        return ties[self._runner.rng.randrange(len(ties))]  # the runner's draw

    def _pick_feasible(
        self, pod: PodView, window: list[int], included: tuple[int, ...], nodes: NodesOf
    ) -> int | None:
        """`pick` when the window is every feasible node (rotated to start at window[0]) and
        every included scorer is by value: the best rows of `FeasibleRows`, the very nodes
        (and the same draw) the totals over the whole window give."""
        weighted = feasible_points(
            included, self._counts, self._normalized, self._base, pod, nodes, self._points
        )
        if weighted is None:
            return None
        rows = self._rows
        if rows is None:
            rows = self._rows = FeasibleRows(self._feasible, self._fixed, self._raw)
        best = rows.best(included, weighted)
        self.feasible_picks += 1
        if len(best) == 1:
            return best[0]
        # In window order: the positions from window[0] on, then those before it.
        at = bisect_left(best, window[0])
        return best[(at + self._runner.rng.randrange(len(best))) % len(best)]

    def _kept(self, window: list[int], included: tuple[int, ...]) -> WindowRows | None:
        """The window's rows brought up to date, when every included scorer is by value and
        the window was seen before (a window seen once is computed in full: it may never come
        back)."""
        if not all(self._normalized[k].by_value for k in included):
            return None
        start = window[0]
        kept = self._windows.pop(start, None)
        if kept is not None and kept.fits(window, included):
            kept.catch_up(self._log[kept.log_at :], self._fixed, self._raw)
            kept.log_at = len(self._log)
        elif self._seen.get(start) == window:
            kept = WindowRows(window, included, len(self._log), self._fixed, self._raw)
        else:
            self._seen[start] = window
            keep_few(self._seen)
            return None
        self._windows[start] = kept  # the most recently used last
        keep_few(self._windows)
        return kept

    def schedule(self, pod: PodView) -> ScheduleResult | None:
        """schedule_one's result for `pod` from the kept results; None to hand it to the
        runner (nothing drawn or moved yet)."""
        try:
            if not self.refresh(pod):
                return None
            found = self.sample()
            if found is None:
                return None
            window, processed, following = found
            chosen = self.pick(pod, window)
        except MissingState:
            return None  # the runner turns it into the error it reports
        if chosen is None:
            return None
        runner = self._runner
        runner.next_start = following
        node = self._candidates[chosen].name
        self._dirty.add(chosen)
        state = self._base.clone()
        status = runner.reserve(state, pod, node, self._snapshot)
        if not is_ok(status):
            return ScheduleResult(pod, status, evaluated_nodes=processed)
        status, timeout = runner.permit(state, pod, node)
        if status.is_rejection or status.code is Code.ERROR:
            runner.unreserve(state, pod, node, self._snapshot)
            return ScheduleResult(pod, status, evaluated_nodes=processed)
        return ScheduleResult(
            pod,
            status,
            node,
            evaluated_nodes=processed,
            feasible_nodes=len(window),
            permit_timeout=timeout,
            state=state,
        )
