"""The placement policies Weng et al. compare FGD with (ATC '23, Section 6), as node scores.

Each policy is two pure functions over the node view a cycle hands it: `score(pod, node)`, an
integer 0..100 (higher is better; the cycle takes the best, ties broken by its seeded
generator), and `choose(pod, node, free)`, the GPUs inside the chosen node the pod gets. They
are written from the paper's description and from how its artifact (the Alibaba/HKUST
kubernetes-scheduler-simulator) scores a node, integer truncation included, since that is what
produced the numbers we compare with:

- fgd: the node (and, for a GPU share, the GPU) where the expected fragmentation of the target
  workload grows least; the score is 100 * sigmoid(decrease in GPUs), truncated, so
  increases within ~0.04 GPU of each other tie.
- bestfit: least weighted leftover, 0.5 * cpu left / 128 cores + 0.5 * GPU left / 8 GPUs
  after the pod, rescaled min..max over the nodes to 0..100.
- dotproduct: Tetris' alignment with the same normalization, the smallest dot product of
  (cpu, GPU) left and asked winning, as the artifact scores it.
- gpupacking: a partly used GPU first (the fuller the better), then unused GPUs of a node
  already in use (fewest first), then an idle node (the fewest GPUs first).
- gpuclustering: a node whose GPU pods all have the pod's kind (share, 1-GPU, 2-GPU, ...),
  then one holding that kind among others, then an idle node, then the rest; fuller first.
- random: every feasible node equally likely.

GPU choice inside the node: fgd takes the share GPU its score found; random takes a random GPU
with room; the others take the fullest GPU with room (best fit). Whole GPUs are the
lowest-numbered idle ones for every policy (the paper ignores GPU topology).

Like the artifact's node model, fragmentation here ignores memory (Filter still checks it).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from batchsched.snapshot import NodeInfo
from gpu.fragmentation import FragmentationModel
from gpu.topology import MILLI_PER_GPU
from gpu.workload import Workload

MAX_SCORE: Final = 100
# The artifact's normalization constants: the largest node of its traces.
MAX_SPEC_CPU: Final = 128_000  # milli-cpu
MAX_SPEC_GPU: Final = 8 * MILLI_PER_GPU  # milli-GPU
# Memory left, as the fragmentation measure sees it: never short (see the module docstring).
_AMPLE_MEMORY: Final = 1 << 62

NO_GPU_KIND: Final = ""
SHARE_KIND: Final = "share"


@dataclass(frozen=True, slots=True)
class PodDemand:
    """What a policy reads of a pod: milli-cpu, memory bytes, how many GPUs and how much of
    each (1000 for whole GPUs; a share pod asks 1 GPU at < 1000)."""

    cpu: int
    memory: int
    gpus: int = 0
    milli: int = 0

    @property
    def gpu_total(self) -> int:
        return self.gpus * self.milli

    @property
    def is_share(self) -> bool:
        return self.gpus == 1 and 0 < self.milli < MILLI_PER_GPU

    @property
    def kind(self) -> str:
        """The pod's class for GpuClustering."""
        if not self.gpus:
            return NO_GPU_KIND
        return SHARE_KIND if self.is_share else f"{self.gpus}-gpu"


ScoreFn = Callable[[PodDemand, NodeInfo], int]
# (pod, node, free milli per GPU without the pod's own grants) -> GPU indices, None: no room.
ChooseFn = Callable[[PodDemand, NodeInfo, Sequence[int]], tuple[int, ...] | None]


@dataclass(frozen=True, slots=True)
class Policy:
    name: str
    score: ScoreFn
    choose: ChooseFn
    min_max: bool = False  # scores rescaled so the worst node gets 0 and the best 100
    # The score depends on the pod and the node only, so it may be kept per node state.
    cacheable: bool = True
    # Ties go to the smallest node name, as in the artifact (sim/policy_plugin.py says why).
    by_name: bool = True


def cpu_left(node: NodeInfo) -> int:
    return node.alloc_milli_cpu - node.req_milli_cpu


