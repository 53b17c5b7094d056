"""Clusters with racks, blocks and NVLink cliques as node labels: generated, or read from a
node CSV's optional topology columns."""

from __future__ import annotations

from pathlib import Path

import pytest

from batchsched.gang.topology import BLOCK_LABEL, CLIQUE_LABEL, RACK_LABEL, ZONE_LABEL
from batchsched.model.resources import NVIDIA_GPU
from batchsched.sim.topology_cluster import topology_cluster, topology_labels
from batchsched.sim.trace import read_nodes

LEVELS = (CLIQUE_LABEL, RACK_LABEL, BLOCK_LABEL, ZONE_LABEL)


def levels_of(name: str, **shape: int) -> tuple[str, ...]:
    nodes = {n.name: n for n in topology_cluster(**shape)}  # type: ignore[arg-type]
    return tuple(nodes[name].labels.get(level, "") for level in LEVELS)


@pytest.mark.parametrize(
    ("shape", "node", "expected"),
    [
        ({"racks": 4, "nodes_per_rack": 8}, "r000-n00", ("r000-c0", "r000", "b00", "z0")),
        ({"racks": 4, "nodes_per_rack": 8}, "r003-n05", ("r003-c2", "r003", "b00", "z0")),
        (
            {"racks": 20, "nodes_per_rack": 4, "racks_per_block": 8},
            "r017-n03",
            ("r017-c1", "r017", "b02", "z0"),
        ),
        (
            {"racks": 4, "nodes_per_rack": 8, "clique_nodes": 4, "racks_per_zone": 2},
            "r002-n04",
            ("r002-c1", "r002", "b00", "z1"),
        ),
        (
            {"racks": 1, "nodes_per_rack": 5, "clique_nodes": 2},
            "r000-n04",
            ("r000-c2", "r000", "b00", "z0"),
        ),
    ],
    ids=[
        "the first node is in the first clique, rack, block and zone",
        "cliques are two consecutive nodes of a rack by default",
        "blocks are racks_per_block consecutive racks",
        "zones are racks_per_zone consecutive racks; cliques clique_nodes nodes",
        "a rack that does not divide into cliques ends with a smaller one",
    ],
)
def test_nodes_carry_their_domains_at_every_level(
    shape: dict[str, int], node: str, expected: tuple[str, ...]
) -> None:
    assert levels_of(node, **shape) == expected


def test_the_cluster_has_racks_times_nodes_of_the_asked_gpus() -> None:
    nodes = topology_cluster(3, 4, gpus_per_node=4)
    assert len(nodes) == 12
    assert {n.allocatable.get(NVIDIA_GPU) for n in nodes} == {4}
    assert len({n.labels[CLIQUE_LABEL] for n in nodes}) == 6


def test_a_shape_of_zero_is_refused() -> None:
    with pytest.raises(ValueError, match="must be >= 1"):
        topology_cluster(0, 8)


def test_empty_values_leave_their_labels_out() -> None:
    assert topology_labels(rack="r1", zone="z") == {RACK_LABEL: "r1", ZONE_LABEL: "z"}


def test_a_node_csv_s_topology_columns_become_level_labels(tmp_path: Path) -> None:
    path = tmp_path / "nodes.csv"
    path.write_text(
        "sn,cpu_milli,memory_mib,gpu,model,clique,rack,block,zone\n"
        "n-0,96000,786432,8,H100,c-0,r-0,b-0,z-a\n"
        "n-1,96000,786432,8,H100,,r-0, ,z-a\n"
    )
    first, second = read_nodes(path)
    assert [first.labels.get(level) for level in LEVELS] == ["c-0", "r-0", "b-0", "z-a"]
    assert [second.labels.get(level) for level in LEVELS] == [None, "r-0", None, "z-a"]


def test_a_node_csv_without_topology_columns_reads_as_before(tmp_path: Path) -> None:
    path = tmp_path / "nodes.csv"
    path.write_text("sn,cpu_milli,memory_mib,gpu,model\nn-0,96000,786432,8,H100\n")
    (node,) = read_nodes(path)
    assert not set(LEVELS) & set(node.labels)
