"""The gang bench's report: writes per gang are the scheduler's, not the bench's creates."""

from __future__ import annotations

from batchsched.bench.e2e_gang_report import GangMeasurement, writes_per_gang_lines


def measurement(scheduler: str, writes: dict[str, int]) -> GangMeasurement:
    return GangMeasurement(
        scheduler, "200x3", 200, 3, 600, 200, 0, 20.0, 10.0, 30.0, 15.0, 100.0, 300.0,
        api_writes=writes,
    )  # fmt: skip


def test_writes_per_gang_leave_out_the_benchs_creates_and_count_the_rest() -> None:
    ours = measurement(
        "batchsched",
        {
            "POST pods": 600,
            "POST podgroups": 200,
            "POST pods/binding": 600,
            "PATCH podgroups/status": 300,
            "POST events": 100,
        },
    )
    assert ours.scheduler_writes == {
        "POST pods/binding": 600,
        "PATCH podgroups/status": 300,
        "POST events": 100,
    }
    assert ours.writes_per_gang == 5.0
    lines = writes_per_gang_lines([ours, measurement("coscheduling", {})])
    assert len(lines) == 3  # a blank line, the title, one run (the other counted nothing)
    assert lines[2].split()[:3] == ["batchsched", "200x3", "5.00"]
    assert "PATCH podgroups/status 1.50" in lines[2]
