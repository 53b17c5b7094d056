"""A profile: the plugins enabled at each extension point, in order, with score weights."""

from __future__ import annotations

from dataclasses import dataclass

from batchsched.framework.interfaces import (
    BindPlugin,
    FilterPlugin,
    NormalizeScorePlugin,
    PermitPlugin,
    PostBindPlugin,
    PostFilterPlugin,
    PreBindPlugin,
    PreEnqueuePlugin,
    PreFilterPlugin,
    PreScorePlugin,
    QueueSortPlugin,
    ReservePlugin,
    ScorePlugin,
)


@dataclass(frozen=True, slots=True)
class WeightedScorer:
    plugin: ScorePlugin
    weight: int
    normalizer: NormalizeScorePlugin | None


@dataclass(frozen=True, slots=True)
class Profile:
    scheduler_name: str
    queue_sort: QueueSortPlugin
    pre_enqueue: tuple[PreEnqueuePlugin, ...] = ()
    pre_filter: tuple[PreFilterPlugin, ...] = ()
    filter: tuple[FilterPlugin, ...] = ()
    post_filter: tuple[PostFilterPlugin, ...] = ()
    pre_score: tuple[PreScorePlugin, ...] = ()
    score: tuple[WeightedScorer, ...] = ()
    reserve: tuple[ReservePlugin, ...] = ()
    permit: tuple[PermitPlugin, ...] = ()
    pre_bind: tuple[PreBindPlugin, ...] = ()
    bind: tuple[BindPlugin, ...] = ()
    post_bind: tuple[PostBindPlugin, ...] = ()
    # None or 0: kube-scheduler's adaptive default (50% minus 1% per 125 nodes, at least 5%).
    percentage_of_nodes_to_score: int | None = None

    def describe(self) -> dict[str, list[str]]:
        """Plugin names per extension point, for logs and `--explain` output."""
        points: dict[str, list[str]] = {"queueSort": [self.queue_sort.name]}
        for point, plugins in (
            ("preEnqueue", self.pre_enqueue),
            ("preFilter", self.pre_filter),
            ("filter", self.filter),
            ("postFilter", self.post_filter),
            ("preScore", self.pre_score),
            ("reserve", self.reserve),
            ("permit", self.permit),
            ("preBind", self.pre_bind),
            ("bind", self.bind),
            ("postBind", self.post_bind),
        ):
            points[point] = [p.name for p in plugins]
        points["score"] = [f"{s.plugin.name}:{s.weight}" for s in self.score]
        return points
