"""Which topology a node has, from what the API tells us about it.

Until the node agent publishes measured topology, a node is described by its GPU product label
(`nvidia.com/gpu.product`, set by NVIDIA's GPU feature discovery) and its allocatable
`nvidia.com/gpu`: a product and count that match a reference machine get that machine's
topology, anything else a flat one. GPUs named in the annotation
`batchsched.io/unhealthy-gpus` ("2,5") are marked unhealthy and never handed out.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Final

from batchsched.model.node import NodeView
from batchsched.model.resources import NVIDIA_GPU
from gpu.machines import build, machine_for
from gpu.topology import NodeTopology, flat_topology

PRODUCT_LABEL: Final = "nvidia.com/gpu.product"
UNHEALTHY_ANNOTATION: Final = "batchsched.io/unhealthy-gpus"

NO_GPUS: Final = flat_topology("", 0)
# No node has more GPUs than this (8 GPUs in 7 MIG slices each are 56; an NVL72 rack is 72
# GPUs over 18 nodes). The topology's link matrix is quadratic in the count, so a node claiming
# a million would stall the snapshot: beyond the bound a node is described with this many GPUs,
# never more handed out than it has.
MAX_GPUS_PER_NODE: Final = 128
_MAX_INDEX_DIGITS: Final = len(str(MAX_GPUS_PER_NODE))


def topology_for(node: NodeView) -> NodeTopology:
    """The node's GPU topology; a topology without GPUs when it offers none."""
    count = node.allocatable.scalar.get(NVIDIA_GPU, 0)
    if count <= 0:
        return NO_GPUS
    product = node.labels.get(PRODUCT_LABEL, "")
    unhealthy = node.annotations.get(UNHEALTHY_ANNOTATION, "")
    return _topology(product, min(count, MAX_GPUS_PER_NODE), parse_unhealthy(unhealthy))


@lru_cache(maxsize=1024)
def _topology(product: str, count: int, bad: frozenset[int]) -> NodeTopology:
    # Nodes of one kind share one topology object: built once, compared by identity.
    machine = machine_for(product, count)
    if machine is not None:
        return build(machine, bad)
    return flat_topology(product, count, bad)


def parse_unhealthy(value: str) -> frozenset[int]:
    """GPU indices from "2,5"; entries that are not indices are ignored (the annotation is
    advisory: a typo must not take a node's healthy GPUs away). ASCII digits only: "²" is a
    digit to str.isdigit() but not to int()."""
    found = set()
    for part in value.split(","):
        part = part.strip()
        digits = part.lstrip("0") or "0"  # int() refuses thousands of digits, zeros too
        if part.isascii() and part.isdigit() and len(digits) <= _MAX_INDEX_DIGITS:
            found.add(int(digits))
    return frozenset(found)
