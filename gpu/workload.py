"""The workload the fragmentation measure expects: pod shapes and how popular each is.

FGD (Weng et al., ATC '23) measures a node's fragmentation against the "typical" pods the
cluster runs: the most popular request shapes that together make up 95 % of the pods, each
weighted by its share, CPU-only pods included (the paper's artifact settings:
popularity threshold 95 %, step 1, CPU pods involved). `typical_workload` builds that from
any list of shapes (the simulator passes the trace it replays); `DEFAULT_WORKLOAD` is the one
built from the Alibaba GPU 2023 "openb" default trace, kept here as data.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from gpu.topology import MILLI_PER_GPU

__all__ = ["DEFAULT_WORKLOAD", "MIB", "PodShape", "Workload", "typical_workload"]

MIB: Final = 1024 * 1024
DEFAULT_COVERAGE: Final = 0.95


@dataclass(frozen=True, slots=True)
class PodShape:
    """A pod's request as the measure sees it: cpu (milli), memory (bytes), whole GPUs or a
    share of one GPU (milli), and the GPU models it may run on (None: any)."""

    milli_cpu: int
    memory: int
    gpu_count: int = 0
    gpu_milli: int = 0
    models: frozenset[str] | None = None

    def __post_init__(self) -> None:
        if self.gpu_count and self.gpu_milli:
            raise ValueError("a shape asks for whole GPUs or a share of one, not both")
        if not 0 <= self.gpu_milli < MILLI_PER_GPU:
            raise ValueError(f"a GPU share is 1..999 milli-GPU, not {self.gpu_milli}")

    @property
    def wants_gpu(self) -> bool:
        return self.gpu_count > 0 or self.gpu_milli > 0

    @property
    def per_gpu_milli(self) -> int:
        return MILLI_PER_GPU if self.gpu_count else self.gpu_milli

    @property
    def gpus_needed(self) -> int:
        return self.gpu_count or (1 if self.gpu_milli else 0)

    def _order(self) -> tuple[int, int, int, int, tuple[str, ...]]:
        return (
            self.milli_cpu,
            self.memory,
            self.gpu_count,
            self.gpu_milli,
            tuple(sorted(self.models or ())),
        )


@dataclass(frozen=True, slots=True)
class Workload:
    """Shapes with their popularity (summing to 1), most popular first."""

    shapes: tuple[tuple[PodShape, float], ...]

    def __post_init__(self) -> None:
        total = sum(p for _, p in self.shapes)
        if self.shapes and abs(total - 1.0) > 1e-6:
            raise ValueError(f"popularities must sum to 1, not {total}")


def typical_workload(
    shapes: Iterable[PodShape | tuple[PodShape, float]], coverage: float = DEFAULT_COVERAGE
) -> Workload:
    """The most popular shapes that together cover `coverage` of the pods, renormalized.

    Items are shapes (one per pod) or (shape, weight) pairs; ties in popularity are broken by
    the shape's values so the result does not depend on input order.
    """
    counts: dict[PodShape, float] = {}
    for item in shapes:
        shape, weight = (item, 1.0) if isinstance(item, PodShape) else item
        counts[shape] = counts.get(shape, 0.0) + weight
    total = sum(counts.values())
    if total <= 0:
        return Workload(())
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]._order()))
    kept: list[tuple[PodShape, float]] = []
    covered = 0.0
    for shape, weight in ranked:
        kept.append((shape, weight))
        covered += weight
        if covered >= coverage * total:
            break
    return Workload(tuple((shape, weight / covered) for shape, weight in kept))


# openb default trace (8152 pods), top shapes covering 95 %:
# (milli cpu, memory MiB, whole GPUs, share milli-GPU, pods).
_OPENB_DEFAULT: Final = (
    (3152, 5600, 0, 810, 1047),
    (11300, 49152, 1, 0, 857),
    (11400, 48128, 1, 0, 534),
    (3152, 5600, 1, 0, 470),
    (11908, 47104, 0, 470, 388),
    (12500, 57344, 0, 0, 364),
    (8000, 30517, 0, 470, 360),
    (32000, 49152, 0, 0, 284),
    (18708, 64512, 1, 0, 255),
    (11908, 47104, 0, 650, 237),
    (9810, 41560, 1, 0, 195),
    (8000, 30517, 0, 0, 163),
    (12000, 24576, 1, 0, 158),
    (15700, 58368, 1, 0, 158),
    (11908, 47104, 1, 0, 153),
    (15400, 51200, 0, 0, 120),
    (4000, 22888, 0, 320, 111),
    (16000, 32768, 1, 0, 108),
    (4000, 24576, 1, 0, 104),
    (8000, 16384, 1, 0, 104),
    (12000, 16384, 1, 0, 99),
    (16500, 51200, 0, 0, 95),
    (14200, 58368, 1, 0, 93),
    (4000, 30517, 0, 230, 84),
    (24200, 93184, 1, 0, 84),
    (4000, 15258, 0, 320, 78),
    (3152, 5600, 0, 590, 75),
    (4152, 10600, 0, 550, 72),
    (8000, 30517, 0, 320, 72),
    (11400, 77824, 1, 0, 65),
    (8000, 32768, 1, 0, 55),
    (4000, 15258, 0, 160, 53),
    (6000, 6144, 0, 460, 51),
    (11900, 77824, 1, 0, 51),
    (4152, 10600, 0, 370, 45),
    (12000, 15360, 1, 0, 44),
    (4000, 30517, 0, 320, 43),
    (8200, 33792, 1, 0, 41),
    (4000, 31250, 1, 0, 40),
    (15200, 80896, 1, 0, 36),
    (16000, 65536, 1, 0, 33),
    (4152, 10600, 0, 810, 31),
    (6000, 12288, 0, 460, 29),
    (16400, 125952, 1, 0, 27),
    (4000, 22888, 0, 230, 26),
    (4000, 15258, 0, 220, 24),
    (1000, 2048, 0, 320, 22),
    (6000, 22888, 0, 160, 20),
    (8000, 30517, 0, 220, 19),
    (4000, 22888, 0, 480, 18),
    (6000, 18432, 0, 460, 18),
    (8000, 30517, 0, 230, 18),
    (64200, 263168, 8, 0, 18),
)

DEFAULT_WORKLOAD: Final = typical_workload(
    (
        (PodShape(cpu, mem * MIB, gpus, milli), float(n))
        for cpu, mem, gpus, milli, n in _OPENB_DEFAULT
    ),
    coverage=1.0,  # the table is the 95 % cut already
)
