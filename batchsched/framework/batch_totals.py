"""A SignatureBatch's choice within one sample window, kept while the window comes back.

With the rotating start index a large gang's members cycle through the same few windows
(5000 nodes, 500 per sample: ten windows, each seen again every tenth member), and between two
visits only the nodes placed on changed. Every scorer left is by value
(batch.BY_VALUE_NORMALIZERS: a node's points are a function of its raw value and of the
window's *set* of raw values), so a node's total depends only on its row, (raw values, sum of
the unnormalized scores). The kept window groups its nodes by row: a pick normalizes each
scorer's few distinct values, totals each row once and takes the best rows' nodes in window
order, the very nodes (and the same tie draw) the full computation over ~500 nodes gives; a
changed node only moves from one row to another.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import chain, repeat
from operator import add, itemgetter, mul
from typing import TypeVar, overload

from batchsched.framework.cycle_state import CycleState
from batchsched.framework.interfaces import MAX_NODE_SCORE, MIN_NODE_SCORE, NormalizeScorePlugin
from batchsched.model.pod import PodView
from batchsched.snapshot import NodeInfo

# Windows kept per batch: enough for a cycle of windows over 5000 nodes and more, few enough
# that windows which never come back (a start index shifted by a node that filled) cost little.
KEPT_WINDOWS = 32

# Plugins whose NormalizeScore gives each node a function of its own raw score and of the set
# of raw scores it is handed, reading neither the nodes nor how often a value occurs (kube's
# default normalization by the highest score, our rank normalization): the batch normalizes a
# window's few distinct values instead of its ~500 scores.
BY_VALUE_NORMALIZERS = frozenset(
    {"TaintToleration", "NodeAffinity", "GpuTopology", "DynamicResources"}
)

KEPT_POINTS = 256  # normalized value sets remembered per batch (cleared when full)

T = TypeVar("T")
Points = dict[tuple[int, tuple[int, ...]], dict[int, int]]


@dataclass(frozen=True, slots=True)
class Scorer:
    """A Score plugin as a batch calls it: its score, weight and NormalizeScore, if any."""

    score: Callable[[CycleState, PodView, NodeInfo], int]
    weight: int
    normalizer: NormalizeScorePlugin | None
    by_value: bool = False
    name: str = ""  # the plugin's (SignatureBatch.rescore picks the learning ones by it)


Row = tuple[tuple[int, ...], int]  # the included scorers' raw values, the fixed sum


class WindowRows:
    """One window's nodes grouped by row, and per included scorer how many have each value."""

    __slots__ = ("cells", "counts", "included", "log_at", "offsets", "rows", "weighted", "window")

    def __init__(
        self,
        window: list[int],
        included: tuple[int, ...],
        log_at: int,
        fixed: list[int],
        raw: list[list[int]],
    ) -> None:
        self.window, self.included, self.log_at = window, included, log_at
        gather = itemgetter(*window)
        columns: list[tuple[int, ...]] = [gather(raw[k]) for k in included]
        keys: list[tuple[int, ...]] = (
            list(zip(*columns, strict=True)) if columns else [()] * len(window)
        )
        self.rows: list[Row] = list(zip(keys, gather(fixed), strict=True))
        self.cells: dict[Row, list[int]] = {}  # row -> window offsets, ascending
        for j, row in enumerate(self.rows):
            members = self.cells.get(row)
            if members is None:
                self.cells[row] = [j]
            else:
                members.append(j)
        self.counts = [Counter(column) for column in columns]
        self.offsets = {p: j for j, p in enumerate(window)}
        # Per included scorer, raw value -> weighted points; None once a scorer's set of
        # values changed (normalized again at the next pick).
        self.weighted: list[dict[int, int]] | None = None

    def fits(self, window: list[int], included: tuple[int, ...]) -> bool:
        return self.included == included and self.window == window

    def catch_up(self, changed: Sequence[int], fixed: list[int], raw: list[list[int]]) -> None:
        """Move the window's nodes among `changed` (candidate positions evaluated again since)
        to their rows now."""
        offsets = self.offsets
        for p in offsets.keys() & changed:
            j = offsets[p]
            key = tuple(raw[k][p] for k in self.included)
            row, old = (key, fixed[p]), self.rows[j]
            if row == old:
                continue
            members = self.cells[old]
            del members[bisect_left(members, j)]
            if not members:
                del self.cells[old]
            insort(self.cells.setdefault(row, []), j)
            self.rows[j] = row
            for t, counts in enumerate(self.counts):
                before, now = old[0][t], key[t]
                if before != now:
                    if counts[before] == 1 or now not in counts:
                        self.weighted = None
                    uncount(counts, before)
                    counts[now] += 1

    def best(
        self,
        scorers: Sequence[Scorer],
        state: CycleState,
        pod: PodView,
        nodes: Sequence[NodeInfo],
        memo: Points,
    ) -> list[int] | None:
        """The window offsets of the highest total, ascending (not to be changed: it may be a
        kept list); None when a normalized score falls outside 0..100. `memo`: the batch's
        weighted points by (scorer, distinct raw values), the same in every window."""
        weighted = self.weighted
        if weighted is None:
            weighted = []
            for t, k in enumerate(self.included):
                distinct = tuple(sorted(self.counts[t]))
                points = _remembered(memo, k, distinct, scorers[k], state, pod, nodes)
                if points is None:
                    return None
                weighted.append(points)
            self.weighted = weighted
        top: int | None = None
        winners: list[list[int]] = []
        for (key, fixed), members in self.cells.items():
            total = fixed + sum(points[v] for points, v in zip(weighted, key, strict=True))
            if top is None or total > top:
                top, winners = total, [members]
            elif total == top:
                winners.append(members)
        return winners[0] if len(winners) == 1 else sorted(chain.from_iterable(winners))


