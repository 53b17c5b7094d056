"""What topology-e2e prints and writes (bench/e2e_topology_report.py): the table, the ratios
batchsched/each, the goal said as met or NOT met, and the command line."""

from __future__ import annotations

import argparse
import dataclasses
import json

import pytest

from batchsched.bench import e2e_topology
from batchsched.bench.e2e_topology_measure import Outcome
from batchsched.bench.e2e_topology_report import (
    PhaseFigures,
    TopologyMeasurement,
    goal_lines,
    measurement,
    ratios,
    render,
    table,
    to_json,
)
from batchsched.bench.harness_report import Machine
from batchsched.gang.topology import DEFAULT_LEVELS
from batchsched.sim.tightness import TightnessSummary

MACHINE = Machine(cpus=2, cpu_model="test cpu", python="3.11", kube="v1.36.3", load_average=0.5)
SUMMARY = TightnessSummary(
    levels=DEFAULT_LEVELS,
    started=200,
    unstarted=0,
    in_tightest=190,
    preferred=120,
    preferred_in_tightest=115,
    required=80,
    honoured=80,
    placed_by_level=(150, 45, 5, 0, 0),
    feasible_by_level=(155, 45, 0, 0, 0),
    wait_p50=0.0,
    wait_p99=0.0,
    gpu_allocation=0.0,
    gpu_at_last_arrival=0.0,
)
OUTCOME = Outcome(
    complete=200,
    partial=0,
    unstarted=0,
    latencies=(0.5, 1.0, 2.0),
    summary=SUMMARY,
    bound_gpus=3600,
    total_gpus=4096,
)
FIGURES = PhaseFigures(
    bound_pods=700,
    seconds=10.0,
    create_seconds=9.5,
    cpu_seconds={"scheduler": 5.0, "other": 0.5, "machine": 20.0},
    api_writes={"POST pods/binding": 700},
    bench_watch_reconnects=0,
    attempts={"scheduled": 700, "unschedulable": 3},
)


def result(name: str, outcome: Outcome = OUTCOME, seconds: float = 10.0) -> TopologyMeasurement:
    phase = dataclasses.replace(FIGURES, seconds=seconds)
    return measurement(name, "upstream", outcome, 724, phase)


def looser(in_tightest: int, complete: int = 200) -> Outcome:
    summary = dataclasses.replace(SUMMARY, in_tightest=in_tightest, started=complete)
    return dataclasses.replace(OUTCOME, summary=summary, complete=complete)


OURS = result("batchsched")
KUBE = result("kube-scheduler", looser(80, complete=190), seconds=19.0)
COSCHED = result("coscheduling", looser(0, complete=180), seconds=9.0)


def test_a_measurement_takes_the_outcome_and_the_phase() -> None:
    assert (OURS.complete_gangs, OURS.gangs, OURS.pods, OURS.bound_pods) == (200, 200, 724, 700)
    assert OURS.gangs_per_second == 20.0
    assert (OURS.gang_p50_ms, OURS.gang_p99_ms) == (1000.0, 2000.0)
    assert OURS.tightest_share == 0.95 and OURS.honoured_share == 1.0
    assert OURS.gpu_allocation == 3600 / 4096


def test_the_table_has_one_column_per_scheduler() -> None:
    lines = table([OURS, KUBE, COSCHED])
    assert lines[0].split() == ["batchsched", "kube-scheduler", "coscheduling"]
    row = next(line for line in lines if line.startswith("in tightest feasible domain"))
    assert row.split()[-6:] == ["190/200", "95.0%", "80/190", "42.1%", "0/180", "0.0%"]
    row = next(line for line in lines if line.startswith("gangs/s"))
    assert row.split()[-3:] == ["20.00", "10.00", "20.00"]
    row = next(line for line in lines if line.startswith("attempts"))
    assert "700 / 3 / 0" in row


def test_ratios_are_batchsched_over_each_baseline_and_none_over_a_zero() -> None:
    found = ratios([OURS, KUBE, COSCHED])
    assert found["kube-scheduler"]["gangs_per_second"] == pytest.approx(2.0)
    assert found["kube-scheduler"]["tightest_share"] == pytest.approx(0.95 / (80 / 190))
    assert found["coscheduling"]["gangs_per_second"] == pytest.approx(1.0)
    assert found["coscheduling"]["tightest_share"] is None


def test_the_goal_is_met_at_equal_throughput_and_the_highest_share() -> None:
    assert goal_lines([OURS, KUBE, COSCHED]) == [
        "goal: gangs/s >= 1.0x both baselines: met (2.00x kube-scheduler, 1.00x coscheduling)",
        "goal: highest tightness share of the three: met "
        "(batchsched 95.0%, kube-scheduler 42.1%, coscheduling 0.0%)",
    ]


def test_the_goal_is_not_met_when_a_baseline_is_faster_or_tighter() -> None:
    fast = result("coscheduling", seconds=5.0)  # 40 gangs/s, and as tight as batchsched
    tight = result("kube-scheduler", looser(199))
    lines = goal_lines([OURS, tight, fast])
    assert lines[0].startswith("goal: gangs/s >= 1.0x both baselines: NOT met (1.00x")
    assert lines[1].startswith("goal: highest tightness share of the three: NOT met")


def test_the_goal_is_not_judged_without_all_three() -> None:
    assert goal_lines([OURS, KUBE]) == ["goal: not judged (coscheduling did not run)"]


def test_the_report_says_ratios_goal_and_who_was_disturbed() -> None:
    busy = dataclasses.replace(KUBE, cpu_seconds={"scheduler": 5.0, "other": 8.0, "machine": 20})
    text = render(MACHINE, [OURS, busy, COSCHED], "workload: test")
    assert "ratio batchsched / kube-scheduler: gangs/s 2.00x" in text
    assert "ratio batchsched / coscheduling: gangs/s 1.00x, tightness share -," in text
    assert "during kube-scheduler's run: its figures are disturbed" in text
    assert "during batchsched's run" not in text
    assert text.splitlines()[-1].startswith("goal: highest tightness share of the three: met")


def test_the_json_has_each_result_its_shares_the_ratios_and_the_goal() -> None:
    body = json.loads(json.dumps(to_json(MACHINE, [OURS, KUBE, COSCHED], {"gangs": 200})))
    assert body["workload"] == {"gangs": 200}
    assert body["results"][0]["tightest_share"] == 0.95
    assert body["results"][2]["placed_by_level"] == [150, 45, 5, 0, 0]
    assert body["ratios"]["coscheduling"]["tightest_share"] is None
    assert body["goal"][0].endswith("(2.00x kube-scheduler, 1.00x coscheduling)")


def test_the_command_line_defaults_to_the_issues_size() -> None:
    parser = argparse.ArgumentParser()
    e2e_topology.add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["topology-e2e"])
    assert (args.racks, args.gangs, args.fill, args.seed) == (64, None, 0.9, 1)
    assert args.k8s_version == "v1.36.3" and not args.baselines_first
    small = parser.parse_args(["topology-e2e", "--racks", "4", "--gangs", "10", "--seed", "3"])
    assert (small.racks, small.gangs, small.seed) == (4, 10, 3)