def gpu_free(node: NodeInfo) -> list[int]:
    """Free milli per GPU, by GPU index (an overcommitted GPU offers 0)."""
    ledger = node.gpu
    return [] if ledger is None else [f if f > 0 else 0 for f in ledger.free]


def node_kinds(node: NodeInfo) -> set[str]:
    """The kinds of the GPU pods on the node (GpuClustering's affinities)."""
    ledger = node.gpu
    if ledger is None:
        return set()
    kinds: set[str] = set()
    for grants in ledger.grants.values():
        if grants:
            share = len(grants) == 1 and grants[0][1] < MILLI_PER_GPU
            kinds.add(SHARE_KIND if share else f"{len(grants)}-gpu")
    return kinds


def idle_gpus(pod: PodDemand, free: Sequence[int]) -> tuple[int, ...] | None:
    """The lowest-numbered idle GPUs for a whole-GPU pod."""
    chosen = tuple(i for i, f in enumerate(free) if f >= MILLI_PER_GPU)[: pod.gpus]
    return chosen if len(chosen) == pod.gpus else None


def best_fit_gpu(pod: PodDemand, node: NodeInfo, free: Sequence[int]) -> tuple[int, ...] | None:
    """Whole GPUs: the idle ones; a share: the GPU with the least room that fits it."""
    if not pod.gpus:
        return ()
    if not pod.is_share:
        return idle_gpus(pod, free)
    fits = [(f, i) for i, f in enumerate(free) if f >= pod.milli]
    return (min(fits)[1],) if fits else None


def best_fit_score(pod: PodDemand, node: NodeInfo) -> int:
    gpu_left = sum(gpu_free(node))
    leftover = 0.5 * (cpu_left(node) - pod.cpu) / MAX_SPEC_CPU
    leftover += 0.5 * (gpu_left - pod.gpu_total) / MAX_SPEC_GPU
    return int((1.0 - leftover) * MAX_SCORE)  # raw, may leave 0..100: min_max rescales


def dot_product_score(pod: PodDemand, node: NodeInfo) -> int:
    left = cpu_left(node)
    if left < pod.cpu:
        return 0
    dot = (left / MAX_SPEC_CPU) * (pod.cpu / MAX_SPEC_CPU)
    dot += (sum(gpu_free(node)) / MAX_SPEC_GPU) * (pod.gpu_total / MAX_SPEC_GPU)
    return int(MAX_SCORE * (1.0 - dot / 2))


