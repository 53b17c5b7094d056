"""best_gpu_set and share_gpu on the reference machines."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpu.machines import DGX_A100, DGX_H100, L4_BOX, PCIE_SERVER, build
from gpu.placement import best_gpu_set, share_gpu
from gpu.topology import LinkLevel, flat_topology

H100 = build(DGX_H100)
A100 = build(DGX_A100)
PCIE = build(PCIE_SERVER)
L4 = build(L4_BOX)
FREE8 = [1000] * 8


def used(*busy: int, partial: dict[int, int] | None = None) -> list[int]:
    free = [0 if i in busy else 1000 for i in range(8)]
    for index, left in (partial or {}).items():
        free[index] = left
    return free


@pytest.mark.parametrize(
    ("topology", "free", "k", "expected", "level"),
    [
        (H100, FREE8, 4, (0, 1, 2, 3), LinkLevel.NVSWITCH),
        (H100, used(0), 4, (4, 5, 6, 7), LinkLevel.NVSWITCH),
        (A100, used(1, 5), 2, (0, 2), LinkLevel.NVSWITCH),
        (H100, FREE8, 8, tuple(range(8)), LinkLevel.NVSWITCH),
        (PCIE, FREE8, 4, (0, 1, 2, 3), LinkLevel.PXB),
        (PCIE, used(0), 4, (4, 5, 6, 7), LinkLevel.PXB),
        (PCIE, FREE8, 2, (0, 1), LinkLevel.PIX),
        (PCIE, used(0), 2, (2, 3), LinkLevel.PIX),
        (PCIE, used(0), 1, (1,), LinkLevel.SELF),
        (PCIE, used(0, 2, 4, 6), 2, (1, 3), LinkLevel.PXB),
        (PCIE, used(0, 1, 2, 4, 5, 6), 2, (3, 7), LinkLevel.SYS),
        (PCIE, FREE8, 8, tuple(range(8)), LinkLevel.SYS),
        (L4, [1000] * 4, 2, (0, 1), LinkLevel.PHB),
        (PCIE, used(partial={0: 400}), 2, (2, 3), LinkLevel.PIX),
    ],
    ids=[
        "a 4-GPU pod on a DGX H100 gets 4 NVSwitch GPUs on NUMA node 0",
        "with GPU 0 busy it gets the other NUMA node whole",
        "a 2-GPU pod on a DGX A100 stays on one NUMA node",
        "an 8-GPU pod takes the whole DGX",
        "a 4-GPU pod on the PCIe server gets the four under socket 0's switches",
        "with GPU 0 busy the four go to socket 1",
        "a 2-GPU pod on the PCIe server gets two GPUs on one switch",
        "with GPU 0 busy the pair comes from the next whole switch",
        "a 1-GPU pod fills the half-used switch and keeps whole switches free",
        "with no switch whole the pair stays on one socket",
        "two lone GPUs on different sockets are all that is left",
        "an 8-GPU pod spans both sockets",
        "the L4 box's GPUs are all equal: lowest indices",
        "a GPU running a share is not free for whole-GPU pods",
    ],
)
def test_best_gpu_set(
    topology: object, free: list[int], k: int, expected: tuple[int, ...], level: LinkLevel
) -> None:
    choice = best_gpu_set(topology, free, k)  # type: ignore[arg-type]
    assert choice is not None
    assert (choice.indices, choice.level) == (expected, level)


def test_a_4_gpu_set_on_a_dgx_h100_is_on_one_numa_node() -> None:
    choice = best_gpu_set(H100, FREE8, 4)
    assert choice is not None and choice.numa_nodes == 1
    assert len({H100.gpus[i].numa_node for i in choice.indices}) == 1


@pytest.mark.parametrize(
    ("free", "k"),
    [(used(0, 1, 2, 3, 4), 4), (FREE8, 9), (FREE8, 0)],
    ids=[
        "three whole GPUs cannot host four",
        "no node has nine",
        "zero GPUs is not a GPU set",
    ],
)
def test_no_set(free: list[int], k: int) -> None:
    assert best_gpu_set(H100, free, k) is None


def test_unhealthy_gpus_are_never_chosen() -> None:
    topology = build(DGX_H100, unhealthy=frozenset({0, 1}))
    choice = best_gpu_set(topology, FREE8, 4)
    assert choice is not None and not {0, 1} & set(choice.indices)


def test_a_large_node_uses_the_greedy_search() -> None:
    topology = flat_topology("X", 16)
    choice = best_gpu_set(topology, [1000] * 16, 8)
    assert choice is not None and choice.indices == tuple(range(8))


@pytest.mark.parametrize(
    ("free", "milli", "expected"),
    [
        ([1000, 1000], 300, 0),
        ([1000, 500, 400], 300, 2),
        ([1000, 500, 400], 450, 1),
        ([300, 300], 300, 0),
        ([290, 1000], 300, 1),
        ([200, 100], 300, None),
    ],
    ids=[
        "on whole GPUs the first one",
        "the tightest GPU that still fits",
        "a larger share skips GPUs too small for it",
        "an exact fit at the lowest index",
        "a GPU 10 milli short is skipped",
        "no GPU with room",
    ],
)
def test_share_gpu(free: list[int], milli: int, expected: int | None) -> None:
    assert share_gpu(free, milli) == expected


@given(st.lists(st.integers(0, 1000), min_size=1, max_size=8), st.integers(1, 999))
def test_a_share_never_exceeds_a_gpu(free: list[int], milli: int) -> None:
    index = share_gpu(free, milli)
    if index is None:
        assert all(f < milli for f in free)
    else:
        assert free[index] - milli >= 0
        assert free[index] == min(f for f in free if f >= milli)
