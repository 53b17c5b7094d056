"""A SignatureBatch's evaluation of many candidates at once, one plugin at a time."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import repeat
from operator import add, mul

from batchsched.framework.batch_totals import Scorer
from batchsched.framework.cycle_state import CycleState
from batchsched.framework.interfaces import MAX_NODE_SCORE, MIN_NODE_SCORE
from batchsched.framework.status import OK, Code, Status
from batchsched.model.pod import PodView
from batchsched.snapshot import NodeInfo

FilterFn = Callable[[CycleState, PodView, NodeInfo], Status]


def evaluate_nodes(
    filters: Sequence[FilterFn],
    plain: Sequence[Scorer],
    normalized: Sequence[Scorer],
    state: CycleState,
    pod: PodView,
    nodes: Sequence[NodeInfo],
    alive: list[int],
) -> tuple[list[int], list[int], list[list[int]]] | None:
    """Filter and score the candidates `alive` (positions in `nodes`, ascending), one plugin at
    a time over the nodes still passing: the positions passing every filter, their weighted
    sum of the scorers without NormalizeScore, and each normalized scorer's raw scores; None
    when a filter errs or a plain scorer scores out of range. Filters and scores are pure, so
    this gives what filtering and scoring node by node gives."""
    # map over repeat() calls each plugin in C's loop, not a comprehension's.
    states, pods = repeat(state), repeat(pod)
    for check in filters:
        statuses = list(map(check, states, pods, map(nodes.__getitem__, alive)))
        passed = [
            i for i, st in zip(alive, statuses, strict=True) if st is OK or st.code is Code.SUCCESS
        ]
        if len(passed) < len(alive) and any(st.code is Code.ERROR for st in statuses):
            return None
        alive = passed
    totals = [0] * len(alive)
    for scorer in plain:
        values = list(map(scorer.score, states, pods, map(nodes.__getitem__, alive)))
        if values and (min(values) < MIN_NODE_SCORE or max(values) > MAX_NODE_SCORE):
            return None
        totals = list(map(add, totals, map(mul, values, repeat(scorer.weight))))
    raws = [
        list(map(scorer.score, states, pods, map(nodes.__getitem__, alive)))
        for scorer in normalized
    ]
    return alive, totals, raws