def gpu_packing_score(pod: PodDemand, node: NodeInfo) -> int:
    if not pod.gpus:
        return 0
    free = gpu_free(node)
    idle = sum(1 for f in free if f >= MILLI_PER_GPU)
    if idle == len(free):  # an idle node: those with fewer GPUs first
        return max(MAX_SCORE // 3 - idle, idle)
    used: list[int] = []
    for index in sorted(range(len(free)), key=lambda i: free[i]):  # fullest first
        if len(used) == pod.gpus:
            break
        if free[index] >= pod.milli:
            used.append(index)
    if len(used) < pod.gpus:
        return 0
    idle_used = sum(1 for i in used if free[i] >= MILLI_PER_GPU)
    if idle_used:  # a node in use, on GPUs nobody uses yet
        return max(MAX_SCORE // 2 - idle_used, MAX_SCORE // 3)
    free_pct = sum(free[i] * 100 // MILLI_PER_GPU for i in used)
    return max(MAX_SCORE - free_pct // 10, MAX_SCORE // 2)


def gpu_clustering_score(pod: PodDemand, node: NodeInfo) -> int:
    kind = pod.kind
    if kind == NO_GPU_KIND:
        return 0
    kinds = node_kinds(node)
    quarter = MAX_SCORE // 4
    fullness = quarter * (MAX_SPEC_GPU - sum(gpu_free(node))) // MAX_SPEC_GPU
    if kind in kinds:
        return fullness + (3 * quarter if len(kinds) == 1 else 2 * quarter)
    return fullness + (quarter if not kinds else 0)


def random_score(pod: PodDemand, node: NodeInfo) -> int:
    return 0  # every feasible node ties: the cycle's seeded draw picks one uniformly


class RandomGpu:
    """A share goes to a uniformly random GPU with room; whole GPUs are the idle ones."""

    def __init__(self, seed: int) -> None:
        self._rng = random.Random(seed)

    def __call__(
        self, pod: PodDemand, node: NodeInfo, free: Sequence[int]
    ) -> tuple[int, ...] | None:
        if not pod.gpus:
            return ()
        if not pod.is_share:
            return idle_gpus(pod, free)
        fits = [i for i, f in enumerate(free) if f >= pod.milli]
        return (self._rng.choice(fits),) if fits else None


class Fgd:
    """Fragmentation gradient descent: the score and the share GPU both minimize the growth of
    the node's expected fragmentation for the target workload."""

    def __init__(self, target: Workload) -> None:
        self.fragmentation = FragmentationModel(target)

    def _f(self, node: NodeInfo, cpu: int, free: Sequence[int]) -> float:
        ledger = node.gpu
        model = ledger.model if ledger is not None else ""
        ordered = tuple(sorted(free, reverse=True))
        return self.fragmentation.value(model, cpu, _AMPLE_MEMORY, ordered)

    def best(self, pod: PodDemand, node: NodeInfo, free: Sequence[int]) -> tuple[int, int | None]:
        """(score, the share GPU it is for; None for other pods or no room)."""
        before = self._f(node, cpu_left(node), free)
        cpu_after = cpu_left(node) - pod.cpu
        if not pod.is_share:
            after = list(free)
            taken = 0
            for index in sorted(range(len(after)), key=lambda i: after[i]):
                if taken == pod.gpus:
                    break
                if after[index] >= pod.milli:
                    after[index] -= pod.milli
                    taken += 1
            return _sigmoid_score(before - self._f(node, cpu_after, after)), None
        best: tuple[int, int | None] = (0, None)
        seen: dict[int, int] = {}
        for index, room in enumerate(free):
            if room < pod.milli:
                continue
            value = seen.get(room)
            if value is None:
                after = list(free)
                after[index] -= pod.milli
                value = seen[room] = _sigmoid_score(before - self._f(node, cpu_after, after))
            if best[1] is None or value > best[0]:  # the first GPU of the best score
                best = (value, index)
        return best

    def score(self, pod: PodDemand, node: NodeInfo) -> int:
        if not pod.cpu and not pod.memory and not pod.gpus:
            return MAX_SCORE  # asks for nothing: fragments nothing
        return self.best(pod, node, gpu_free(node))[0]

    def choose(self, pod: PodDemand, node: NodeInfo, free: Sequence[int]) -> tuple[int, ...] | None:
        if not pod.gpus:
            return ()
        if not pod.is_share:
            return idle_gpus(pod, free)
        index = self.best(pod, node, free)[1]
        return None if index is None else (index,)


def _sigmoid_score(decrease_milli: float) -> int:
    return int(MAX_SCORE / (1.0 + math.exp(-decrease_milli / MILLI_PER_GPU)))


PAPER_POLICIES: Final = ("fgd", "bestfit", "dotproduct", "gpupacking", "gpuclustering", "random")


def make_policy(name: str, target: Workload, seed: int) -> Policy:
    """The policy called `name` (one of PAPER_POLICIES); `target`: the workload FGD expects,
    `seed`: Random's GPU draws. KeyError for another name."""
    if name == "fgd":
        fgd = Fgd(target)
        return Policy(name, fgd.score, fgd.choose)
    if name == "random":
        return Policy(name, random_score, RandomGpu(seed), by_name=False)
    scores: dict[str, ScoreFn] = {
        "bestfit": best_fit_score,
        "dotproduct": dot_product_score,
        "gpupacking": gpu_packing_score,
        "gpuclustering": gpu_clustering_score,
    }
    return Policy(name, scores[name], best_fit_gpu, min_max=name == "bestfit")


def min_max(scores: list[int]) -> None:
    """Rescale in place so the lowest score is 0 and the highest 100 (all 0 when equal)."""
    low, high = min(scores, default=0), max(scores, default=0)
    span = high - low
    scores[:] = [(s - low) * MAX_SCORE // span if span else 0 for s in scores]
