"""GpuTopology's node scores and GPU choices, with the caches that keep them cheap.

A node's raw score for a pod (higher is better) is, from most to least significant:
1. the quality of the GPU set the pod would get (connectivity, then one NUMA node);
2. minus the growth of fragmentation, in micro-GPU: the FGD delta F_n(after) - F_n(before),
   plus `stranded_weight` times the growth of GPUs stranded for lack of cpu or memory (FGD
   looks one typical pod ahead; a node whose cpu is eaten by cpu-only pods strands its GPUs
   for good, which FGD alone does not see until it happens);
3. a tie-break: for GPU pods, how full the node's GPUs are afterwards (pack); for pods without
   GPUs, how little cpu the node has left beyond what its free GPUs will need (best fit, so
   large cpu spaces stay whole for GPU pods), and on GPU nodes minus the configured penalty.

Caching: every change to a node gives it a fresh `generation`, so a raw score computed for
(pod demand, node generation) stays valid until that node changes. One placement changes one
node, so a demand seen before costs one dict lookup per unchanged node. Misses use the
fragmentation model's memo, shared by all nodes in the same state.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Sequence
from typing import Final, Generic, TypeAlias, TypeVar

from batchsched.snapshot import NodeInfo, Snapshot
from gpu.fragmentation import FragmentationModel, FragReport
from gpu.ledger import GpuLedger, Grants
from gpu.placement import GpuChoice, best_gpu_set
from gpu.topology import MILLI_PER_GPU, LinkLevel, NodeTopology

# (whole GPUs, share milli, milli cpu, memory bytes): what a score depends on.
Demand: TypeAlias = tuple[int, int, int, int]

_QUALITY_UNIT: Final = 10**13
_MICRO_UNIT: Final = 1000  # room below the fragmentation term for the packing tie-break
_PACKING_MAX: Final = 999
_SURPLUS_MAX: Final = 999  # FragmentationModel.surplus's top
_MAX_DEMANDS: Final = 512
_MAX_TABLE: Final = 50_000
_MAX_STATES: Final = 200_000
# One GPU (or a share of one) is as connected as a set gets: SELF on one NUMA node.
_SINGLE_GPU: Final = GpuChoice((0,), LinkLevel.SELF, 1, 0, 0).quality
K = TypeVar("K", bound=Hashable)


class GenerationTables(Generic[K]):
    """Raw scores already known, per demand and then per node generation (a node's state):
    the least recently asked demand is forgotten first, and a table that grew too big is
    emptied (its old generations are dead weight)."""

    __slots__ = ("_tables",)

    def __init__(self) -> None:
        self._tables: OrderedDict[K, dict[int, int]] = OrderedDict()

    def table(self, demand: K) -> dict[int, int]:
        tables = self._tables
        found = tables.get(demand)
        if found is None:
            if len(tables) >= _MAX_DEMANDS:
                tables.popitem(last=False)
            found = tables[demand] = {}
        else:
            tables.move_to_end(demand)
            if len(found) > _MAX_TABLE:
                found.clear()
        return found


class GpuScorer:
    def __init__(
        self,
        fragmentation: FragmentationModel,
        cpu_pod_penalty_milli: int,
        stranded_weight: float = 1.0,
    ) -> None:
        self.fragmentation = fragmentation
        self._penalty = cpu_pod_penalty_milli * 1000 * _MICRO_UNIT
        self._stranded_weight = stranded_weight
        self._tables = GenerationTables[Demand]()
        # node name -> (generation, sorted free milli, F before)
        self._nodes: dict[str, tuple[int, tuple[int, ...], float]] = {}
        # (demand, topology id, free milli per GPU, cpu left, memory left) -> (topology, raw):
        # nodes in the same state (a fresh demand meets hundreds of empty nodes of one kind)
        # share one evaluation. The topology is kept to rule out a reused id.
        self._states: dict[tuple[object, ...], tuple[NodeTopology, int]] = {}

    def table(self, demand: Demand) -> dict[int, int]:
        """The raw scores already known for `demand`, by node generation."""
        return self._tables.table(demand)

    def raw(self, demand: Demand, info: NodeInfo) -> int:
        """The raw score; a function of the demand and the node's GPU topology, free milli per
        GPU, cpu left and memory left, and of nothing else."""
        ledger = info.gpu
        if ledger is None:
            return 0
        cpu_left = info.alloc_milli_cpu - info.req_milli_cpu
        memory_left = info.alloc_memory - info.req_memory
        topology = ledger.topology
        key = (demand, id(topology), tuple(ledger.free), cpu_left, memory_left)
        known = self._states.get(key)
        if known is not None and known[0] is topology:
            return known[1]
        if len(self._states) >= _MAX_STATES:
            self._states.clear()
        value = self._raw(demand, info, ledger, cpu_left, memory_left)
        self._states[key] = (topology, value)
        return value

    def _raw(
        self, demand: Demand, info: NodeInfo, ledger: GpuLedger, cpu_left: int, memory_left: int
    ) -> int:
        count, milli, cpu, memory = demand
        _, free, before = self._node(info, ledger)
        outcome = self._outcome(ledger, free, count, milli, cpu_left - cpu, memory_left - memory)
        if outcome is None:
            return 0  # Filter let it through without room: the filter is disabled
        quality, f_after, taking = outcome
        frag = self.fragmentation
        idle = sum(free)
        delta = f_after - before
        if self._stranded_weight:
            stranded_before = frag.stranded(cpu_left, memory_left, idle)
            stranded_after = frag.stranded(cpu_left - cpu, memory_left - memory, idle - taking)
            delta += self._stranded_weight * (stranded_after - stranded_before)
        score = quality * _QUALITY_UNIT - _micro(delta)
        if taking:
            return score + _packing(ledger, taking)
        # Best fit on cpu: the node with the least cpu to spare beyond what its free GPUs will
        # need. Spreading such pods (most to spare first) nibbles at every node's cpu until
        # GPU pods no longer fit (docs/benchmarks.md: the cpu-heavy trace variants).
        spare = frag.surplus(cpu_left - cpu, memory_left - memory, idle)
        return score + _SURPLUS_MAX - spare - self._penalty

    def _outcome(
        self,
        ledger: GpuLedger,
        free: tuple[int, ...],
        count: int,
        milli: int,
        cpu_after: int,
        memory_after: int,
    ) -> tuple[int, float, int] | None:
        """(set quality, F after, milli-GPU taken) for the pod on this node."""
        value = self.fragmentation.value
        if count:
            quality = _SINGLE_GPU
            if count > 1:
                choice = ledger.best_set(count)
                if choice is None:
                    return None
                quality = choice.quality
            after = free[count:] + (0,) * count
            return quality, value(ledger.model, cpu_after, memory_after, after), count * 1000
        if milli:
            best = self._best_share(ledger.model, cpu_after, memory_after, free, milli)
            return None if best is None else (_SINGLE_GPU, best[0], milli)
        return 0, value(ledger.model, cpu_after, memory_after, free), 0

    def choose(self, info: NodeInfo, count: int, milli: int, free: Sequence[int]) -> Grants | None:
        """The GPUs to give a pod already counted on `info`, given the free milli per GPU
        without its own grants."""
        ledger = info.gpu
        if ledger is None:
            return None
        if count:
            choice = best_gpu_set(ledger.topology, free, count)
            return None if choice is None else tuple((i, MILLI_PER_GPU) for i in choice.indices)
        if not milli:
            return ()
        cpu_after = info.alloc_milli_cpu - info.req_milli_cpu  # the pod is counted already
        memory_after = info.alloc_memory - info.req_memory
        ordered = tuple(sorted((f if f > 0 else 0 for f in free), reverse=True))
        best = self._best_share(ledger.model, cpu_after, memory_after, ordered, milli)
        if best is None:
            return None
        target = best[1]
        index = next(i for i, f in enumerate(free) if f == target)
        return ((index, milli),)

    def _best_share(
        self, model: str, cpu_after: int, memory_after: int, free: tuple[int, ...], milli: int
    ) -> tuple[float, int] | None:
        """(F after, free milli of the GPU to use) minimizing F, then the tightest fit."""
        value = self.fragmentation.value
        best: tuple[float, int] | None = None
        seen = -1
        for position, room in enumerate(free):
            if room < milli:
                break
            if room == seen:
                continue
            seen = room
            left = room - milli
            after = list(free)
            del after[position]
            after.append(left)
            after.sort(reverse=True)
            f_after = value(model, cpu_after, memory_after, tuple(after))
            # Larger rooms come first, so on equal F the later (tighter) one wins.
            if best is None or f_after <= best[0]:
                best = (f_after, room)
        return best

    def _node(self, info: NodeInfo, ledger: GpuLedger) -> tuple[int, tuple[int, ...], float]:
        known = self._nodes.get(info.name)
        if known is not None and known[0] == info.generation:
            return known
        free = ledger.sorted_free()
        before = self.fragmentation.value(
            ledger.model,
            info.alloc_milli_cpu - info.req_milli_cpu,
            info.alloc_memory - info.req_memory,
            free,
        )
        known = self._nodes[info.name] = (info.generation, free, before)
        return known


def _micro(delta_milli: float) -> int:
    return round(delta_milli * 1000) * _MICRO_UNIT


def _packing(ledger: GpuLedger, taking: int) -> int:
    capacity = ledger.capacity_milli
    if capacity <= 0:
        return 0
    used = min(capacity, ledger.allocated_milli + taking)
    return used * _PACKING_MAX // capacity


def rank_normalize(scores: list[int], top: int) -> None:
    """Best distinct raw score -> top, the next -> top - 1, ...: keeps the order exactly
    (fragmentation deltas of one milli-GPU still separate nodes) within 0..top."""
    ranks = sorted(set(scores), reverse=True)[: top + 1]
    points = {value: top - i for i, value in enumerate(ranks)}
    scores[:] = [points.get(value, 0) for value in scores]


def fragmentation_report(snapshot: Snapshot, model: FragmentationModel) -> FragReport:
    """The cluster's FGD fragmentation, idle and total milli-GPU (for the simulator's plots)."""
    return model.report(
        (
            info.gpu.model,
            info.alloc_milli_cpu - info.req_milli_cpu,
            info.alloc_memory - info.req_memory,
            info.gpu.sorted_free(),
            len(info.gpu.capacity),
        )
        for info in snapshot.nodes
        if info.gpu is not None
    )
