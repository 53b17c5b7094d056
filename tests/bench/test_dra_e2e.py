"""The dra-e2e bench's workload plan must be able to fail: one seed gives one workload for
both schedulers, its sizes follow SIZES' weights, its Poisson arrivals offer `load` of the
cluster's GPUs, and each pod runs within RUNTIME_S."""

from __future__ import annotations

from collections import Counter
from itertools import pairwise

import pytest

from batchsched.bench.dra_e2e import RUNTIME_S, SIZES, Arrival, plan, template_name

GPUS_TOTAL = 64  # 8 DGX-like nodes


def test_one_seed_gives_one_plan() -> None:
    assert plan(120, 1, GPUS_TOTAL, 0.9) == plan(120, 1, GPUS_TOTAL, 0.9)


def test_another_seed_gives_another_plan() -> None:
    assert plan(120, 1, GPUS_TOTAL, 0.9) != plan(120, 2, GPUS_TOTAL, 0.9)


def test_the_load_changes_the_arrivals_not_the_pods() -> None:
    light, heavy = plan(50, 1, GPUS_TOTAL, 0.5), plan(50, 1, GPUS_TOTAL, 1.0)
    assert [(a.name, a.gpus, a.runtime_s) for a in light] == [
        (a.name, a.gpus, a.runtime_s) for a in heavy
    ]
    assert light[-1].at == pytest.approx(2 * heavy[-1].at, abs=0.01)


def test_the_first_pod_arrives_at_0_and_the_others_in_order() -> None:
    arrivals = plan(200, 3, GPUS_TOTAL, 0.9)
    assert arrivals[0].at == 0.0
    assert all(a.at <= b.at for a, b in pairwise(arrivals))
    assert len({a.at for a in arrivals}) > 190  # a stream, not a burst


def test_each_pod_is_named_by_its_index_and_size() -> None:
    arrivals = plan(3, 1, GPUS_TOTAL, 0.9)
    assert [a.name for a in arrivals] == [f"p{i:03d}-{a.gpus}g" for i, a in enumerate(arrivals)]
    assert len({a.name for a in plan(1000, 1, GPUS_TOTAL, 0.9)}) == 1000


def test_each_pod_runs_5_to_15_seconds_in_tenths() -> None:
    runtimes = [a.runtime_s for a in plan(2000, 4, GPUS_TOTAL, 0.9)]
    assert RUNTIME_S == (5.0, 15.0)
    assert all(5.0 <= r <= 15.0 and r == round(r, 1) for r in runtimes)
    assert sum(runtimes) / len(runtimes) == pytest.approx(10.0, abs=0.3)


def test_the_sizes_follow_their_documented_weights() -> None:
    assert dict(SIZES) == {1: 35, 2: 30, 4: 25, 8: 10}
    pods = 5000
    counts = Counter(a.gpus for a in plan(pods, 5, GPUS_TOTAL, 0.9))
    assert set(counts) == {1, 2, 4, 8}
    for gpus, weight in SIZES:
        assert counts[gpus] / pods == pytest.approx(weight / 100, abs=0.025), gpus


@pytest.mark.parametrize("load", [pytest.param(0.9, id="90% load"), pytest.param(0.5, id="50%")])
def test_the_arrivals_offer_the_load_asked_for(load: float) -> None:
    """GPU-seconds asked for over GPU-seconds the cluster has while they arrive."""
    arrivals = plan(5000, 6, GPUS_TOTAL, load)
    asked = sum(a.gpus * a.runtime_s for a in arrivals)
    assert asked / (arrivals[-1].at * GPUS_TOTAL) == pytest.approx(load, rel=0.06)


def test_the_rate_follows_the_mean_size_and_runtime() -> None:
    """2.75 GPUs for 10 s on average: 64 GPUs at 90% take 2.09 pods a second."""
    arrivals = plan(5000, 7, GPUS_TOTAL, 0.9)
    rate = (len(arrivals) - 1) / arrivals[-1].at
    assert rate == pytest.approx(0.9 * 64 / 27.5, rel=0.05)


def test_each_size_has_its_template() -> None:
    assert [template_name(g) for g, _ in SIZES] == ["gpus-1", "gpus-2", "gpus-4", "gpus-8"]
    assert isinstance(plan(1, 1, GPUS_TOTAL, 0.9)[0], Arrival)
