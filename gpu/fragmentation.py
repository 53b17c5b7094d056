"""GPU fragmentation as FGD measures it (Weng et al., "Beware of Fragmentation", ATC '23).

For a node n and a pod shape m, the fragment F_n(m) is the free GPU capacity of n that m
cannot use:
- all of n's free milli-GPU, when m cannot run on n at all: it asks for no GPU, n's GPU model
  is not one m accepts, or n lacks the cpu, memory or number of GPUs with enough free room;
- otherwise the free milli-GPU on the GPUs too full for m (free < m's per-GPU need, i.e. any
  partly used GPU for a whole-GPU pod).
The node's fragmentation is the expectation over the workload, F_n(M) = sum_m p_m F_n(m),
in milli-GPU; the cluster's is the sum over nodes. FGD places each pod where F grows least.

`stranded` adds what FGD's one-pod horizon misses: the free milli-GPU a node cannot feed once
its cpu (or memory) runs out at the workload's typical cpu per milli-GPU.

Only the node's GPU model, cpu and memory left, and the multiset of per-GPU free milli matter,
and cpu/memory only by which shape thresholds they reach; `FragmentationModel` memoizes on
exactly that, so nodes in the same state share one evaluation.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from gpu.topology import MILLI_PER_GPU
from gpu.workload import PodShape, Workload

__all__ = [
    "FragReport",
    "FragmentationModel",
    "node_fragmentation",
    "per_milli_gpu",
    "shape_fragment",
]

_MEMO_LIMIT: Final = 500_000

# (cpu rank, memory rank, GPUs needed, threshold index, popularity) of a GPU shape.
_Term = tuple[int, int, int, int, float]


def shape_fragment(
    shape: PodShape, model: str, milli_cpu_left: int, memory_left: int, free: Sequence[int]
) -> int:
    """F_n(m): the milli-GPU of the node that `shape` cannot use (the definition, unmemoized)."""
    idle = sum(f for f in free if f > 0)
    if not shape.wants_gpu or (shape.models is not None and model not in shape.models):
        return idle
    need = shape.per_gpu_milli
    roomy = sum(1 for f in free if f >= need)
    if milli_cpu_left < shape.milli_cpu or memory_left < shape.memory or roomy < shape.gpus_needed:
        return idle
    return sum(f for f in free if 0 < f < need)


def node_fragmentation(
    workload: Workload, model: str, milli_cpu_left: int, memory_left: int, free: Sequence[int]
) -> float:
    """F_n(M) in milli-GPU, straight from the definition."""
    return sum(
        p * shape_fragment(shape, model, milli_cpu_left, memory_left, free)
        for shape, p in workload.shapes
    )


@dataclass(frozen=True, slots=True)
class FragReport:
    """Cluster totals in milli-GPU: fragmented (F), idle (free) and all GPUs."""

    frag_milli: float
    idle_milli: int
    total_milli: int

    @property
    def fragmented_gpus(self) -> float:
        return self.frag_milli / MILLI_PER_GPU

    @property
    def pct_of_total(self) -> float:
        return 100.0 * self.frag_milli / self.total_milli if self.total_milli else 0.0

    @property
    def pct_of_idle(self) -> float:
        """The paper's fragmentation rate: fragmented share of the unallocated GPUs."""
        return 100.0 * self.frag_milli / self.idle_milli if self.idle_milli else 0.0


def per_milli_gpu(workload: Workload) -> tuple[float, float]:
    """(cpu, memory) per milli-GPU that `workload`'s GPU pods ask for, popularity-weighted;
    (0, 0) for a workload without GPU pods."""
    gpu_shapes = [(s, p) for s, p in workload.shapes if s.wants_gpu]
    gpu_milli = sum(p * s.gpus_needed * s.per_gpu_milli for s, p in gpu_shapes)
    if not gpu_milli:
        return 0.0, 0.0
    cpu = sum(p * s.milli_cpu for s, p in gpu_shapes) / gpu_milli
    return cpu, sum(p * s.memory for s, p in gpu_shapes) / gpu_milli


