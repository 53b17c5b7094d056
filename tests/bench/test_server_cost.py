"""The server-cost bench's pure parts: levels, the Event it posts, the report."""

from __future__ import annotations

import argparse

import pytest

from batchsched.bench.server_cost import Level, event_body, parse_levels, report


def test_levels_parse_and_refuse_nonsense() -> None:
    assert parse_levels("4,32, 96") == [4, 32, 96]
    for bad in ("", "0,4", "-1"):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_levels(bad)


def test_event_names_are_unique_per_tag_and_index() -> None:
    names = {
        event_body(i, tag)["metadata"]["name"]  # type: ignore[index]
        for tag in ("r0-c4", "r1-c4")
        for i in range(3)
    }
    assert len(names) == 6
    body = event_body(7, "t")
    assert body["reason"] == "Scheduled"
    assert body["regarding"] == {
        "apiVersion": "v1",
        "kind": "Pod",
        "namespace": "default",
        "name": "p7",
    }


def test_report_gives_range_and_median_per_level() -> None:
    got = {
        4: [Level(4, 1.8, 0.6, 600.0), Level(4, 1.6, 0.5, 700.0)],
        96: [Level(96, 1.2, 0.17, 1100.0), Level(96, 1.4, 0.19, 900.0), Level(96, 1.3, 0.18, 1000)],
    }
    lines = report(got).splitlines()
    assert lines[1].split() == ["4", "1.600-1.800", "(med", "1.700)", "0.500-0.600", "650"]
    assert lines[2].split() == ["96", "1.200-1.400", "(med", "1.300)", "0.170-0.190", "1000"]
