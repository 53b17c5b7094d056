"""A gang's network-topology request: all members in one domain of a level, or the tightest
domain that fits.

A level is a node label key (`nvidia.com/gpu.clique`, a rack label, `topology.kubernetes.io/
zone`); nodes with the same value of it form one domain. The levels a cluster has, tightest
first, are configuration (the TopologyDomains plugin's args); a gang's request names one of
them, in whichever encoding its producer speaks (upstream Workload `schedulingConstraints`,
Volcano `networkTopology`, Kueue's podset annotations, our PodGroup annotations).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

# NVIDIA GPU feature discovery's NVLink-domain label.
CLIQUE_LABEL: Final = "nvidia.com/gpu.clique"
RACK_LABEL: Final = "topology.batchsched.io/rack"
BLOCK_LABEL: Final = "topology.batchsched.io/block"
ZONE_LABEL: Final = "topology.kubernetes.io/zone"
# Tightest first: the order a preferred request tries them in.
DEFAULT_LEVELS: Final = (CLIQUE_LABEL, RACK_LABEL, BLOCK_LABEL, ZONE_LABEL)

# Our own PodGroup annotations (any encoding's group may carry them); the value is a level's
# node label key.
REQUIRED_ANNOTATION: Final = "batchsched.io/topology-required"
PREFERRED_ANNOTATION: Final = "batchsched.io/topology-preferred"


@dataclass(frozen=True, slots=True)
class TopologyRequest:
    """`level`: a node label key. `required`: every member in one domain of that level, or
    the gang does not start; otherwise the tightest level (from the tightest up to `level`)
    where the gang fits in one domain is preferred, and anywhere is accepted."""

    level: str
    required: bool
    # Volcano's networkTopology names a tier (1: the tightest configured level) instead of a
    # label; `level` is "" then, and `level_in` resolves it against the configured levels.
    tier: int = 0

    def level_in(self, levels: Sequence[str]) -> str | None:
        """The node label key this request means on a cluster with these levels (tightest
        first); None when a tier lies above every level (nothing to keep together)."""
        if not self.tier:
            return self.level
        return levels[self.tier - 1] if self.tier <= len(levels) else None

    def describe(self) -> str:
        level = self.level or f"tier {self.tier}"
        return f"{'required' if self.required else 'preferred'} {level}"


class TopologyAnnotationError(ValueError):
    """Both annotations, or an empty one: `field` names the annotation."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


def topology_from_annotations(annotations: Mapping[str, str]) -> TopologyRequest | None:
    """Our annotations on a gang's object (or, for a Kueue group, on its pods), or None.

    Both at once is an error rather than a guess at which one was meant."""
    required = annotations.get(REQUIRED_ANNOTATION)
    preferred = annotations.get(PREFERRED_ANNOTATION)
    if required is not None and preferred is not None:
        raise TopologyAnnotationError(
            f"metadata.annotations[{REQUIRED_ANNOTATION}]",
            f"{REQUIRED_ANNOTATION} and {PREFERRED_ANNOTATION} both set; keep one",
        )
    for annotation, value, required_ in (
        (REQUIRED_ANNOTATION, required, True),
        (PREFERRED_ANNOTATION, preferred, False),
    ):
        if value is None:
            continue
        level = value.strip()
        if not level:
            raise TopologyAnnotationError(
                f"metadata.annotations[{annotation}]", "must name a node label key, got ''"
            )
        return TopologyRequest(level, required_)
    return None