class FragmentationModel:
    """F_n(M) for one workload, memoized on (model, cpu rank, memory rank, sorted free).

    `stranded_at`, if given, is the workload whose cpu and memory per milli-GPU the stranded
    and surplus measures use instead of `workload`'s: a target whose shares are weighted by
    how few nodes can host each shape says which shapes a node meets, not what pods need per
    GPU (GpuTopology passes the arriving pods' own mix)."""

    def __init__(self, workload: Workload, stranded_at: Workload | None = None) -> None:
        self.workload = workload
        gpu_shapes = [(s, p) for s, p in workload.shapes if s.wants_gpu]
        self._no_gpu = sum(p for s, p in workload.shapes if not s.wants_gpu)
        self._cpu = sorted({s.milli_cpu for s, _ in gpu_shapes})
        self._memory = sorted({s.memory for s, _ in gpu_shapes})
        self._thresholds = sorted({s.per_gpu_milli for s, _ in gpu_shapes})
        self._gpu_shapes = gpu_shapes
        self._by_model: dict[str, tuple[float, tuple[_Term, ...]]] = {}
        self._memo: dict[tuple[str, int, int, tuple[int, ...]], float] = {}
        # sorted free -> per threshold (GPUs reaching it, free milli on those that don't): one
        # per GPU state, whatever the node's model, cpu and memory.
        self._reach: dict[tuple[int, ...], list[tuple[int, int]]] = {}
        self._cpu_per_milli, self._memory_per_milli = per_milli_gpu(
            workload if stranded_at is None else stranded_at
        )

    @property
    def cpu_per_milli(self) -> float:
        """Milli-cpu per milli-GPU of a typical GPU pod (the stranded measure's ratio)."""
        return self._cpu_per_milli

    @property
    def memory_per_milli(self) -> float:
        """Memory bytes per milli-GPU of a typical GPU pod."""
        return self._memory_per_milli

    def stranded(self, milli_cpu_left: int, memory_left: int, idle: int) -> float:
        """Free milli-GPU the node's cpu or memory cannot feed at the workload's typical ratio
        of cpu (memory) per milli-GPU: the node's GPUs left over once its cpu runs out."""
        fed = float(idle)
        if self._cpu_per_milli:
            fed = min(fed, max(0, milli_cpu_left) / self._cpu_per_milli)
        if self._memory_per_milli:
            fed = min(fed, max(0, memory_left) / self._memory_per_milli)
        return idle - fed

    def surplus(self, milli_cpu_left: int, memory_left: int, idle: int) -> int:
        """0..999: how much cpu the node has beyond what its free GPUs will need, in tenths of
        a GPU's typical share of cpu (where a pod without GPUs does least harm)."""
        if not self._cpu_per_milli:
            return 0
        extra = max(0, milli_cpu_left) / self._cpu_per_milli - idle
        return int(max(0.0, min(999.0, extra / 100)))

    def value(
        self, model: str, milli_cpu_left: int, memory_left: int, free: tuple[int, ...]
    ) -> float:
        """F_n(M); `free` is the per-GPU free milli sorted largest first, none negative."""
        key = (
            model,
            bisect_right(self._cpu, milli_cpu_left),
            bisect_right(self._memory, memory_left),
            free,
        )
        found = self._memo.get(key)
        if found is None:
            if len(self._memo) >= _MEMO_LIMIT:
                self._memo.clear()
            found = self._memo[key] = self._evaluate(model, key[1], key[2], free)
        return found

    def report(self, nodes: Iterable[tuple[str, int, int, tuple[int, ...], int]]) -> FragReport:
        """Totals over (model, cpu left, memory left, sorted free, GPU count) per node."""
        frag = 0.0
        idle = total = 0
        for model, cpu, memory, free, count in nodes:
            frag += self.value(model, cpu, memory, free)
            idle += sum(free)
            total += count * MILLI_PER_GPU
        return FragReport(frag, idle, total)

    def _terms(self, model: str) -> tuple[float, tuple[_Term, ...]]:
        found = self._by_model.get(model)
        if found is None:
            always = self._no_gpu
            terms: list[_Term] = []
            for shape, p in self._gpu_shapes:
                if shape.models is not None and model not in shape.models:
                    always += p  # a shape that can't use this model sees every free GPU idle
                    continue
                terms.append(
                    (
                        bisect_left(self._cpu, shape.milli_cpu) + 1,
                        bisect_left(self._memory, shape.memory) + 1,
                        shape.gpus_needed,
                        self._thresholds.index(shape.per_gpu_milli),
                        p,
                    )
                )
            found = self._by_model[model] = (always, tuple(terms))
        return found

    def _reaching(self, free: tuple[int, ...], idle: int) -> list[tuple[int, int]]:
        """Per threshold: how many GPUs reach it, and the free milli on those that don't."""
        reach: list[tuple[int, int]] = []
        for threshold in self._thresholds:
            count = above = 0
            for f in free:
                if f < threshold:
                    break
                count += 1
                above += f
            reach.append((count, idle - above))
        return reach

    def _evaluate(
        self, model: str, cpu_rank: int, memory_rank: int, free: tuple[int, ...]
    ) -> float:
        idle = sum(free)
        if idle <= 0:
            return 0.0
        always, terms = self._terms(model)
        reach = self._reach.get(free)
        if reach is None:
            if len(self._reach) >= _MEMO_LIMIT:
                self._reach.clear()
            reach = self._reach[free] = self._reaching(free, idle)
        value = always * idle
        for cpu_needed, memory_needed, gpus, at, p in terms:
            count, stranded = reach[at]
            if cpu_rank >= cpu_needed and memory_rank >= memory_needed and count >= gpus:
                value += p * stranded
            else:
                value += p * idle
        return value
