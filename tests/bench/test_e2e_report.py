"""The e2e bench's report: figures per scheduler and mode, a ratio per mode."""

from __future__ import annotations

import argparse

import pytest

from batchsched.bench.e2e_report import Measurement, ratio, render, to_json
from batchsched.bench.harness import parse_modes, round_order
from batchsched.bench.harness_report import Machine


def measured(
    scheduler: str, mode: str, pods_per_second: float, round_: int = 1, cpu: float = 1.0
) -> Measurement:
    return Measurement(
        scheduler=scheduler,
        pods=100,
        bound=100,
        seconds=100 / pods_per_second,
        pods_per_second=pods_per_second,
        create_seconds=1.0,
        creates_per_second=100.0,
        latency_p50_ms=10.0,
        latency_p99_ms=20.0,
        mode=mode,
        cpu_seconds={"scheduler": cpu},
        round=round_,
    )


RESULTS = [
    measured("batchsched", "stream", 90.0),
    measured("batchsched", "backlog", 300.0),
    measured("kube-scheduler", "stream", 100.0),
    measured("kube-scheduler", "backlog", 200.0),
]


def test_each_mode_gets_its_own_ratio() -> None:
    assert ratio(RESULTS, "stream") == pytest.approx(0.9)
    assert ratio(RESULTS, "backlog") == pytest.approx(1.5)


def test_the_report_names_the_mode_of_each_row_and_each_ratio() -> None:
    machine = Machine(cpus=2, cpu_model="test", python="CPython", kube="v1.34.4", load_average=0.5)
    text = render(machine, RESULTS, 10, 100, 8)
    assert "(pods/s, stream): 0.90x" in text and "(pods/s, backlog): 1.50x" in text
    assert any(line.startswith("batchsched      backlog") for line in text.splitlines())
    body = to_json(machine, RESULTS, 10, 100, 8)
    assert body["ratio_pods_per_second_by_mode"] == {
        "stream": pytest.approx(0.9),
        "backlog": pytest.approx(1.5),
    }


@pytest.mark.parametrize(
    ("text", "modes"),
    [("stream", ["stream"]), ("stream,backlog", ["stream", "backlog"]), ("backlog", ["backlog"])],
)
def test_modes_are_read_from_a_comma_list(text: str, modes: list[str]) -> None:
    assert parse_modes(text) == modes


@pytest.mark.parametrize("text", ["", "batch", "stream,warp"])
def test_an_unknown_mode_is_refused(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="modes are stream and backlog"):
        parse_modes(text)


def test_rounds_get_a_ratio_each_and_their_spread() -> None:
    """Three rounds: each round's batchsched row is divided by that round's kube-scheduler
    row, never another round's, and the spread gives min, median and max."""
    results = [
        measured("batchsched", "backlog", 300.0, 1, cpu=1.0),
        measured("kube-scheduler", "backlog", 200.0, 1, cpu=2.0),
        measured("kube-scheduler", "backlog", 250.0, 2, cpu=2.0),
        measured("batchsched", "backlog", 250.0, 2, cpu=1.5),
        measured("batchsched", "backlog", 330.0, 3, cpu=1.0),
        measured("kube-scheduler", "backlog", 300.0, 3, cpu=4.0),
    ]
    machine = Machine(cpus=2, cpu_model="test", python="CPython", kube="v1.34.4", load_average=0.5)
    text = render(machine, results, 10, 100, 8)
    assert (
        "backlog  pods/s                1.50x 1.00x 1.10x   min 1.00x, median 1.10x, max 1.50x"
        in text
    )
    assert "scheduler CPU ms/pod  0.50x 0.75x 0.25x   min 0.25x, median 0.50x" in text
    assert "batchsched backlog r3" in text
    assert any(line.startswith("kube-scheduler  backlog      2 ") for line in text.splitlines())
    body = to_json(machine, results, 10, 100, 8)
    rounds = body["ratios_by_round"]
    assert isinstance(rounds, dict)
    assert rounds["backlog"]["pods/s"] == [
        pytest.approx(1.5),
        pytest.approx(1.0),
        pytest.approx(1.1),
    ]


def test_one_round_reports_as_before_without_a_round_column() -> None:
    machine = Machine(cpus=2, cpu_model="test", python="CPython", kube="v1.34.4", load_average=0.5)
    text = render(machine, RESULTS, 10, 100, 8)
    assert "round" not in text and "median" not in text


def test_rounds_alternate_which_scheduler_goes_first() -> None:
    names = ["batchsched", "kube-scheduler"]
    assert [round_order(names, n)[0] for n in (1, 2, 3)] == [
        "batchsched",
        "kube-scheduler",
        "batchsched",
    ]
