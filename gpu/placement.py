"""Purely computational: which GPUs of a node a pod gets.

`best_gpu_set` picks k whole GPUs: the best connectivity first (all in one NVSwitch/NVLink
island, else under one PCIe switch, else on one socket, else anywhere), then one NUMA node,
then NVLink bandwidth, then the choice that leaves the remaining free GPUs least fragmented
(whole switches, islands and NUMA nodes kept free), then the lowest indices.
`share_gpu` packs a share of one GPU onto the GPU where it fits tightest.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import combinations
from math import comb
from typing import Final

from gpu.topology import MILLI_PER_GPU, LinkLevel, NodeTopology

__all__ = ["GpuChoice", "best_gpu_set", "share_gpu", "whole_free"]

# Above this many candidate sets (e.g. 8 of 16 GPUs) the search turns greedy.
_MAX_ENUMERATED: Final = 512


@dataclass(frozen=True, slots=True)
class GpuChoice:
    indices: tuple[int, ...]
    level: LinkLevel  # the worst link inside the set; SELF for a single GPU
    numa_nodes: int  # how many NUMA nodes the set spans
    bandwidth_gbps: int  # NVLink bandwidth summed over the set's pairs
    leftover: int  # sum over switches, islands and NUMA nodes of (whole free GPUs left)^2

    @property
    def quality(self) -> int:
        """Connectivity, then one NUMA node, as one comparable number (higher is better)."""
        return int(self.level) * 2 + (self.numa_nodes == 1)

    def _key(self) -> tuple[int, int, int, int]:
        return (self.level, -self.numa_nodes, self.bandwidth_gbps, self.leftover)


def whole_free(topology: NodeTopology, free: Sequence[int]) -> tuple[int, ...]:
    """Indices of healthy GPUs with nothing allocated."""
    gpus = topology.gpus
    return tuple(i for i, f in enumerate(free) if f >= MILLI_PER_GPU and gpus[i].healthy)


def best_gpu_set(topology: NodeTopology, free: Sequence[int], k: int) -> GpuChoice | None:
    """The best k whole GPUs given each GPU's free milli-GPU, or None when fewer are free."""
    candidates = whole_free(topology, free)
    if k <= 0 or len(candidates) < k:
        return None
    return _best(topology, candidates, k)


@lru_cache(maxsize=65536)
def _best(topology: NodeTopology, candidates: tuple[int, ...], k: int) -> GpuChoice:
    sets: Iterable[tuple[int, ...]]
    if comb(len(candidates), k) <= _MAX_ENUMERATED:
        sets = combinations(candidates, k)
    else:
        sets = _greedy_sets(topology, candidates, k)
    best: GpuChoice | None = None
    for chosen in sets:
        choice = _describe(topology, chosen, candidates)
        # Strictly better only: sets come in ascending index order, so ties keep the lowest.
        if best is None or choice._key() > best._key():
            best = choice
    assert best is not None
    return best


def _describe(
    topology: NodeTopology, chosen: tuple[int, ...], candidates: tuple[int, ...]
) -> GpuChoice:
    links = topology.links
    level = LinkLevel.SELF
    bandwidth = 0
    for a, i in enumerate(chosen):
        row = links[i]
        for j in chosen[a + 1 :]:
            link = row[j]
            level = min(level, link.level)
            bandwidth += link.bandwidth_gbps
    numa = len({topology.gpus[i].numa_node for i in chosen})
    taken = set(chosen)
    left = [i for i in candidates if i not in taken]
    leftover = 0
    for groups in (topology.islands, topology.switches, topology.numa_groups):
        for group in groups:
            n = sum(1 for i in left if i in group)
            leftover += n * n
    return GpuChoice(chosen, level, numa, bandwidth, leftover)


def _greedy_sets(
    topology: NodeTopology, candidates: tuple[int, ...], k: int
) -> list[tuple[int, ...]]:
    """One set grown from each candidate: add the GPU best linked to those already taken."""
    links = topology.links
    sets = []
    for seed in candidates:
        chosen = [seed]
        numa = topology.gpus[seed].numa_node
        while len(chosen) < k:
            rest = [i for i in candidates if i not in chosen]
            nxt = max(
                rest,
                key=lambda i: (
                    min(links[i][j].level for j in chosen),
                    topology.gpus[i].numa_node == numa,
                    -i,
                ),
            )
            chosen.append(nxt)
        sets.append(tuple(sorted(chosen)))
    return sorted(set(sets))


def share_gpu(free: Sequence[int], milli: int) -> int | None:
    """The GPU a share of `milli` fits tightest on (least free left), lowest index on ties;
    None when no GPU has room. Shares never push a GPU past 1000 milli."""
    best: int | None = None
    best_free = MILLI_PER_GPU + 1
    for i, f in enumerate(free):
        if milli <= f < best_free:
            best, best_free = i, f
    return best
