"""One small Protocol per extension point, as in kube-scheduler's framework.

Plugins see the pod, the cycle state and either one node (`NodeInfo`) or, at the points that
must look across nodes, the snapshot they are handed; never a client or a clock.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Protocol, runtime_checkable

from batchsched.framework.cycle_state import CycleState
from batchsched.framework.status import Status
from batchsched.model.pod import PodView
from batchsched.snapshot import NodeInfo, Snapshot

MAX_NODE_SCORE = 100
MIN_NODE_SCORE = 0


@dataclass(frozen=True, slots=True)
class QueuedPod:
    pod: PodView
    enqueued_at: float  # when it (last) entered the queue, for FIFO within a priority
    attempts: int = 0


@dataclass(frozen=True, slots=True)
class PreFilterResult:
    """Restricts the nodes worth filtering (e.g. NodeName); None from a plugin means all.

    A `hint` restricts them for this cycle only: the nodes it leaves out would fail a Filter
    now, but may pass once the cluster changes (the simulator's SimCandidates, by free room).
    Results kept across cycles (framework/batch.py) ignore hints."""

    node_names: frozenset[str]
    hint: bool = False


@runtime_checkable
class QueueSortPlugin(Protocol):
    name: ClassVar[str]

    def less(self, a: QueuedPod, b: QueuedPod) -> bool: ...


OrderKey = tuple[int | float | str, ...]


@runtime_checkable
class KeyedQueueSort(Protocol):
    """A QueueSort whose order is a key's: `less(a, b)` exactly when `order_key(a) <
    order_key(b)`. The queue then computes each entry's key once, when it is pushed, instead
    of calling `less` (twice) on every heap comparison."""

    def order_key(self, qp: QueuedPod) -> OrderKey: ...


@runtime_checkable
class PreEnqueuePlugin(Protocol):
    name: ClassVar[str]

    def pre_enqueue(self, pod: PodView) -> Status: ...


@runtime_checkable
class PreFilterPlugin(Protocol):
    name: ClassVar[str]

    def pre_filter(
        self, state: CycleState, pod: PodView, snapshot: Snapshot
    ) -> tuple[PreFilterResult | None, Status]: ...


@runtime_checkable
class FilterPlugin(Protocol):
    name: ClassVar[str]

    def filter(self, state: CycleState, pod: PodView, node: NodeInfo) -> Status: ...


@runtime_checkable
class PostFilterPlugin(Protocol):
    """Runs when no node fits (preemption); returns a nominated node name or None."""

    name: ClassVar[str]

    def post_filter(
        self, state: CycleState, pod: PodView, snapshot: Snapshot, failed: dict[str, Status]
    ) -> tuple[str | None, Status]: ...


@runtime_checkable
class PreScorePlugin(Protocol):
    name: ClassVar[str]

    def pre_score(
        self, state: CycleState, pod: PodView, snapshot: Snapshot, nodes: Sequence[NodeInfo]
    ) -> Status: ...


@runtime_checkable
class ScorePlugin(Protocol):
    """Scores one feasible node; higher is better. Errors belong in PreScore."""

    name: ClassVar[str]

    def score(self, state: CycleState, pod: PodView, node: NodeInfo) -> int: ...


@runtime_checkable
class VersionedScoring(Protocol):
    """A Score plugin whose scores may change with no node changing: one that learns (the GPU
    topology plugin's fragmentation target follows the arriving pods). `scoring_version`
    moves whenever they may have. What it learns may change its own PreScore and scores only,
    never a Filter verdict nor another plugin's score: results kept across cycles
    (framework/lone_batches.py) are re-scored with it alone then."""

    scoring_version: int


@runtime_checkable
class NormalizeScorePlugin(Protocol):
    """Optional companion of ScorePlugin: rescales the scores of all nodes to 0..100 in place."""

    name: ClassVar[str]

    def normalize_scores(
        self, state: CycleState, pod: PodView, nodes: Sequence[NodeInfo], scores: list[int]
    ) -> None: ...


@runtime_checkable
class ReservePlugin(Protocol):
    name: ClassVar[str]

    def reserve(
        self, state: CycleState, pod: PodView, node_name: str, snapshot: Snapshot
    ) -> Status: ...

    def unreserve(
        self, state: CycleState, pod: PodView, node_name: str, snapshot: Snapshot
    ) -> None: ...


@runtime_checkable
class PermitPlugin(Protocol):
    """SUCCESS lets the pod bind, WAIT holds it up to the returned seconds, a rejection stops it."""

    name: ClassVar[str]

    def permit(self, state: CycleState, pod: PodView, node_name: str) -> tuple[Status, float]: ...


@runtime_checkable
class PreBindPlugin(Protocol):
    name: ClassVar[str]

    async def pre_bind(self, state: CycleState, pod: PodView, node_name: str) -> Status: ...


@runtime_checkable
class BindPlugin(Protocol):
    """SKIP hands the pod to the next bind plugin."""

    name: ClassVar[str]

    async def bind(self, state: CycleState, pod: PodView, node_name: str) -> Status: ...


@runtime_checkable
class PostBindPlugin(Protocol):
    name: ClassVar[str]

    def post_bind(self, state: CycleState, pod: PodView, node_name: str) -> None: ...


EXTENSION_POINTS: dict[str, type] = {
    "queueSort": QueueSortPlugin,
    "preEnqueue": PreEnqueuePlugin,
    "preFilter": PreFilterPlugin,
    "filter": FilterPlugin,
    "postFilter": PostFilterPlugin,
    "preScore": PreScorePlugin,
    "score": ScorePlugin,
    "reserve": ReservePlugin,
    "permit": PermitPlugin,
    "preBind": PreBindPlugin,
    "bind": BindPlugin,
    "postBind": PostBindPlugin,
}


def extension_points_of(plugin: object) -> tuple[str, ...]:
    """The points a plugin object implements, in the order of EXTENSION_POINTS."""
    return tuple(point for point, proto in EXTENSION_POINTS.items() if isinstance(plugin, proto))
