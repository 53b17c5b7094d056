"""What a node that only few others match is worth while the pods that need it are still to come.

FGD's measure is linear in the nodes: turning one more of the 39 nodes with 128 cores into a
node that can no longer take a 120-core, 8-GPU pod costs the same when 38 such nodes are left
as when none is. Yet whether that node was needed depends on how many such pods are still to
arrive: with about four expected and 38 left, nothing is lost; with four expected and four
left, a whole pod probably is. So a pod shape that only a small share of the cluster's GPUs
could ever host (by their nodes' size) gets a price per place left for it: the expected loss
of taking one place away,

    price = GPUs the shape asks for x P(N >= places left),  N = pods of it still to come,

the chance that the demand still to come reaches the place being taken (the place that
would be used last). N is negative binomial (`demand_at_least`): the shape's share is known
only from the pods counted so far, and for a shape seen once or never that uncertainty is
most of what there is to know. Shapes that the same nodes host are one group (their demand
adds up).
The price is added to a node's fragmentation per place it still offers, negated, so the FGD
delta of a placement grows by the price of each place it takes: nothing while places are
plenty, a whole pod's GPUs when they are about to run out. What `places` counts is a node's
room for the group's most demanding shape, given its model, cpu, memory and free GPUs.

How many pods are to come is the arriving mix's share of the group times the pods it takes to
fill the cluster's free GPUs at the mix's mean GPU request (a horizon that ignores pods that
end; in a cluster where they do, demand renews and this under-protects, never over).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from gpu.topology import MILLI_PER_GPU
from gpu.workload import PodShape, Workload
from gpu.workload_estimate import Host, supply_factor

__all__ = [
    "ScarceGroup",
    "ScarcePrices",
    "demand_at_least",
    "mean_gpu_request",
    "places",
    "scarce_groups",
]


def demand_at_least(seen: float, counted: float, to_come: float, k: int) -> float:
    """P(N >= k) for N, the pods of a kind among `to_come` more, when `seen` of the `counted`
    pods so far were of that kind. The kind's share of the pods is not known, only estimated:
    taken as Gamma(seen, counted) distributed, N is negative binomial, with a longer tail than
    a Poisson count at the estimated share (to which it tends as `seen` grows). For a kind
    seen about once or never (only a prior's fraction of a pod), that tail is what says a
    place or two may well be needed."""
    if k <= 0:
        return 1.0
    if seen <= 0 or counted <= 0 or to_come <= 0:
        return 0.0
    mean = seen * to_come / counted
    spread = 12.0 * math.sqrt(mean + mean * mean / seen) + 20.0
    if k > mean + spread:
        return 0.0
    if k < mean - spread:
        return 1.0
    log_q = math.log(to_come / (counted + to_come))
    base = seen * math.log(counted / (counted + to_come)) - math.lgamma(seen)
    below = math.fsum(
        math.exp(base + math.lgamma(i + seen) - math.lgamma(i + 1) + i * log_q) for i in range(k)
    )
    return min(1.0, max(0.0, 1.0 - below))


def places(
    shape: PodShape, model: str, milli_cpu_left: int, memory_left: int, free: Sequence[int]
) -> int:
    """How many pods of `shape` the node could still take: its model allows it, and as many as
    its free GPUs, cpu and memory each leave room for."""
    if shape.models is not None and model not in shape.models:
        return 0
    count = len(free) * MILLI_PER_GPU  # more than any GPU count below
    if shape.milli_cpu:
        count = max(0, milli_cpu_left) // shape.milli_cpu
    if shape.memory:
        count = min(count, max(0, memory_left) // shape.memory)
    if not count:
        return 0
    if shape.gpu_count:
        return min(count, sum(1 for f in free if f >= MILLI_PER_GPU) // shape.gpu_count)
    if shape.gpu_milli:
        return min(count, sum(f // shape.gpu_milli for f in free if f > 0))
    return 0


@dataclass(frozen=True, slots=True)
class ScarceGroup:
    """Shapes only the same few kinds of node could host. `envelope` is the most demanding
    (cpu, memory, GPUs per pod, per-GPU share) of them: a node's places for the group are its
    places for the envelope. `share` is the group's share of the arriving pods, `gpu_milli`
    the mean milli-GPU a pod of the group asks for."""

    hosts: frozenset[Host]
    envelope: PodShape
    share: float
    gpu_milli: float


def scarce_groups(
    mix: Workload,
    supply: Mapping[Host, int],
    max_host_share: float,
    memo: dict[PodShape, frozenset[Host] | None] | None = None,
    whole_nodes: bool = False,
) -> tuple[ScarceGroup, ...]:
    """The groups of GPU shapes in `mix` (every shape, shares summing to 1) that only nodes
    holding at most `max_host_share` of the cluster's GPUs could host for their size (cpu,
    memory, GPU count: a model restriction alone does not make a shape scarce here; the
    supply weighting covers that), and with `whole_nodes` the whole-GPU shapes that no node
    could host two of (each takes a node's GPUs: 8-GPU pods where nodes have 8), grouped by
    the exact kinds of node that could host them. `memo`, if given, remembers each shape's
    hosts (None: not priced) for this supply and these settings."""
    if (max_host_share <= 0 and not whole_nodes) or not supply:
        return ()
    known: dict[PodShape, frozenset[Host] | None] = {} if memo is None else memo
    by_hosts: dict[frozenset[Host], list[tuple[PodShape, float]]] = {}
    for shape, p in mix.shapes:
        if p <= 0:
            continue
        if shape in known:
            hosts = known[shape]
        else:
            hosts = known[shape] = _scarce_hosts(shape, supply, max_host_share, whole_nodes)
        if hosts is not None:
            by_hosts.setdefault(hosts, []).append((shape, p))
    groups = [_group(hosts, members) for hosts, members in by_hosts.items()]
    return tuple(sorted(groups, key=lambda g: _order(g.envelope)))


def _order(shape: PodShape) -> tuple[int, int, int, int, tuple[str, ...]]:
    models = tuple(sorted(shape.models or ()))
    return (shape.milli_cpu, shape.memory, shape.gpu_count, shape.gpu_milli, models)


def _scarce_hosts(
    shape: PodShape, supply: Mapping[Host, int], max_host_share: float, whole_nodes: bool
) -> frozenset[Host] | None:
    """The kinds of node that could host `shape`, if it is scarce; else None."""
    if not shape.wants_gpu:
        return None
    factor = supply_factor(dataclasses.replace(shape, models=None), supply, capacity=True)
    hosts = frozenset(h for h in supply if h.could_host(shape, capacity=True))
    if not hosts:
        return None
    if whole_nodes and shape.gpu_count and all(h.gpus < 2 * shape.gpu_count for h in hosts):
        return hosts  # each one takes a node: its places are the nodes with all GPUs free
    return hosts if factor * max_host_share >= 1.0 else None


def _group(hosts: frozenset[Host], members: list[tuple[PodShape, float]]) -> ScarceGroup:
    share = sum(p for _, p in members)
    models: frozenset[str] | None = frozenset()
    for shape, _ in members:
        models = None if models is None or shape.models is None else models | shape.models
    envelope = PodShape(
        max(s.milli_cpu for s, _ in members),
        max(s.memory for s, _ in members),
        max(s.gpu_count for s, _ in members),
        0 if any(s.gpu_count for s, _ in members) else max(s.gpu_milli for s, _ in members),
        models,
    )
    gpu_milli = sum(p * s.gpus_needed * s.per_gpu_milli for s, p in members) / share
    return ScarceGroup(hosts, envelope, share, gpu_milli)


def mean_gpu_request(mix: Workload) -> float:
    """`mix`'s mean milli-GPU per pod, pods without GPUs included: the free milli-GPU over it
    is how many more pods would fill the GPUs (the horizon the demand to come is counted on)."""
    return sum(p * s.gpus_needed * s.per_gpu_milli for s, p in mix.shapes)


class ScarcePrices:
    """Per group, the price in milli-GPU of one of its places (0: none are short), and the
    potential that GpuScorer adds to a node's fragmentation."""

    __slots__ = ("groups", "priced", "prices")

    def __init__(self, groups: Sequence[ScarceGroup], prices: Iterable[int]) -> None:
        self.groups = tuple(groups)
        self.prices = tuple(prices)
        # (envelope, price) of the groups with a price: all the potential reads
        self.priced = tuple(
            (group.envelope, price)
            for group, price in zip(self.groups, self.prices, strict=True)
            if price > 0
        )

    @property
    def floor(self) -> tuple[int, int]:
        """The least cpu (milli) and memory any priced place needs: a node with less of
        either offers none (a quick answer for most nodes)."""
        if not self.priced:
            return 0, 0
        return (
            min(envelope.milli_cpu for envelope, _ in self.priced),
            min(envelope.memory for envelope, _ in self.priced),
        )

    def __bool__(self) -> bool:
        return bool(self.priced)

    def potential(
        self, model: str, milli_cpu_left: int, memory_left: int, free: Sequence[int]
    ) -> float:
        """Minus the price of every place the node still offers, in milli-GPU."""
        return -float(
            sum(
                price * places(envelope, model, milli_cpu_left, memory_left, free)
                for envelope, price in self.priced
            )
        )

    @staticmethod
    def price(
        group: ScarceGroup, counted: float, to_come: float, places_left: int, steps: int
    ) -> int:
        """The expected milli-GPU lost by taking one of `places_left`, when `counted` pods
        gave the group's share and `to_come` more will arrive; rounded to a `steps`-th of a
        pod's GPUs (every change of price re-scores the nodes)."""
        chance = demand_at_least(group.share * counted, counted, to_come, places_left)
        return round(group.gpu_milli * round(chance * steps) / steps)