def keep_few(kept: dict[int, T]) -> None:
    if len(kept) > KEPT_WINDOWS:
        del kept[next(iter(kept))]  # the least recently used


def uncount(counts: dict[int, int], value: int) -> None:
    left = counts[value] - 1
    if left:
        counts[value] = left
    else:
        del counts[value]


def _remembered(
    memo: Points,
    k: int,
    distinct: tuple[int, ...],
    scorer: Scorer,
    state: CycleState,
    pod: PodView,
    nodes: Sequence[NodeInfo],
) -> dict[int, int] | None:
    """`_weigh` of scorer `k` over `distinct`, remembered in `memo` (cleared when full)."""
    points = memo.get((k, distinct))
    if points is None:
        points = _weigh(scorer, distinct, state, pod, nodes)
        if points is None:
            return None
        if len(memo) >= KEPT_POINTS:
            memo.clear()
        memo[k, distinct] = points
    return points


def _weigh(
    scorer: Scorer,
    distinct: Sequence[int],
    state: CycleState,
    pod: PodView,
    nodes: Sequence[NodeInfo],
) -> dict[int, int] | None:
    """Raw value -> weighted normalized points: the window's distinct values (ascending)
    normalized."""
    assert scorer.normalizer is not None
    points = list(distinct)
    scorer.normalizer.normalize_scores(state, pod, nodes[: len(points)], points)
    if min(points) < MIN_NODE_SCORE or max(points) > MAX_NODE_SCORE:
        return None
    weight = scorer.weight
    return {v: p * weight for v, p in zip(distinct, points, strict=True)}


def fresh_totals(
    window: list[int],
    included: tuple[int, ...],
    fixed: list[int],
    raw: list[list[int]],
    scorers: Sequence[Scorer],
    state: CycleState,
    pod: PodView,
    nodes: Sequence[NodeInfo],
) -> Sequence[int] | None:
    """The totals computed in full, for windows with a scorer that is not by value (its
    NormalizeScore reads the nodes or how often a value occurs); None when out of range."""
    # itemgetter and map gather and add in C: this runs once per member over ~500 nodes.
    gather = itemgetter(*window)
    totals: Sequence[int] = gather(fixed)
    for k in included:
        scorer = scorers[k]
        assert scorer.normalizer is not None
        values: tuple[int, ...] = gather(raw[k])
        if scorer.by_value:
            weighted = _weigh(scorer, sorted(set(values)), state, pod, nodes)
            if weighted is None:
                return None
            totals = list(map(add, totals, map(weighted.__getitem__, values)))
            continue
        scores = list(values)
        scorer.normalizer.normalize_scores(state, pod, nodes, scores)
        if min(scores) < MIN_NODE_SCORE or max(scores) > MAX_NODE_SCORE:
            return None
        totals = list(map(add, totals, map(mul, scores, [scorer.weight] * len(scores))))
    return totals


