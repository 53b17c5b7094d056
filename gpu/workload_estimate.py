"""The workload the cluster is actually running, estimated online from the pods that arrive.

FGD's fragmentation is measured against a target workload (gpu/workload.py). A fixed target
(the openb mix) knows nothing of the pods a given cluster sees: above all not that some of
them may run only on some GPU models. A node of a scarce, in-demand model then looks no more
valuable than any other, and pods that could run anywhere fill it while the pods that can run
only there wait. Estimated from the arriving pods, the target carries their model sets, so the
fragmentation of such a node counts the restricted pods it could serve, and placing an
unrestricted pod there costs what it takes from them.

The estimate is a count per shape, each pod's weight halving every `half_life` pods after it
(a cluster's mix drifts; an iid trace loses little by it), seeded with a prior workload worth
`prior_pods` pods that fades the same way, so the first pods do not swing the target. The
target itself is re-estimated only every `refresh_pods` pods and adopted only when it moved
(total variation distance above `tolerance`), since every change of target invalidates the
scorer's caches.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from gpu.workload import DEFAULT_COVERAGE, PodShape, Workload, typical_workload

__all__ = [
    "EstimateSettings",
    "Host",
    "WorkloadEstimate",
    "host_ranks",
    "per_supply",
    "supply_factor",
    "variation_distance",
]

# Counts are kept multiplied by a growing scale (so old pods need no decaying one by one);
# past this the counts and the scale are divided back down.
_RESCALE_AT: Final = 1e100


@dataclass(frozen=True, slots=True)
class EstimateSettings:
    half_life: float = 20_000.0  # pods; an observation's weight halves after this many more
    prior_pods: float = 500.0  # how many pods the prior workload is worth at the start
    refresh_pods: int = 250  # re-estimate the target after this many new pods
    tolerance: float = 0.02  # adopt a new target only if it moved more than this (TV distance)
    coverage: float = DEFAULT_COVERAGE

    def __post_init__(self) -> None:
        if self.half_life <= 0 or self.prior_pods < 0 or self.refresh_pods < 1:
            raise ValueError("half_life > 0, prior_pods >= 0 and refresh_pods >= 1 are required")
        if not 0 <= self.tolerance < 1 or not 0 < self.coverage <= 1:
            raise ValueError("tolerance is in [0, 1) and coverage in (0, 1]")


def variation_distance(a: Workload, b: Workload) -> float:
    """Total variation distance between two workloads' shape distributions (0 same, 1 disjoint)."""
    weights = dict(a.shapes)
    for shape, p in b.shapes:
        weights[shape] = weights.get(shape, 0.0) - p
    return 0.5 * sum(abs(w) for w in weights.values())


@dataclass(frozen=True, slots=True)
class Host:
    """What an empty GPU node offers a pod: its GPU model, allocatable cpu (milli) and memory
    (bytes), and healthy GPUs. Nodes are counted by these, so a cluster has a few dozen."""

    model: str
    milli_cpu: int
    memory: int
    gpus: int

    def could_host(self, shape: PodShape, capacity: bool) -> bool:
        """Whether `shape` could run here on an empty node: its model (and, with `capacity`,
        the node's cpu, memory and GPU count) allow it."""
        if shape.models is not None and self.model not in shape.models:
            return False
        return not capacity or (
            shape.milli_cpu <= self.milli_cpu
            and shape.memory <= self.memory
            and shape.gpus_needed <= self.gpus
        )


def supply_factor(shape: PodShape, supply: Mapping[Host, int], capacity: bool = False) -> float:
    """1/q for a GPU shape that only nodes holding a share q of the cluster's GPUs could host:
    those of its GPU models and, with `capacity`, those whose allocatable cpu, memory and GPU
    count fit it when empty. 1 for shapes without GPUs, shapes no node could host and clusters
    without GPUs. `supply` counts the GPU nodes per Host."""
    if not shape.wants_gpu or (not capacity and shape.models is None):
        return 1.0
    total = hosting = 0
    for host, n in supply.items():
        total += host.gpus * n
        if host.could_host(shape, capacity):
            hosting += host.gpus * n
    return total / hosting if hosting > 0 else 1.0


