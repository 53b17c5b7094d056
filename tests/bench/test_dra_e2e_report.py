"""What the dra-e2e bench publishes must be able to fail: for a small known set of
placements, the counts by size, the shares, the misses, the ratio against kube-scheduler and
the table's percentages; and the scheduling attempts read from both schedulers' metrics."""

from __future__ import annotations

from typing import cast

import pytest
from kubernetes_asyncio.client import ApiClient

from batchsched.bench.dra_e2e import ISLANDS
from batchsched.bench.dra_e2e_claims import ClaimLedger, ClaimWatch, Placement
from batchsched.bench.dra_e2e_report import (
    DraMeasurement,
    Workload,
    attempts_by_result,
    fraction,
    measurement,
    render,
    to_json,
)
from batchsched.bench.e2e_watch import BindWatch
from batchsched.bench.harness_phase import Phase
from batchsched.bench.harness_report import Machine
from batchsched.metrics import SchedulerMetrics

NO_API = cast(ApiClient, None)  # the watches' API is only read by run()
STARTED = 100.0
MACHINE = Machine(cpus=2, cpu_model="test cpu", python="3.11", kube="v1.34.0", load_average=0.5)
WORKLOAD = Workload.of(2, 1, 0.9, [(1, 0.0), (2, 1.0), (2, 2.5), (4, 3.0)])


def gpus(*indexes: int) -> tuple[str, ...]:
    return tuple(f"gpu-{i}" for i in indexes)


def placement(
    name: str, devices: tuple[str, ...], free: tuple[int, int], at: float = STARTED + 1.0
) -> Placement:
    return Placement(f"bench/{name}", "dgx-0", devices, free, at)


# batchsched's claims: 5 of 2-4 GPUs judged (3 in one island), 4 of them with an island free
# on the node (3 in one island), 2 split while some node had one free.
PLACEMENTS = (
    placement("one", gpus(5), (4, 4)),  # 1 GPU: not judged
    placement("all", gpus(0, 1, 2, 3, 4, 5, 6, 7), (4, 4)),  # 8 GPUs: not judged
    placement("a", gpus(0, 1), (4, 4)),
    placement("b", gpus(4, 5, 6, 7), (0, 4)),
    placement("d", gpus(0, 1, 2), (3, 4)),
    Placement(
        "bench/c", "dgx-0", gpus(3, 4), (1, 1), STARTED + 2.0, "dgx-1", STARTED + 1.5
    ),  # split, an island free on dgx-1 only
    placement("e", gpus(2, 3, 4, 5), (4, 2), STARTED + 3.0),  # split, an island free here
)


def bench_watch(waits: dict[str, float]) -> BindWatch:
    watch = BindWatch(NO_API, "bench", len(waits))
    watch.appeared = dict.fromkeys(waits, 0.0)
    watch.bound = dict(waits)
    return watch


def measured(placements: tuple[Placement, ...] = PLACEMENTS) -> DraMeasurement:
    phase = Phase(
        watch=bench_watch({"p1": 1.0, "p2": 2.0, "p3": 4.0}),
        started=STARTED,
        created=STARTED + 3.0,
        ended=STARTED + 30.0,
        cpu_seconds={"scheduler": 1.5},
    )
    ledger = ClaimLedger(ISLANDS, ("dgx-0", "dgx-1"), "bench", placements=list(placements))
    ledger.double_allocations = ["dgx-0/gpu-1: bench/c"]
    return measurement("batchsched", 3, phase, ClaimWatch(NO_API, ledger), ISLANDS)


def test_the_counts_of_a_known_set_of_placements() -> None:
    m = measured()
    assert (m.pods, m.bound, m.seconds) == (3, 3, 30.0)
    assert (m.wait_p50_s, m.wait_p99_s) == (2.0, 4.0)
    assert m.claims_allocated == 7
    assert m.judged == 5
    assert m.one_island == 3
    assert m.island_free == 4
    assert m.one_island_where_free == 3
    assert m.split_while_free_elsewhere == 2
    assert m.double_allocations == ["dgx-0/gpu-1: bench/c"]
    assert m.cpu_seconds == {"scheduler": 1.5}


def test_the_shares_of_a_known_set_of_placements() -> None:
    m = measured()
    assert m.share == pytest.approx(0.6)
    assert m.share_where_free == pytest.approx(0.75)


def test_the_counts_by_size_leave_out_1_and_8_gpu_claims() -> None:
    assert measured().by_size == {
        2: {"claims": 2, "one_island": 1, "island_free": 1, "split_while_free_elsewhere": 1},
        3: {"claims": 1, "one_island": 1, "island_free": 1, "split_while_free_elsewhere": 0},
        4: {"claims": 2, "one_island": 1, "island_free": 2, "split_while_free_elsewhere": 1},
    }


