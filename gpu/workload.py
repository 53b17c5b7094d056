"""The workload the fragmentation measure expects: pod shapes and how popular each is.

FGD (Weng et al., ATC '23) measures a node's fragmentation against the "typical" pods the
cluster runs: the most popular request shapes that together make up 95 % of the pods, each
weighted by its share, CPU-only pods included (the paper's artifact settings:
popularity threshold 95 %, step 1, CPU pods involved). `typical_workload` builds that from
any list of shapes (the simulator passes the trace it replays); `DEFAULT_WORKLOAD` is the one
built from the Alibaba GPU 2023 "openb" default trace, whose whole mix (`OPENB_DEFAULT_MIX`) is
kept here as data.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from gpu.topology import MILLI_PER_GPU

__all__ = [
    "DEFAULT_WORKLOAD",
    "MIB",
    "OPENB_DEFAULT_MIX",
    "PodShape",
    "Workload",
    "typical_workload",
]

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


# The openb default trace (8152 pods), every shape in it, most popular first:
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
    (88000, 327680, 8, 0, 18),
    (11300, 37888, 1, 0, 16),
    (1000, 6144, 1, 0, 15),
    (4000, 15258, 0, 230, 12),
    (8000, 30517, 0, 650, 12),
    (4000, 22888, 0, 220, 11),
    (7000, 30000, 1, 0, 11),
    (8000, 15625, 0, 0, 11),
    (11400, 57344, 0, 0, 11),
    (4000, 22888, 0, 110, 9),
    (6000, 8192, 0, 460, 9),
    (15400, 90112, 1, 0, 9),
    (32200, 132096, 4, 0, 9),
    (4000, 15258, 0, 110, 8),
    (4000, 16384, 1, 0, 8),
    (4000, 30517, 0, 220, 8),
    (12000, 32768, 1, 0, 8),
    (12000, 47104, 1, 0, 8),
    (14900, 73728, 1, 0, 8),
    (16000, 31250, 0, 0, 8),
    (4000, 22888, 0, 330, 7),
    (6000, 16384, 0, 460, 7),
    (16200, 66560, 2, 0, 7),
    (4000, 22888, 0, 350, 6),
    (6000, 23552, 0, 460, 6),
    (6000, 32768, 1, 0, 6),
    (9400, 52224, 1, 0, 6),
    (12000, 18432, 0, 460, 6),
    (2000, 16384, 1, 0, 5),
    (4000, 32768, 1, 0, 5),
    (8000, 31250, 0, 0, 5),
    (4152, 10600, 0, 270, 4),
    (6000, 22888, 0, 50, 4),
    (6000, 22888, 0, 110, 4),
    (11900, 43008, 1, 0, 4),
    (12000, 24576, 0, 0, 4),
    (12000, 49152, 1, 0, 4),
    (2000, 8192, 1, 0, 3),
    (4000, 15258, 0, 50, 3),
    (6000, 65536, 2, 0, 3),
    (16000, 31250, 1, 0, 3),
    (16000, 49152, 1, 0, 3),
    (30200, 160768, 2, 0, 3),
    (32000, 62500, 0, 0, 3),
    (32000, 131072, 4, 0, 3),
    (60200, 320512, 4, 0, 3),
    (64000, 262144, 8, 0, 3),
    (120000, 737280, 8, 0, 3),
    (1000, 2048, 0, 650, 2),
    (2000, 8192, 0, 370, 2),
    (4000, 15258, 0, 470, 2),
    (4000, 15258, 0, 650, 2),
    (6000, 30517, 0, 320, 2),
    (8000, 8192, 0, 0, 2),
    (8000, 16000, 0, 460, 2),
    (8000, 16384, 0, 0, 2),
    (8000, 30517, 0, 110, 2),
    (8000, 30517, 0, 440, 2),
    (8000, 65536, 1, 0, 2),
    (12000, 16000, 1, 0, 2),
    (12000, 23552, 1, 0, 2),
    (12500, 65536, 0, 0, 2),
    (16000, 16384, 1, 0, 2),
    (16000, 32768, 0, 0, 2),
    (16400, 84992, 1, 0, 2),
    (17400, 43008, 2, 0, 2),
    (20000, 65536, 0, 0, 2),
    (32000, 32768, 0, 0, 2),
    (120200, 640000, 8, 0, 2),
    (1000, 2048, 0, 140, 1),
    (1000, 2048, 0, 290, 1),
    (4000, 4096, 1, 0, 1),
    (4000, 8192, 1, 0, 1),
    (4000, 22888, 0, 160, 1),
    (4000, 30517, 0, 110, 1),
    (5000, 10240, 1, 0, 1),
    (6000, 8192, 1, 0, 1),
    (6000, 16384, 1, 0, 1),
    (8000, 8192, 1, 0, 1),
    (8000, 15625, 1, 0, 1),
    (8000, 24576, 1, 0, 1),
    (8000, 30517, 0, 480, 1),
    (8000, 61035, 0, 0, 1),
    (8000, 62500, 0, 0, 1),
    (8710, 41560, 1, 0, 1),
    (10000, 48828, 0, 0, 1),
    (11300, 23552, 1, 0, 1),
    (11800, 78848, 1, 0, 1),
    (12000, 12288, 1, 0, 1),
    (14000, 0, 1, 0, 1),
    (14000, 60000, 2, 0, 1),
    (15900, 90112, 1, 0, 1),
    (16000, 15625, 0, 0, 1),
    (16000, 16384, 0, 0, 1),
    (16000, 24576, 1, 0, 1),
    (16000, 62500, 0, 0, 1),
    (16000, 65536, 0, 0, 1),
    (32000, 65536, 0, 0, 1),
)

_OPENB_COUNTS: Final = tuple(
    (PodShape(cpu, mem * MIB, gpus, milli), float(n)) for cpu, mem, gpus, milli, n in _OPENB_DEFAULT
)

OPENB_DEFAULT_MIX: Final = typical_workload(_OPENB_COUNTS, coverage=1.0)
"""Every pod shape of the openb default trace with its share, rare ones included (a learned
target that weighs shapes by how few nodes can host them starts from this, and cuts after)."""

DEFAULT_WORKLOAD: Final = typical_workload(_OPENB_COUNTS)
"""The openb default trace's typical pods: its most popular shapes, 95 % of its pods."""
