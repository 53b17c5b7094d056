"""batchsched's answers as an extender to kube-scheduler: a profile's Filter and Score plugins
run on the live snapshot for the nodes kube-scheduler asks about. Pure and synchronous.

Filter runs the profile's PreFilter and Filter plugins per node and answers
ExtenderFilterResult (an UnschedulableAndUnresolvable status goes to
FailedAndUnresolvableNodes, so kube's preemption skips those nodes). Prioritize runs PreScore,
Score and NormalizeScore over the nodes asked about and answers each node's weighted total on
kube's extender scale, 0..MaxExtenderPriority (10), min-max: the best node 10, the worst 0.
Min-max rather than total * 10 / (100 * weights) because GpuTopology normalizes by rank (100,
99, 98, ... keep one milli-GPU of fragmentation apart): on an absolute 11-step scale every
node would read 10, and kube-scheduler would hear no preference at all.
"""

from __future__ import annotations

from collections.abc import Sequence

from batchsched.extenders.protocol import MAX_EXTENDER_PRIORITY, Json
from batchsched.framework.cycle_state import CycleState
from batchsched.framework.profile import Profile
from batchsched.framework.status import Code, Status, is_ok
from batchsched.model.pod import PodView
from batchsched.snapshot import NodeInfo, Snapshot

NOT_KNOWN = "node is not in batchsched's cache (yet)"


def asked_names(args: Json) -> tuple[list[str], dict[str, object] | None]:
    """The node names of ExtenderArgs, and the Node objects by name when it sent whole nodes
    (a filter answer hands back the same objects)."""
    names = args.get("NodeNames")
    if isinstance(names, list):
        return [str(n) for n in names], None
    nodes = args.get("Nodes")
    items = nodes.get("items") if isinstance(nodes, dict) else None
    by_name: dict[str, object] = {}
    for item in items if isinstance(items, list) else []:
        meta = item.get("metadata") if isinstance(item, dict) else None
        name = meta.get("name") if isinstance(meta, dict) else None
        if isinstance(name, str):
            by_name[name] = item
    return list(by_name), by_name


def filter_answer(
    profile: Profile, snapshot: Snapshot, pod: PodView, names: Sequence[str]
) -> tuple[list[str], dict[str, str], dict[str, str]]:
    """(passed, failed, failed and unresolvable) for the nodes asked about."""
    state = CycleState()
    failed: dict[str, str] = {}
    unresolvable: dict[str, str] = {}
    allowed: frozenset[str] | None = None
    for plugin in profile.pre_filter:
        result, status = plugin.pre_filter(state, pod, snapshot)
        if status.code is Code.SKIP:
            state.skip_filter.add(plugin.name)
        elif not is_ok(status):
            return [], *_all_failed(status, names)
        elif result is not None:
            allowed = result.node_names if allowed is None else allowed & result.node_names
    passed: list[str] = []
    infos = _infos(snapshot)
    for name in names:
        info = infos.get(name)
        if info is None:
            failed[name] = NOT_KNOWN
            continue
        if allowed is not None and name not in allowed:
            unresolvable[name] = "node(s) didn't satisfy a PreFilter plugin"
            continue
        refusal = _filter(profile, state, pod, info)
        if refusal is None:
            passed.append(name)
        elif refusal.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
            unresolvable[name] = refusal.message()
        else:
            failed[name] = refusal.message()
    return passed, failed, unresolvable


def prioritize_answer(
    profile: Profile, snapshot: Snapshot, pod: PodView, names: Sequence[str]
) -> list[Json]:
    """HostPriorityList for the nodes asked about that batchsched knows."""
    infos = _infos(snapshot)
    nodes = [infos[n] for n in names if n in infos]
    state = CycleState()
    for plugin in profile.pre_filter:  # PreScore plugins may read what PreFilter wrote
        _, status = plugin.pre_filter(state, pod, snapshot)
        if status.code is Code.SKIP:
            state.skip_score.add(plugin.name)
    totals = [0] * len(nodes)
    for pre_score in profile.pre_score:
        if pre_score.pre_score(state, pod, snapshot, nodes).code is not Code.SUCCESS:
            state.skip_score.add(pre_score.name)
    for scorer in profile.score:
        if scorer.plugin.name in state.skip_score or not nodes:
            continue
        scores = [scorer.plugin.score(state, pod, info) for info in nodes]
        if scorer.normalizer is not None:
            scorer.normalizer.normalize_scores(state, pod, nodes, scores)
        totals = [t + s * scorer.weight for t, s in zip(totals, scores, strict=True)]
    return [
        {"Host": info.name, "Score": score}
        for info, score in zip(nodes, extender_scale(totals), strict=True)
    ]


def extender_scale(totals: Sequence[int]) -> list[int]:
    """Min-max onto 0..MaxExtenderPriority; all equal (or one node) reads 0: no preference."""
    low, high = min(totals, default=0), max(totals, default=0)
    if high == low:
        return [0] * len(totals)
    return [round(MAX_EXTENDER_PRIORITY * (t - low) / (high - low)) for t in totals]


def _infos(snapshot: Snapshot) -> dict[str, NodeInfo]:
    return {info.name: info for info in snapshot.nodes}


def _filter(profile: Profile, state: CycleState, pod: PodView, info: NodeInfo) -> Status | None:
    for plugin in profile.filter:
        if plugin.name in state.skip_filter:
            continue
        status = plugin.filter(state, pod, info)
        if not is_ok(status):
            return status.with_plugin(plugin.name)
    return None


def _all_failed(status: Status, names: Sequence[str]) -> tuple[dict[str, str], dict[str, str]]:
    message = status.message()
    if status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
        return {}, dict.fromkeys(names, message)
    return dict.fromkeys(names, message), {}