def test_the_misses_are_the_claims_split_while_an_island_was_free() -> None:
    assert measured().misses == [
        {
            "claim": "bench/c",
            "node": "dgx-0",
            "devices": ["gpu-3", "gpu-4"],
            "free_by_island": [1, 1],
            "t_s": 2.0,
            "free_on": "dgx-1",
            "freed_s_before": 0.5,
        },
        {
            "claim": "bench/e",
            "node": "dgx-0",
            "devices": ["gpu-2", "gpu-3", "gpu-4", "gpu-5"],
            "free_by_island": [4, 2],
            "t_s": 3.0,
        },
    ]


def test_no_judged_claims_give_no_share() -> None:
    m = measured(PLACEMENTS[:2])
    assert (m.judged, m.share, m.share_where_free) == (0, None, None)
    assert m.by_size == {}
    assert "2-4 GPU claims in one island 0/0 (-)" in m.summary()


@pytest.mark.parametrize(
    ("part", "whole", "text"),
    [
        pytest.param(3, 4, "3/4 (75.0%)", id="three of four is 75.0%"),
        pytest.param(1, 3, "1/3 (33.3%)", id="one of three rounds to 33.3%"),
        pytest.param(4, 4, "4/4 (100.0%)", id="all is 100.0%"),
        pytest.param(0, 0, "0/0 (-)", id="none of none is no percentage"),
    ],
)
def test_fraction(part: int, whole: int, text: str) -> None:
    assert fraction(part, whole) == text


def kube_scheduler(one_island: int, judged: int = 5) -> DraMeasurement:
    return DraMeasurement(
        scheduler="kube-scheduler",
        pods=3,
        bound=3,
        seconds=31.0,
        wait_p50_s=1.0,
        wait_p99_s=3.0,
        claims_allocated=7,
        judged=judged,
        one_island=one_island,
        island_free=4,
        one_island_where_free=min(one_island, 4),
        split_while_free_elsewhere=judged - one_island,
        attempts={"scheduled": 3, "unschedulable": 9},
    )


def line_of(report: str, start: str) -> str:
    """The first line of `report` starting with `start`."""
    return next(line for line in report.splitlines() if line.startswith(start))


def test_the_table_prints_both_shares_as_percentages() -> None:
    report = render(MACHINE, WORKLOAD, [measured(), kube_scheduler(2)])
    row = line_of(report, "batchsched      ")
    assert row.split()[1:3] == ["3/3", "30.0"]
    assert "2.00/4.00" in row
    assert row.endswith("3/5 (60.0%)                    3/4 (75.0%)")
    assert "2/5 (40.0%)" in line_of(report, "kube-scheduler  ")


@pytest.mark.parametrize(
    ("kube_one_island", "kube_judged", "ratio_text", "verdict"),
    [
        pytest.param(1, 5, "3.00x", "goal >= 1.5x: met", id="0.6 over 0.2 is 3.00x and meets"),
        pytest.param(3, 10, "2.00x", "goal >= 1.5x: met", id="0.6 over 0.3 is 2.00x and meets"),
        pytest.param(3, 5, "1.00x", "goal >= 1.5x: NOT met", id="0.6 over 0.6 is 1.00x, not met"),
        pytest.param(2, 4, "1.20x", "goal >= 1.5x: NOT met", id="0.6 over 0.5 is 1.20x, not met"),
    ],
)
def test_the_ratio_of_the_one_island_shares(
    kube_one_island: int, kube_judged: int, ratio_text: str, verdict: str
) -> None:
    results = [measured(), kube_scheduler(kube_one_island, kube_judged)]
    line = line_of(render(MACHINE, WORKLOAD, results), "ratio of one-island shares")
    assert f"batchsched / kube-scheduler: {ratio_text} ({verdict};" in line
    expected = 0.6 / (kube_one_island / kube_judged)
    assert to_json(MACHINE, WORKLOAD, results)["ratio"] == pytest.approx(expected)


def test_a_ratio_of_exactly_the_goal_meets_it() -> None:
    results = [measured(), kube_scheduler(2, 5)]
    line = line_of(render(MACHINE, WORKLOAD, results), "ratio of one-island shares")
    assert "1.50x (goal >= 1.5x: met;" in line


@pytest.mark.parametrize(
    "results",
    [
        pytest.param([measured()], id="batchsched alone has no ratio"),
        pytest.param([measured(), kube_scheduler(0, judged=0)], id="no kube-scheduler share"),
        pytest.param([measured(), kube_scheduler(0)], id="a kube-scheduler share of 0"),
    ],
)
def test_no_ratio_without_both_shares(results: list[DraMeasurement]) -> None:
    report = render(MACHINE, WORKLOAD, results)
    assert "ratio: needs both schedulers, each with 2-4 GPU claims" in report
    assert to_json(MACHINE, WORKLOAD, results)["ratio"] is None


