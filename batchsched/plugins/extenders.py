"""Extenders: HTTP scheduler extenders' verdicts (kube-scheduler's `extenders:`) as a Filter
and a Score, read from data the runtime fetched before the cycle.

The cycle is pure and synchronous, so it cannot wait on an HTTP call. The runtime asks every
interested extender about a pod before its cycle (batchsched/extenders/) and hands the answers
over as an `ExtenderVerdict` through a `VerdictSource`; this plugin applies them where
kube-scheduler does: after the in-process filters (it runs last at Filter) and with its score
added to the plugins' weighted scores. Without a source, or for a pod no extender is
interested in, PreFilter skips it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import ClassVar, Final, Protocol

from batchsched.framework.cycle_state import CycleState, StateKey
from batchsched.framework.interfaces import MAX_NODE_SCORE, PreFilterResult
from batchsched.framework.profile import Profile, WeightedScorer
from batchsched.framework.status import OK, SKIP, Status, error, unresolvable, unschedulable
from batchsched.model.pod import PodView
from batchsched.snapshot import NodeInfo, Snapshot

# kube-scheduler's message for a node an extender left out without saying why.
FILTERED_OUT: Final = "node(s) were filtered out by an extender"


@dataclass(frozen=True, slots=True)
class ExtenderVerdict:
    """What the interested extenders said about one pod, all of them together.

    `allowed` None: no extender filtered (every node passes). `scores` are already scaled as
    kube-scheduler scales them (score * weight * MaxNodeScore / MaxExtenderPriority) and
    summed over the extenders; `weight` is the sum of the prioritizing extenders' weights.
    `error` non-empty: a non-ignorable extender failed, and the pod cannot be placed now.
    """

    allowed: frozenset[str] | None = None
    failed: Mapping[str, str] = field(default_factory=dict)
    unresolvable: Mapping[str, str] = field(default_factory=dict)
    scores: Mapping[str, int] = field(default_factory=dict)
    weight: int = 0
    error: str = ""


class VerdictSource(Protocol):
    def verdict(self, pod: PodView) -> ExtenderVerdict | None:
        """None: no extender is interested in the pod (or none is configured)."""
        ...


_VERDICT: Final = StateKey[ExtenderVerdict]("Extenders")


class Extenders:
    name: ClassVar[str] = "Extenders"

    def __init__(self, source: VerdictSource | None = None, weight: int = 1) -> None:
        self.source = source
        self.weight = max(weight, 1)

    def pre_filter(
        self, state: CycleState, pod: PodView, snapshot: Snapshot
    ) -> tuple[PreFilterResult | None, Status]:
        verdict = self.source.verdict(pod) if self.source is not None else None
        if verdict is None:
            state.skip_score.add(self.name)
            return None, SKIP
        state.write(_VERDICT, verdict)
        if not verdict.scores:
            state.skip_score.add(self.name)
        return None, OK

    def filter(self, state: CycleState, pod: PodView, node: NodeInfo) -> Status:
        verdict = state.read(_VERDICT)
        # An error fails the cycle here, at Filter, as kube's does (a PreFilter error would
        # read as "unschedulable"), and only when a node passed the other plugins.
        if verdict.error:
            return error(verdict.error)
        name = node.name
        if name in verdict.unresolvable:
            return unresolvable(verdict.unresolvable[name] or FILTERED_OUT)
        if name in verdict.failed:
            return unschedulable(verdict.failed[name] or FILTERED_OUT)
        if verdict.allowed is not None and name not in verdict.allowed:
            return unschedulable(FILTERED_OUT)
        return OK

    def score(self, state: CycleState, pod: PodView, node: NodeInfo) -> int:
        """The extenders' scaled sum divided by the profile weight this plugin got (their
        weights' sum), so weight * score is kube's sum, to within rounding, while the score
        stays in 0..100 as the framework requires of every plugin."""
        total = state.read(_VERDICT).scores.get(node.name, 0)
        return min(MAX_NODE_SCORE, max(0, round(total / self.weight)))


class BinderExtender(Protocol):
    """The extender with a bindVerb (at most one), as the runtime wires it."""

    ignorable: bool

    def interested(self, pod: PodView) -> bool: ...

    async def bind(self, pod: PodView, node_name: str) -> None:
        """POST ExtenderBindingArgs; raises on an error, a timeout or an answer's Error."""
        ...


class ExtenderBinder:
    """Binds through the binder extender, first at Bind: a pod it is interested in is bound
    by it instead of DefaultBinder, as kube-scheduler does. An ignorable binder that fails
    hands the pod on to DefaultBinder."""

    name: ClassVar[str] = "ExtenderBinder"

    def __init__(self, extender: BinderExtender) -> None:
        self.extender = extender

    async def bind(self, state: CycleState, pod: PodView, node_name: str) -> Status:
        if not self.extender.interested(pod):
            return SKIP
        try:
            await self.extender.bind(pod, node_name)
        except Exception as err:  # the extender's failure, whatever it was, is the pod's
            if self.extender.ignorable:
                return SKIP
            return error(f"binding {pod.key} to {node_name} through the extender: {err}")
        return OK


def with_extenders(
    profiles: Mapping[str, Profile],
    source: VerdictSource | None,
    weight: int,
    binder: BinderExtender | None = None,
) -> dict[str, Profile]:
    """Every profile with Extenders last at PreFilter and Filter (extenders filter the nodes
    the plugins passed) and at Score with `weight`, the sum of the prioritizing extenders';
    and with the binder extender first at Bind, when there is one."""
    built: dict[str, Profile] = {}
    for name, profile in profiles.items():
        if source is not None:
            plugin = Extenders(source, weight)
            score = profile.score
            if weight > 0:
                score = (*score, WeightedScorer(plugin, weight, None))
            profile = replace(
                profile,
                pre_filter=(*profile.pre_filter, plugin),
                filter=(*profile.filter, plugin),
                score=score,
            )
        if binder is not None:
            profile = replace(profile, bind=(ExtenderBinder(binder), *profile.bind))
        built[name] = profile
    return built


def binder_of(profiles: Mapping[str, Profile]) -> BinderExtender | None:
    for profile in profiles.values():
        for plugin in profile.bind:
            if isinstance(plugin, ExtenderBinder):
                return plugin.extender
    return None


def verdict_source(profiles: Mapping[str, Profile]) -> VerdictSource | None:
    """The source the profiles' Extenders plugin reads, if any profile has one."""
    for profile in profiles.values():
        for plugin in profile.filter:
            if isinstance(plugin, Extenders) and plugin.source is not None:
                return plugin.source
    return None
