"""Reference machines as data, the groupings derived from their links, and topology_for."""

from __future__ import annotations

import pytest

from gpu.discovery import topology_for
from gpu.machines import DGX_A100, DGX_H100, L4_BOX, PCIE_SERVER, T4_BOX, build, machine_for
from gpu.topology import (
    GpuDevice,
    Link,
    LinkLevel,
    MigPartition,
    NodeTopology,
    NumaNode,
    flat_topology,
)
from tests.builders import make_node


@pytest.mark.parametrize(
    ("machine", "islands", "switches", "sockets", "numa"),
    [
        (DGX_A100, [range(8)], [range(8)], [range(8)], [range(4), range(4, 8)]),
        (DGX_H100, [range(8)], [range(8)], [range(8)], [range(4), range(4, 8)]),
        (
            PCIE_SERVER,
            [[i] for i in range(8)],
            [[0, 1], [2, 3], [4, 5], [6, 7]],
            [range(4), range(4, 8)],
            [range(4), range(4, 8)],
        ),
        (L4_BOX, [[i] for i in range(4)], [[i] for i in range(4)], [range(4)], [range(4)]),
        (T4_BOX, [[0], [1]], [[0], [1]], [range(2)], [range(2)]),
    ],
    ids=[
        "a DGX A100 is one NVSwitch island over two NUMA nodes",
        "a DGX H100 is one NVSwitch island over two NUMA nodes",
        "the PCIe server has two switches of two GPUs on each socket",
        "the L4 box has four GPUs behind one host bridge",
        "the T4 box has two GPUs behind one host bridge",
    ],
)
def test_reference_machine_groupings(
    machine: object,
    islands: list[range],
    switches: list[list[int]],
    sockets: list[range],
    numa: list[range],
) -> None:
    topology = build(machine)  # type: ignore[arg-type]
    assert topology.islands == tuple(tuple(g) for g in islands)
    assert topology.switches == tuple(tuple(g) for g in switches)
    assert topology.sockets == tuple(tuple(g) for g in sockets)
    assert topology.numa_groups == tuple(tuple(g) for g in numa)


@pytest.mark.parametrize(
    ("a", "b", "level"),
    [(0, 1, LinkLevel.PIX), (1, 2, LinkLevel.PXB), (3, 4, LinkLevel.SYS), (6, 7, LinkLevel.PIX)],
    ids=[
        "GPUs under one switch are PIX",
        "GPUs under two switches of one socket are PXB",
        "GPUs on different sockets are SYS",
        "the last pair shares a switch too",
    ],
)
def test_pcie_server_links(a: int, b: int, level: LinkLevel) -> None:
    topology = build(PCIE_SERVER)
    assert topology.level(a, b) is level
    assert topology.level(b, a) is level


def test_nvswitch_links_carry_lanes_and_bandwidth() -> None:
    link = build(DGX_H100).links[2][5]
    assert link == Link(LinkLevel.NVSWITCH, nvlinks=18, bandwidth_gbps=900)


def test_devices_carry_their_facts() -> None:
    gpu = build(DGX_A100).gpus[4]
    assert (gpu.model, gpu.memory_mib, gpu.numa_node, gpu.pci_bus_id, gpu.healthy) == (
        "NVIDIA-A100-SXM4-80GB",
        81920,
        1,
        "00000000:87:00.0",
        True,
    )
    numa = build(DGX_A100).numa_nodes[1]
    assert (numa.socket, len(numa.cpus), numa.memory_mib) == (1, 128, 524288)


def test_an_asymmetric_link_matrix_is_rejected() -> None:
    own, pix, sys_ = Link(LinkLevel.SELF), Link(LinkLevel.PIX), Link(LinkLevel.SYS)
    gpus = tuple(GpuDevice(i, "", "X", 0, 0, "") for i in range(2))
    with pytest.raises(ValueError, match="not symmetric"):
        NodeTopology("X", gpus, (NumaNode(0, 0, (), 0),), ((own, pix), (sys_, own)))


def test_mig_partitions_are_part_of_a_device() -> None:
    gpu = GpuDevice(0, "GPU-1", "A100", 40960, 0, "", mig=(MigPartition("1g.5gb", 7),))
    assert gpu.mig[0].count == 7


@pytest.mark.parametrize(
    ("product", "count", "machine"),
    [
        ("NVIDIA-H100-80GB-HBM3", 8, "DGX H100"),
        ("NVIDIA-A100-SXM4-80GB", 8, "DGX A100"),
        ("NVIDIA-L40S", 8, "8-GPU PCIe server"),
        ("NVIDIA-L4", 4, "4xL4 PCIe box"),
        ("Tesla-T4", 2, "2xT4 PCIe box"),
        ("NVIDIA-H100-80GB-HBM3", 4, ""),
        ("G2", 8, ""),
        ("V100M16", 4, ""),
    ],
    ids=[
        "an 8-GPU H100 node is a DGX H100",
        "an 8-GPU A100 SXM node is a DGX A100",
        "an 8-GPU L40S node is the PCIe server",
        "a 4-GPU L4 node is the L4 box",
        "a 2-GPU T4 node is the T4 box",
        "a product with a count no machine has is flat",
        "the trace's G2 is flat",
        "the trace's V100M16 is flat",
    ],
)
def test_topology_for_matches_reference_machines(product: str, count: int, machine: str) -> None:
    node = make_node("n").gpus(count).label("nvidia.com/gpu.product", product).view()
    topology = topology_for(node)
    assert (topology.machine, topology.model, topology.gpu_count) == (machine, product, count)


def test_flat_topology_is_one_numa_node_behind_one_host_bridge() -> None:
    topology = topology_for(make_node("n").gpus(4).label("nvidia.com/gpu.product", "G2").view())
    assert topology.numa_groups == ((0, 1, 2, 3),)
    assert {topology.level(i, j) for i in range(4) for j in range(4) if i != j} == {LinkLevel.PHB}


def test_a_node_without_gpus_has_an_empty_topology() -> None:
    assert topology_for(make_node("n").view()).gpus == ()


def test_unhealthy_gpus_from_the_annotation() -> None:
    node = (
        make_node("n")
        .gpus(8)
        .label("nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3")
        .annotation("batchsched.io/unhealthy-gpus", "2, 5,x")
    )
    topology = topology_for(node.view())
    assert [g.index for g in topology.gpus if not g.healthy] == [2, 5]


def test_nodes_of_one_kind_share_one_topology() -> None:
    a = make_node("a").gpus(8).label("nvidia.com/gpu.product", "G2").view()
    b = make_node("b").gpus(8).label("nvidia.com/gpu.product", "G2").view()
    assert topology_for(a) is topology_for(b)


def test_machine_lookup_misses_unknown_products() -> None:
    assert machine_for("NVIDIA-B200", 8) is None
    assert flat_topology("X", 0).gpus == ()