def test_the_report_names_failures_misses_and_attempts() -> None:
    unbound = measured()
    unbound.bound = 2
    report = render(MACHINE, WORKLOAD, [unbound, kube_scheduler(2)])
    assert "FAILED: batchsched bound 2 of 3 pods" in report
    assert "FAILED: batchsched: a device in two claims at once: dgx-0/gpu-1: bench/c" in report
    assert report.count("batchsched: split across islands with one free:") == 2
    assert "kube-scheduler  scheduling attempts: scheduled 3, unschedulable 9" in report
    assert "batchsched      scheduling attempts: -" in report
    sizes = line_of(report, "batchsched      by size:")
    assert "2 GPUs 1/2 (50.0%) in one island, 1 with one free on the node" in sizes
    assert sizes.endswith("split across islands while another node had one free: 2")


@pytest.mark.parametrize(
    ("splits", "listed", "more"),
    [
        pytest.param(3, 3, "", id="three misses are all listed"),
        pytest.param(4, 3, "batchsched: ... 1 more such claims (--json)", id="a fourth is counted"),
    ],
)
def test_more_than_three_misses_are_counted_not_listed(splits: int, listed: int, more: str) -> None:
    split = tuple(placement(f"s{i}", gpus(3, 4), (2, 2)) for i in range(splits))
    report = render(MACHINE, WORKLOAD, [measured(split)])
    assert report.count("batchsched: split across islands with one free:") == listed
    assert ("more such claims" in report) is bool(more)
    assert more in report


def test_a_claim_in_one_island_without_one_free_counts_only_in_the_first_share() -> None:
    """Its island had too few free GPUs before the write (a double allocation): it is in one
    island, but not among the claims whose node had an island free."""
    m = measured((placement("x", gpus(0, 1), (1, 1)), placement("y", gpus(4, 5), (4, 4))))
    assert (m.judged, m.one_island, m.island_free, m.one_island_where_free) == (2, 2, 1, 1)
    assert (m.share, m.share_where_free) == (1.0, 1.0)
    assert m.misses == []


def test_the_json_has_the_shares_of_each_scheduler() -> None:
    found = to_json(MACHINE, WORKLOAD, [measured(), kube_scheduler(2)])
    results = cast(list[dict[str, object]], found["results"])
    assert [(r["scheduler"], r["share"], r["share_where_free"]) for r in results] == [
        ("batchsched", pytest.approx(0.6), pytest.approx(0.75)),
        ("kube-scheduler", pytest.approx(0.4), pytest.approx(0.5)),
    ]


def test_the_workload_counts_pods_by_size_and_the_arrival_span() -> None:
    assert WORKLOAD.pods_by_gpus == {1: 1, 2: 2, 4: 1}
    assert list(WORKLOAD.pods_by_gpus) == [1, 2, 4]
    assert WORKLOAD.arrival_span_s == 3.0
    assert "4 pods with a claim from a template (1 x 1, 2 x 2, 1 x 4 GPUs)" in render(
        MACHINE, WORKLOAD, []
    )


KUBE_SCHEDULER_METRICS = """\
# HELP scheduler_schedule_attempts_total [STABLE] Number of attempts to schedule pods, by the result.
# TYPE scheduler_schedule_attempts_total counter
scheduler_schedule_attempts_total{profile="default-scheduler",result="error"} 0
scheduler_schedule_attempts_total{profile="default-scheduler",result="scheduled"} 120
scheduler_schedule_attempts_total{profile="default-scheduler",result="unschedulable"} 97
scheduler_scheduling_attempt_duration_seconds_bucket{le="0.001",profile="default-scheduler",result="scheduled"} 3
scheduler_scheduling_attempt_duration_seconds_count{profile="default-scheduler",result="scheduled"} 120
scheduler_pending_pods{queue="unschedulable"} 4
"""  # noqa: E501


def batchsched_metrics() -> str:
    metrics = SchedulerMetrics()
    attempts = metrics.schedule_attempts
    attempts.labels(result="scheduled", profile="gpu-scheduler").inc(118)
    attempts.labels(result="scheduled", profile="batch-scheduler").inc(2)
    attempts.labels(result="unschedulable", profile="gpu-scheduler").inc(41)
    metrics.attempt_duration.labels(result="scheduled", profile="gpu-scheduler").observe(0.01)
    return metrics.render().decode()


@pytest.mark.parametrize(
    ("text", "attempts"),
    [
        pytest.param(
            KUBE_SCHEDULER_METRICS,
            {"error": 0, "scheduled": 120, "unschedulable": 97},
            id="kube-scheduler's counter by result, its histogram and gauges left out",
        ),
        pytest.param(
            batchsched_metrics(),
            {"scheduled": 120, "unschedulable": 41},
            id="batchsched's counter summed over profiles, its _created series left out",
        ),
        pytest.param(
            'scheduler_schedule_attempts_total{result="scheduled",profile="p"} 1.2e+02\n',
            {"scheduled": 120},
            id="the result label first and a value in exponent form",
        ),
        pytest.param("", {}, id="no metrics no attempts"),
    ],
)
def test_attempts_by_result(text: str, attempts: dict[str, int]) -> None:
    assert attempts_by_result(text) == attempts
