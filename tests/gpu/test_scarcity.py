"""Prices for the places left on scarce nodes: the Poisson tail, places per node state, which
shapes are scarce and how they group, and the price and potential the scorer adds."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpu.scarcity import (
    ScarceGroup,
    ScarcePrices,
    demand_at_least,
    mean_gpu_request,
    places,
    scarce_groups,
)
from gpu.workload import MIB, PodShape, typical_workload
from gpu.workload_estimate import Host

GIB = 1024 * MIB
COMMON = Host("G2", 96_000, 384 * GIB, 8)  # most of the cluster
BIG = Host("G3", 128_000, 768 * GIB, 8)  # few nodes, the only ones with 120 cores
SUPPLY = {COMMON: 90, BIG: 5}  # BIG holds 40 of 760 GPUs: a share of 0.053
WIDE = PodShape(120_000, 700 * GIB, gpu_count=8)
WIDE_2 = PodShape(120_200, 620 * GIB, gpu_count=8)
SMALL = PodShape(8_000, 16 * GIB, gpu_count=1)
CPU_ONLY = PodShape(32_000, 64 * GIB)
MIX = typical_workload([(SMALL, 90.0), (CPU_ONLY, 8.0), (WIDE, 1.5), (WIDE_2, 0.5)], coverage=1.0)


def _poisson_tail(mean: float, k: int) -> float:
    return 1.0 - sum(math.exp(-mean) * mean**i / math.factorial(i) for i in range(k))


def _negative_binomial_tail(seen: float, counted: float, to_come: float, k: int) -> float:
    """1 - P(N < k), each term the product form of Gamma(i + r) / (i! Gamma(r))."""
    q = to_come / (counted + to_come)
    term = (1.0 - q) ** seen
    below = 0.0
    for i in range(k):
        below += term
        term *= (i + seen) / (i + 1) * q
    return 1.0 - below


@pytest.mark.parametrize(
    ("seen", "counted", "to_come", "k"),
    [
        (0.3, 1843.0, 9549.0, 5),
        (1.0, 100.0, 400.0, 2),
        (4.0, 5000.0, 3000.0, 1),
        (30.0, 900.0, 800.0, 25),
    ],
)
def test_demand_tail_is_the_negative_binomial_one(
    seen: float, counted: float, to_come: float, k: int
) -> None:
    expected = _negative_binomial_tail(seen, counted, to_come, k)
    assert demand_at_least(seen, counted, to_come, k) == pytest.approx(expected, abs=1e-9)


def test_a_kind_seen_often_has_a_poisson_count_and_a_rare_one_a_longer_tail() -> None:
    # a share of 1/2000 known from 5000 of 10 million pods: Poisson at 4 over 8000 pods
    for k in (1, 4, 8):
        assert demand_at_least(5000.0, 1e7, 8000.0, k) == pytest.approx(
            _poisson_tail(4.0, k), abs=1e-3
        )
    # the same mean from a fraction of a pod seen: likelier to be nothing, or many
    assert demand_at_least(0.5, 1000.0, 8000.0, 1) < _poisson_tail(4.0, 1)
    assert demand_at_least(0.5, 1000.0, 8000.0, 12) > 10 * _poisson_tail(4.0, 12)


def test_demand_tail_edges() -> None:
    assert demand_at_least(1.0, 100.0, 50.0, 0) == 1.0
    assert demand_at_least(0.0, 100.0, 50.0, 1) == 0.0
    assert demand_at_least(1.0, 100.0, 0.0, 1) == 0.0
    assert demand_at_least(40.0, 10_000.0, 1000.0, 39) < 1e-12  # 1 - (a sum near 1)
    assert demand_at_least(3e5, 1e6, 1e4, 10) == 1.0
    assert demand_at_least(3e6, 1e6, 1e3, 3000) == pytest.approx(0.5, abs=0.01)  # its median


@given(st.floats(0.01, 50.0), st.floats(10.0, 1e5), st.floats(1.0, 1e5), st.integers(0, 300))
def test_demand_tail_falls_with_k_and_rises_with_the_pods_to_come(
    seen: float, counted: float, to_come: float, k: int
) -> None:
    here = demand_at_least(seen, counted, to_come, k)
    assert 0.0 <= here <= 1.0
    assert demand_at_least(seen, counted, to_come, k + 1) <= here + 1e-9
    assert demand_at_least(seen, counted, to_come * 1.5, k) >= here - 1e-9


def test_places_count_what_gpus_cpu_memory_and_model_each_leave_room_for() -> None:
    eight = (1000,) * 8
    assert places(WIDE, "G3", 128_000, 768 * GIB, eight) == 1
    assert places(WIDE, "G3", 96_000, 768 * GIB, eight) == 0  # a cpu pod took 32 cores
    assert places(WIDE, "G3", 128_000, 600 * GIB, eight) == 0
    assert places(WIDE, "G3", 128_000, 768 * GIB, (1000,) * 7 + (500,)) == 0
    assert places(SMALL, "G3", 128_000, 768 * GIB, eight) == 8
    assert places(SMALL, "G3", 20_000, 768 * GIB, eight) == 2  # cpu caps it
    t4_only = PodShape(8_000, 16 * GIB, gpu_count=1, models=frozenset({"T4"}))
    assert places(t4_only, "G3", 128_000, 768 * GIB, eight) == 0
    share = PodShape(4_000, 8 * GIB, gpu_milli=300)
    assert places(share, "G3", 128_000, 768 * GIB, (1000, 600, 200, 0)) == 5
    assert places(CPU_ONLY, "G3", 128_000, 768 * GIB, eight) == 0  # no GPU: not a GPU place


def test_only_shapes_few_nodes_could_host_for_their_size_are_scarce_and_hosts_group_them() -> None:
    groups = scarce_groups(MIX, SUPPLY, 0.1)
    assert len(groups) == 1
    (group,) = groups
    assert group.hosts == frozenset({BIG})
    assert group.share == pytest.approx(0.02)
    assert group.gpu_milli == pytest.approx(8000)
    # the most demanding of the two in each dimension: a node that hosts it hosts both
    assert (group.envelope.milli_cpu, group.envelope.memory) == (120_200, 700 * GIB)
    assert group.envelope.gpu_count == 8 and group.envelope.models is None
    assert scarce_groups(MIX, SUPPLY, 0.05) == ()  # BIG holds 5.3 % of the GPUs
    assert scarce_groups(MIX, SUPPLY, 0.0) == ()
    assert scarce_groups(MIX, {}, 0.1) == ()


def test_whole_node_shapes_are_priced_where_no_node_could_host_two() -> None:
    whole = PodShape(64_000, 256 * GIB, gpu_count=8)  # any 8-GPU node with 64 cores
    half = PodShape(32_000, 128 * GIB, gpu_count=4)  # two fit on an 8-GPU node
    mix = typical_workload([(whole, 1.0), (half, 1.0), (SMALL, 8.0)], coverage=1.0)
    groups = scarce_groups(mix, SUPPLY, 0.0, whole_nodes=True)
    assert [(g.hosts, g.envelope) for g in groups] == [(frozenset({COMMON, BIG}), whole)]
    assert scarce_groups(mix, SUPPLY, 0.0) == ()
    both = scarce_groups(MIX, SUPPLY, 0.1, whole_nodes=True)
    assert [g.hosts for g in both] == [frozenset({BIG})]  # WIDE is both: one group


def test_a_model_restriction_alone_does_not_make_a_shape_scarce() -> None:
    rare_model = Host("T4", 96_000, 384 * GIB, 8)
    restricted = PodShape(8_000, 16 * GIB, gpu_count=1, models=frozenset({"T4"}))
    mix = typical_workload([(restricted, 1.0), (SMALL, 1.0)], coverage=1.0)
    assert scarce_groups(mix, {COMMON: 90, rare_model: 2}, 0.1) == ()


def test_the_memo_gives_the_same_groups() -> None:
    memo: dict[PodShape, frozenset[Host] | None] = {}
    first = scarce_groups(MIX, SUPPLY, 0.1, memo)
    assert memo[WIDE] == frozenset({BIG}) and memo[SMALL] is None
    assert scarce_groups(MIX, SUPPLY, 0.1, memo) == first


def test_the_mean_request_counts_pods_without_gpus_at_zero() -> None:
    assert mean_gpu_request(MIX) == pytest.approx(0.9 * 1000 + 0.02 * 8000)
    assert mean_gpu_request(typical_workload([CPU_ONLY])) == 0.0


def test_a_place_costs_nothing_while_places_are_plenty_and_a_pod_when_they_run_out() -> None:
    group = ScarceGroup(frozenset({BIG}), WIDE, 0.02, 8000.0)
    # four pods of the group expected, its share known from 40 of 2000 pods
    prices = [
        ScarcePrices.price(group, 2000.0, 200.0, left, 16) for left in (39, 10, 6, 4, 2, 1, 0)
    ]
    assert prices[0] == 0
    assert prices == sorted(prices)  # fewer places left, dearer each
    assert prices[-1] == 8000  # none left: any demand at all loses a pod
    assert 0 < prices[3] < 8000
    assert all(p % 500 == 0 for p in prices)  # sixteenths of the pod's GPUs


def test_the_potential_is_minus_the_price_of_every_place_still_offered() -> None:
    group = ScarceGroup(frozenset({BIG}), WIDE, 0.02, 8000.0)
    priced = ScarcePrices([group], [3000])
    assert priced
    assert priced.potential("G3", 128_000, 768 * GIB, (1000,) * 8) == -3000.0
    assert priced.potential("G3", 96_000, 768 * GIB, (1000,) * 8) == 0.0
    assert priced.potential("G2", 96_000, 384 * GIB, (1000,) * 8) == 0.0
    free = ScarcePrices([group], [0])
    assert not free
    assert free.potential("G3", 128_000, 768 * GIB, (1000,) * 8) == 0.0
