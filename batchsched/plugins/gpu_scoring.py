"""GpuTopology's node scores and GPU choices, with the caches that keep them cheap.

A node's raw score for a pod (higher is better) is, from most to least significant:
1. the quality of the GPU set the pod would get (connectivity, then one NUMA node);
2. minus the growth of fragmentation, in micro-GPU: the FGD delta F_n(after) - F_n(before),
   plus `stranded_weight` times the growth of GPUs stranded for lack of cpu or memory (FGD
   looks one typical pod ahead; a node whose cpu is eaten by cpu-only pods strands its GPUs
   for good, which FGD alone does not see until it happens), plus the price of each place a
   scarce node offers that the placement takes (gpu/scarcity.py; none while places are
   plenty);
3. a tie-break: for GPU pods, how full the node's GPUs are afterwards (pack); for pods without
   GPUs, how little cpu the node has left beyond what its free GPUs will need (best fit, so
   large cpu spaces stay whole for GPU pods), and on GPU nodes minus the configured penalty;
4. the last tie-break: how common the node's size is (`host_ranks`: the share of the GPUs on
   nodes at least as big), so that where fragmentation cannot tell two empty nodes apart (the
   target does not yet hold the pods only the bigger can host) the smaller one is taken, not
   the one with the most room that NodeResourcesFit's LeastAllocated would pick.

Caching: a raw score is a function of the demand and of the node's state (GPU topology, free
milli per GPU, cpu left, memory left, allocatable cpu and memory). Every change to a node gives
it a fresh generation, so `NodeStates` numbers the distinct states, looked up by node
generation, and raw scores are kept per (demand, state number): nodes in one state (hundreds of
empty nodes of a kind) share one evaluation, and a demand seen before costs two int-keyed dict
lookups per unchanged node (GpuTopology.score makes them inline). The numbers outlive a change
of fragmentation target (GpuTopology keeps one `NodeStates` for every scorer it makes), so a
new target's scores cost two lookups per node and an evaluation per state.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Final, Generic, TypeAlias, TypeVar

from batchsched.node_info import gpu_host
from batchsched.snapshot import NodeInfo, Snapshot
from gpu.fragmentation import FragmentationModel, FragReport
from gpu.ledger import GpuLedger, Grants
from gpu.placement import GpuChoice, best_gpu_set
from gpu.scarcity import ScarcePrices
from gpu.topology import MILLI_PER_GPU, LinkLevel, NodeTopology
from gpu.workload_estimate import Host

# (whole GPUs, share milli, milli cpu, memory bytes): what a score depends on.
Demand: TypeAlias = tuple[int, int, int, int]

_QUALITY_UNIT: Final = 10**16
_HOST_UNIT: Final = 1000  # room below the packing or best-fit term for the host tie-break
_MICRO_UNIT: Final = 1000 * _HOST_UNIT  # room below the fragmentation term for the tie-breaks
_PACKING_MAX: Final = 999
_SURPLUS_MAX: Final = 999  # FragmentationModel.surplus's top
_MAX_DEMANDS: Final = 512
_MAX_TABLE: Final = 50_000
_MAX_STATES: Final = 200_000
_NO_GPUS: Final = -1  # the state number of every node without GPUs (its raw score is 0)
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


class NodeStates:
    """A number per distinct node state a raw score reads (GPU topology, free milli per GPU,
    cpu left, memory left, allocatable cpu and memory), looked up by node generation; never
    reused, so a number kept in a table stays that state's even after the memo below was
    emptied."""

    __slots__ = ("_next", "_numbers", "by_generation")

    def __init__(self) -> None:
        # node generation -> number: generations are never reused (node_info.py), so this is
        # read without a method call on the scoring path (GpuTopology.score); emptied when full.
        self.by_generation: dict[int, int] = {}
        # (topology id, free milli per GPU, cpu left, memory left, allocatable cpu, allocatable
        # memory) -> (topology, number); the topology is kept (so its id cannot be reused
        # while the entry lives) and compared.
        self._numbers: dict[
            tuple[int, tuple[int, ...], int, int, int, int], tuple[NodeTopology, int]
        ] = {}
        self._next = 0

    def of(self, info: NodeInfo) -> int:
        """The number of the state `info` is in."""
        known = self.by_generation.get(info.generation)
        if known is not None:
            return known
        ledger = info.gpu
        if ledger is None:
            number = _NO_GPUS
        else:
            topology = ledger.topology
            cpu_left = info.alloc_milli_cpu - info.req_milli_cpu
            key = (
                id(topology),
                tuple(ledger.free),
                cpu_left,
                info.alloc_memory - info.req_memory,
                info.alloc_milli_cpu,
                info.alloc_memory,
            )
            found = self._numbers.get(key)
            if found is not None and found[0] is topology:
                number = found[1]
            else:
                if len(self._numbers) >= _MAX_STATES:
                    self._numbers.clear()
                number = self._next
                self._next += 1
                self._numbers[key] = (topology, number)
        if len(self.by_generation) >= _MAX_TABLE:
            self.by_generation.clear()  # mostly generations of nodes changed since
        self.by_generation[info.generation] = number
        return number


class GpuScorer:
    def __init__(
        self,
        fragmentation: FragmentationModel,
        cpu_pod_penalty_milli: int,
        stranded_weight: float = 1.0,
        states: NodeStates | None = None,
        host_ranks: Mapping[Host, int] | None = None,
        prices: ScarcePrices | None = None,
    ) -> None:
        self.fragmentation = fragmentation
        # F_n(M), plus the potential of the places a scarce node still offers when any is
        # priced (gpu/scarcity.py): a placement's delta then includes the price of each place
        # it takes.
        self._value: Callable[[str, int, int, tuple[int, ...]], float] = fragmentation.value
        if prices:
            value, potential = fragmentation.value, prices.potential
            floor_cpu, floor_memory = prices.floor

            def priced(model: str, cpu: int, memory: int, free: tuple[int, ...]) -> float:
                found = value(model, cpu, memory, free)
                if cpu < floor_cpu or memory < floor_memory:
                    return found  # no place to price here
                return found + potential(model, cpu, memory, free)

            self._value = priced
        self._host_ranks = host_ranks or {}  # workload_estimate.host_ranks of the supply
        self._penalty = cpu_pod_penalty_milli * 1000 * _MICRO_UNIT
        self._stranded_weight = stranded_weight
        self._tables = GenerationTables[Demand]()  # by state number
        self.states = states if states is not None else NodeStates()
        # state number -> (sorted free milli, F before, idle milli, stranded before)
        self._befores: dict[int, tuple[tuple[int, ...], float, int, float]] = {}

    def table(self, demand: Demand) -> dict[int, int]:
        """The raw scores already known for `demand`, by state number (`score`)."""
        return self._tables.table(demand)

    def score(self, demand: Demand, table: dict[int, int], info: NodeInfo) -> int:
        """The raw score, from `table` (this demand's) when the node's state is in it."""
        state = self.states.of(info)
        found = table.get(state)
        if found is None:
            found = table[state] = self.raw(demand, info)
        return found

    def raw(self, demand: Demand, info: NodeInfo) -> int:
        """The raw score; a function of the demand and the node's GPU topology, free milli per
        GPU, cpu left and memory left, and of nothing else."""
        ledger = info.gpu
        if ledger is None:
            return 0
        cpu_left = info.alloc_milli_cpu - info.req_milli_cpu
        memory_left = info.alloc_memory - info.req_memory
        return self._raw(demand, info, ledger, cpu_left, memory_left)

    def _raw(
        self, demand: Demand, info: NodeInfo, ledger: GpuLedger, cpu_left: int, memory_left: int
    ) -> int:
        count, milli, cpu, memory = demand
        free, before, idle, stranded_before = self._node(info, ledger, cpu_left, memory_left)
        outcome = self._outcome(ledger, free, count, milli, cpu_left - cpu, memory_left - memory)
        if outcome is None:
            return 0  # Filter let it through without room: the filter is disabled
        quality, f_after, taking = outcome
        frag = self.fragmentation
        delta = f_after - before
        if self._stranded_weight:
            stranded_after = frag.stranded(cpu_left - cpu, memory_left - memory, idle - taking)
            delta += self._stranded_weight * (stranded_after - stranded_before)
        score = quality * _QUALITY_UNIT - _micro(delta) + self._host_rank(info)
        if taking:
            return score + _packing(ledger, taking) * _HOST_UNIT
        # Best fit on cpu: the node with the least cpu to spare beyond what its free GPUs will
        # need. Spreading such pods (most to spare first) nibbles at every node's cpu until
        # GPU pods no longer fit (docs/benchmarks.md: the cpu-heavy trace variants).
        spare = frag.surplus(cpu_left - cpu, memory_left - memory, idle)
        return score + (_SURPLUS_MAX - spare) * _HOST_UNIT - self._penalty

    def _host_rank(self, info: NodeInfo) -> int:
        """Last tie-break: the more common the node's size, the better (a node few others
        match in cpu, memory and GPUs is kept for the pods only it can host)."""
        key = gpu_host(info) if self._host_ranks else None
        return 0 if key is None else self._host_ranks.get(Host(*key), 0)

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
        value = self._value
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
        value = self._value
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

    def _node(
        self, info: NodeInfo, ledger: GpuLedger, cpu_left: int, memory_left: int
    ) -> tuple[tuple[int, ...], float, int, float]:
        """The node's free milli sorted largest first, its fragmentation, idle milli and
        stranded milli, by state."""
        state = self.states.of(info)
        known = self._befores.get(state)
        if known is not None:
            return known
        if len(self._befores) >= _MAX_STATES:
            self._befores.clear()
        free = ledger.sorted_free()
        frag = self.fragmentation
        before = self._value(ledger.model, cpu_left, memory_left, free)
        idle = sum(free)
        stranded = frag.stranded(cpu_left, memory_left, idle)
        known = self._befores[state] = (free, before, idle, stranded)
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