class NodesOf(Sequence[NodeInfo]):
    """The window's nodes for NormalizeScore, looked up only if a normalizer reads them."""

    __slots__ = ("_nodes", "_positions")

    def __init__(self, nodes: list[NodeInfo], positions: list[int]) -> None:
        self._nodes, self._positions = nodes, positions

    def __len__(self) -> int:
        return len(self._positions)

    @overload
    def __getitem__(self, index: int) -> NodeInfo: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[NodeInfo]: ...

    def __getitem__(self, index: int | slice) -> NodeInfo | Sequence[NodeInfo]:
        if isinstance(index, slice):
            return [self._nodes[p] for p in self._positions[index]]
        return self._nodes[self._positions[index]]


class FeasibleRows:
    """Every feasible candidate grouped by row (every normalized scorer's raw value, the fixed
    sum), kept as nodes are evaluated again: a window that is every feasible node (the runner
    filters them all, as percentageOfNodesToScore 100 does) is picked from its ~80 rows, not
    its ~500 nodes, when every included scorer is by value (module doc)."""

    __slots__ = ("cells", "row_of")

    def __init__(self, feasible: Sequence[int], fixed: list[int], raw: list[list[int]]) -> None:
        self.row_of: dict[int, Row] = {}
        self.cells: dict[Row, list[int]] = {}  # row -> candidate positions, ascending
        columns = [list(map(values.__getitem__, feasible)) for values in raw]
        keys = zip(*columns, strict=True) if columns else repeat((), len(feasible))
        cells, row_of = self.cells, self.row_of
        for i, key, total in zip(feasible, keys, map(fixed.__getitem__, feasible), strict=True):
            row = row_of[i] = (key, total)
            members = cells.get(row)
            if members is None:
                cells[row] = [i]
            else:
                members.append(i)

    def add(self, i: int, fixed: list[int], raw: list[list[int]]) -> None:
        """Candidate `i` is feasible with these raw scores now."""
        row = self.row_of[i] = (tuple(values[i] for values in raw), fixed[i])
        members = self.cells.get(row)
        if members is None:
            self.cells[row] = [i]
        else:
            insort(members, i)

    def remove(self, i: int) -> None:
        """Candidate `i` is no longer feasible with the scores it had (evaluated again)."""
        row = self.row_of.pop(i)
        members = self.cells[row]
        del members[bisect_left(members, i)]
        if not members:
            del self.cells[row]

    def best(
        self,
        included: tuple[int, ...],
        weighted: Sequence[dict[int, int]],
    ) -> list[int]:
        """The positions of the highest total, ascending; `weighted`: per included scorer,
        raw value -> weighted points (every feasible node's distinct values normalized)."""
        top: int | None = None
        winners: list[list[int]] = []
        if len(included) == 1:
            (k,), (points,) = included, weighted
            for (key, fixed), members in self.cells.items():
                total = fixed + points[key[k]]
                if top is None or total > top:
                    top, winners = total, [members]
                elif total == top:
                    winners.append(members)
        else:
            pairs = list(zip(included, weighted, strict=True))
            for (key, fixed), members in self.cells.items():
                total = fixed + sum(points[key[k]] for k, points in pairs)
                if top is None or total > top:
                    top, winners = total, [members]
                elif total == top:
                    winners.append(members)
        return winners[0] if len(winners) == 1 else sorted(chain.from_iterable(winners))


def feasible_points(
    included: tuple[int, ...],
    counts: Sequence[dict[int, int]],
    scorers: Sequence[Scorer],
    state: CycleState,
    pod: PodView,
    nodes: Sequence[NodeInfo],
    memo: Points,
) -> list[dict[int, int]] | None:
    """Per included scorer (all by value), its raw value -> weighted points over the distinct
    values of `counts` (every feasible node's); None when a normalized score falls outside
    0..100. `memo` as in `WindowRows.best`."""
    weighted = []
    for k in included:
        distinct = tuple(sorted(counts[k]))
        points = _remembered(memo, k, distinct, scorers[k], state, pod, nodes)
        if points is None:
            return None
        weighted.append(points)
    return weighted
