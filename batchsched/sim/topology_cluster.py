"""GPU clusters with a network topology: NVLink cliques inside racks, racks in blocks, blocks
in zones, as node labels (the levels of `batchsched.gang.topology`). Purely computational.

`topology_cluster(racks=64, nodes_per_rack=8)` is 512 nodes of 8 GPUs; node `r007-n03` is in
clique `r007-c1` (cliques are `clique_nodes` consecutive nodes of one rack), rack `r007`,
block `b00` (blocks are `racks_per_block` consecutive racks) and zone `z0` (zones are
`racks_per_zone` consecutive racks; 0: one zone).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from batchsched.gang.topology import BLOCK_LABEL, CLIQUE_LABEL, RACK_LABEL, ZONE_LABEL
from batchsched.model.node import NodeView
from batchsched.sim.batch_workloads import gpu_node

__all__ = ["topology_cluster", "topology_labels"]


def topology_labels(
    clique: str = "", rack: str = "", block: str = "", zone: str = ""
) -> dict[str, str]:
    """The level labels for the values given; an empty value leaves its label out (the node
    is in no domain of that level)."""
    values = ((CLIQUE_LABEL, clique), (RACK_LABEL, rack), (BLOCK_LABEL, block), (ZONE_LABEL, zone))
    return {key: value for key, value in values if value}


def topology_cluster(
    racks: int,
    nodes_per_rack: int,
    gpus_per_node: int = 8,
    clique_nodes: int = 2,
    racks_per_block: int = 8,
    racks_per_zone: int = 0,
    product: str = "NVIDIA-H100-80GB-HBM3",
) -> list[NodeView]:
    """Rack after rack, node after node. A rack whose node count is not a multiple of
    `clique_nodes` ends with a smaller clique."""
    if min(racks, nodes_per_rack, clique_nodes, racks_per_block) < 1 or racks_per_zone < 0:
        raise ValueError(
            "racks, nodes_per_rack, clique_nodes and racks_per_block must be >= 1, "
            "racks_per_zone >= 0"
        )
    nodes = []
    for r in range(racks):
        rack = f"r{r:03d}"
        block = f"b{r // racks_per_block:02d}"
        zone = f"z{r // racks_per_zone if racks_per_zone else 0}"
        for n in range(nodes_per_rack):
            labels = topology_labels(f"{rack}-c{n // clique_nodes}", rack, block, zone)
            nodes.append(_labelled(gpu_node(f"{rack}-n{n:02d}", gpus_per_node, product), labels))
    return nodes


def _labelled(node: NodeView, labels: Mapping[str, str]) -> NodeView:
    return dataclasses.replace(node, labels={**node.labels, **labels})
