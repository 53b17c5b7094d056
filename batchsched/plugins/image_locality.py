"""ImageLocality: prefer nodes that already hold the pod's images, weighted by how widely each
image is spread (an image on every node says little; a big image on few nodes says a lot)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Final

from batchsched.framework.cycle_state import CycleState, StateKey
from batchsched.framework.interfaces import MAX_NODE_SCORE
from batchsched.framework.registry import NoArgs
from batchsched.framework.status import OK, SKIP, Status
from batchsched.model.pod import PodView
from batchsched.snapshot import NodeInfo, Snapshot

MB: Final = 1024 * 1024
MIN_THRESHOLD: Final = 23 * MB
MAX_CONTAINER_THRESHOLD: Final = 1000 * MB


@dataclass(frozen=True, slots=True)
class _Image:
    name: str  # normalized, as pods' and nodes' image names both are
    spread: float  # share of all nodes that hold it


@dataclass(frozen=True, slots=True)
class _PodImages:
    images: tuple[_Image, ...]
    max_threshold: int


_IMAGES: Final[StateKey[_PodImages]] = StateKey("ImageLocality/images")


def priority(total_size: int, max_threshold: int) -> int:
    """Map the summed scaled sizes linearly onto 0..100 between the two thresholds."""
    clamped = min(max(total_size, MIN_THRESHOLD), max_threshold)
    return MAX_NODE_SCORE * (clamped - MIN_THRESHOLD) // (max_threshold - MIN_THRESHOLD)


class ImageLocality:
    name: ClassVar[str] = "ImageLocality"

    def __init__(self, args: NoArgs | None = None) -> None:
        pass

    def pre_score(
        self, state: CycleState, pod: PodView, snapshot: Snapshot, nodes: Sequence[NodeInfo]
    ) -> Status:
        total = len(snapshot)
        counts = snapshot.image_node_counts
        found = []
        for image in pod.images:
            holders = counts.get(image, 0)
            if holders:
                found.append(_Image(image, holders / total))
        if not found:
            return SKIP  # no node holds any of the images: every node scores 0
        state.write(_IMAGES, _PodImages(tuple(found), MAX_CONTAINER_THRESHOLD * len(pod.images)))
        return OK

    def score(self, state: CycleState, pod: PodView, node: NodeInfo) -> int:
        sizes = node.node.image_sizes
        if not sizes:
            return 0
        wanted = state.read(_IMAGES)
        total = 0
        for image in wanted.images:
            size = sizes.get(image.name)
            if size is not None:
                total += int(size * image.spread)
        return priority(total, wanted.max_threshold)