def host_ranks(supply: Mapping[Host, int]) -> dict[Host, int]:
    """0..999 per Host: the share of the cluster's GPUs on nodes at least as big as it in cpu,
    memory and GPU count. High for a common host whose pods most nodes could take; low for a
    big one few nodes match (128 cores where most have 96), the only place for pods that ask
    for that much. `supply` counts the GPU nodes per Host."""
    total = sum(host.gpus * n for host, n in supply.items())
    ranks: dict[Host, int] = {}
    for host in supply:
        bigger = sum(
            other.gpus * n
            for other, n in supply.items()
            if other.milli_cpu >= host.milli_cpu
            and other.memory >= host.memory
            and other.gpus >= host.gpus
        )
        ranks[host] = 999 * bigger // total if total else 0
    return ranks


def per_supply(
    workload: Workload,
    supply: Mapping[Host, int],
    capacity: bool = False,
    factors: dict[PodShape, float] | None = None,
) -> Workload:
    """`workload` as the nodes that can host each shape meet it: a shape that only nodes holding
    a share q of the GPUs could host arrives at them 1/q times as often as its popularity says
    (all of its pods land there), so its weight is multiplied by `supply_factor`, then all are
    renormalized (a 120-core pod on a cluster where few nodes have 120 cores). `factors`, if
    given, remembers each shape's factor for this supply (the caller empties it when the supply
    changes)."""
    if not supply:
        return workload
    memo: dict[PodShape, float] = {} if factors is None else factors
    weighted: list[tuple[PodShape, float]] = []
    for shape, p in workload.shapes:
        factor = memo.get(shape)
        if factor is None:
            factor = memo[shape] = supply_factor(shape, supply, capacity)
        weighted.append((shape, p * factor))
    return typical_workload(weighted, coverage=1.0)


class WorkloadEstimate:
    """Decayed counts of the shapes seen, and the target workload adopted from them."""

    __slots__ = (
        "_counts",
        "_growth",
        "_mix",
        "_scale",
        "_since",
        "current",
        "refreshes",
        "settings",
        "version",
    )

    def __init__(self, prior: Workload, settings: EstimateSettings | None = None) -> None:
        self.settings = settings or EstimateSettings()
        self._growth = 2.0 ** (1.0 / self.settings.half_life)
        self._scale = 1.0
        self._counts: dict[PodShape, float] = {
            shape: p * self.settings.prior_pods for shape, p in prior.shapes
        }
        self._since = 0
        self.current = prior  # the target in use
        self.version = 0  # bumped whenever `current` changes
        self.refreshes = 0  # bumped every `refresh_pods` pods, when the counts are re-read
        self._mix: tuple[int, Workload, float] | None = None

    def observe(self, shape: PodShape) -> bool:
        """Count one arriving pod; True when the target in use changed."""
        counts = self._counts
        counts[shape] = counts.get(shape, 0.0) + self._scale
        self._scale *= self._growth
        if self._scale > _RESCALE_AT:
            factor = 1.0 / self._scale
            for key in counts:
                counts[key] *= factor
            self._scale = 1.0
        self._since += 1
        if self._since < self.settings.refresh_pods:
            return False
        self._since = 0
        self.refreshes += 1
        return self.refresh()

    def estimate(self) -> Workload:
        """The typical pods of the counts as they stand (not necessarily the target in use)."""
        return typical_workload(self._counts.items(), self.settings.coverage)

    def mix(self) -> Workload:
        """Every shape counted, rare ones included, with its share, as of the last refresh."""
        return self._mixed()[1]

    def counted(self) -> float:
        """How many pods the mix rests on, as of the last refresh: the prior's worth and the
        pods seen, each weighed as its share is (a pod's weight halves every half-life)."""
        return self._mixed()[2]

    def _mixed(self) -> tuple[int, Workload, float]:
        if self._mix is None or self._mix[0] != self.refreshes:
            mix = typical_workload(self._counts.items(), coverage=1.0)
            # an observation now adds `_scale`: counts / `_scale` are in today's pods
            self._mix = (self.refreshes, mix, sum(self._counts.values()) / self._scale)
        return self._mix

    def refresh(self) -> bool:
        """Re-estimate now; adopt the estimate if it moved beyond the tolerance."""
        fresh = self.estimate()
        if not fresh.shapes or variation_distance(fresh, self.current) <= self.settings.tolerance:
            return False
        self.current = fresh
        self.version += 1
        return True
