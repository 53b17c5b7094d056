"""Small builders for preemption tests: GPU nodes, running pods and gangs, requests."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from batchsched.framework.registry import assemble_profile
from batchsched.framework.runner import ProfileRunner
from batchsched.gang.core import GangRequest, Outcome, schedule_gang
from batchsched.gang.podgroup import POD_GROUP_LABEL, PodGroupView, parse_pod_group
from batchsched.model.pod import PodView
from batchsched.model.selectors import LabelSelector
from batchsched.plugins.registry import DEFAULT_PLUGINS, default_registry
from batchsched.preemption.model import DisruptionBudget, PreemptionPlan, PreemptionRequest
from batchsched.snapshot import Snapshot
from tests.builders import make_node, make_pod

PROFILE = assemble_profile(default_registry(), "gpu-scheduler", DEFAULT_PLUGINS, {})
NOW = 100_000.0


def runner() -> ProfileRunner:
    return ProfileRunner(PROFILE)


def group(name: str, min_member: int, namespace: str = "ml") -> PodGroupView:
    return parse_pod_group(
        {
            "apiVersion": "scheduling.x-k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": name, "namespace": namespace, "uid": f"pg-{name}"},
            "spec": {"minMember": min_member},
        }
    )


def pod(
    name: str,
    gpus: int = 0,
    priority: int = 0,
    node: str = "",
    gang: str = "",
    labels: Mapping[str, str] | None = None,
    never: bool = False,
    cpu: str = "1",
) -> PodView:
    builder = make_pod(name, "ml").priority(priority).cpu(cpu)
    if gpus:
        builder = builder.gpus(gpus)
    if node:
        builder = builder.node(node)
    if gang:
        builder = builder.label(POD_GROUP_LABEL, gang)
    for key, value in (labels or {}).items():
        builder = builder.label(key, value)
    if never:
        builder = builder.set("spec.preemptionPolicy", "Never")
    return builder.view()


def gang_pods(name: str, nodes: Sequence[str], gpus: int, priority: int = 0) -> tuple[PodView, ...]:
    """A running gang, one member on each listed node."""
    return tuple(
        pod(f"{name}-{i}", gpus, priority, node=node, gang=name) for i, node in enumerate(nodes)
    )


def cluster(
    nodes: Iterable[tuple[str, int]], pods: Iterable[PodView], zones: Mapping[str, str] = {}
) -> Snapshot:
    views = []
    for name, gpus in nodes:
        builder = make_node(name).cpu("64").memory("256Gi")
        if gpus:
            builder = builder.gpus(gpus)
        if name in zones:
            builder = builder.zone(zones[name])
        views.append(builder.view())
    return Snapshot(views, list(pods))


def request(
    preemptor: Sequence[PodView],
    running: Iterable[PodView],
    group_view: PodGroupView | None = None,
    started: Mapping[str, float] | None = None,
    min_runtime_s: float = 0.0,
    budgets: Sequence[DisruptionBudget] = (),
    reclaimable: frozenset[str] = frozenset(),
    bound: int = 0,
) -> PreemptionRequest:
    """gang_of is read from the pod-group label of the running pods, as the runtime does."""
    running = list(running)
    gang_of = {
        p.uid: f"ml/{p.labels[POD_GROUP_LABEL]}" for p in running if POD_GROUP_LABEL in p.labels
    }
    sizes: dict[str, int] = {}
    for key in gang_of.values():
        sizes[key] = sizes.get(key, 0) + 1
    return PreemptionRequest(
        preemptor=tuple(preemptor),
        group=group_view,
        bound_members=bound,
        now=NOW,
        started=started if started is not None else {p.uid: NOW - 3600 for p in running},
        min_runtime_s=min_runtime_s,
        budgets=budgets,
        gang_of=gang_of,
        gang_min_member=sizes,
        reclaimable=reclaimable,
    )


def budget(name: str, allowed: int, **labels: str) -> DisruptionBudget:
    return DisruptionBudget("ml", name, LabelSelector(tuple(sorted(labels.items()))), allowed)


def fits_after(
    plan: PreemptionPlan,
    req: PreemptionRequest,
    nodes: Iterable[tuple[str, int]],
    running: Iterable[PodView],
    zones: Mapping[str, str] = {},
) -> bool:
    """Independent check: a fresh snapshot without the victims, the preemptor scheduled by
    the runner (the gang cycle for a gang)."""
    gone = {p.uid for p in plan.victim_pods()}
    snap = cluster(nodes, [p for p in running if p.uid not in gone], zones)
    if req.group is None:
        return runner().schedule_one(req.preemptor[0], snap).placed
    decision = schedule_gang(
        GangRequest(req.group, req.preemptor, bound=req.bound_members),
        snap,
        runner(),
        hold_incomplete=False,
    )
    return decision.outcome is not Outcome.REJECT
