"""The runner's filter pass over every node, one filter at a time (framework/runner.py)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from batchsched.framework.cycle_state import CycleState
from batchsched.framework.status import OK, Code, Status
from batchsched.model.pod import PodView
from batchsched.snapshot import NodeInfo


def filter_every_node(
    state: CycleState,
    pod: PodView,
    nodes: list[NodeInfo],
    filters: Sequence[tuple[str, Callable[[CycleState, PodView, NodeInfo], Status]]],
) -> tuple[list[NodeInfo], dict[str, Status]] | None:
    """Every node through the filters one filter at a time, over the nodes still passing: the
    same (node, filter) calls as the node-by-node loop, so the same feasible nodes in the same
    order and the same first failure per node (listed in node order), with less interpreter
    work per node (one comprehension per filter). None when a filter errs: the node-by-node
    loop then reports the error it meets first (filters are pure, so running them again is
    harmless)."""
    success = Code.SUCCESS
    positions = list(range(len(nodes)))
    alive = nodes
    failures: list[tuple[int, str, Status]] = []
    for name, check in filters:
        statuses = [check(state, pod, info) for info in alive]
        if statuses.count(OK) == len(statuses):
            continue
        kept: list[NodeInfo] = []
        kept_at: list[int] = []
        for at, info, status in zip(positions, alive, statuses, strict=True):
            if status is OK or status.code is success:
                kept.append(info)
                kept_at.append(at)
            elif status.code is Code.ERROR:
                return None
            else:
                failures.append((at, info.name, status.with_plugin(name)))
        alive, positions = kept, kept_at
    failures.sort(key=_position)
    return alive, {node: status for _, node, status in failures}


def _position(failure: tuple[int, str, Status]) -> int:
    return failure[0]
