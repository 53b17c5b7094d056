"""The topology bench's table (bench/topology.py): both runs side by side, the ratio of their
tightness shares, and the command line."""

from __future__ import annotations

import argparse
import dataclasses
import re

import pytest

from batchsched.bench import topology
from batchsched.bench.topology import Column, format_table
from batchsched.gang.topology import DEFAULT_LEVELS, ZONE_LABEL
from batchsched.sim.tightness import TightnessSummary

ON = TightnessSummary(
    levels=DEFAULT_LEVELS,
    started=300,
    unstarted=0,
    in_tightest=240,
    preferred=170,
    preferred_in_tightest=120,
    required=130,
    honoured=130,
    placed_by_level=(200, 40, 2, 58, 0),
    feasible_by_level=(220, 60, 15, 5, 0),
    wait_p50=0.0,
    wait_p99=161.5,
    gpu_allocation=0.588,
    gpu_at_last_arrival=0.91,
)
OFF = dataclasses.replace(ON, in_tightest=60, honoured=13, unstarted=2)


def table(on: TightnessSummary = ON, off: TightnessSummary = OFF) -> list[str]:
    return format_table([Column("domain choice", on, 1024, 15.4), Column("blind", off, 851, 8.2)])


def row(lines: list[str], name: str) -> str:
    (found,) = [line for line in lines if line.startswith(name)]
    return found


@pytest.mark.parametrize(
    ("name", "cells"),
    [
        ("gangs started", ("300", "300 (2 never)")),
        ("in tightest feasible domain", ("240/300 80.0%", "60/300 20.0%")),
        ("required honoured", ("130/130 100.0%", "13/130 10.0%")),
        ("placed within one gpu.clique", ("200", "200")),
        ("placed within one cluster", ("0", "0")),
        ("tightest feasible: rack", ("60", "60")),
        ("gang wait p50 / p99", ("0 s / 162 s", "0 s / 162 s")),
        ("GPU allocation, mean while arriving", ("58.8%", "58.8%")),
        ("GPU allocation at last arrival", ("91.0%", "91.0%")),
        ("gang attempts", ("1024", "851")),
        ("wall", ("15.4 s", "8.2 s")),
    ],
    ids=[
        "started gangs, with those that never started",
        "the share in the tightest feasible domain, as a count and a share",
        "required requests honoured",
        "gangs per placed level, the tightest first",
        "and the whole cluster last",
        "gangs per tightest feasible level",
        "waits rounded to seconds",
        "mean GPU allocation while gangs arrived",
        "GPU allocation once the last gang arrived",
        "gang attempts per run",
        "wall time per run",
    ],
)
def test_each_row_shows_both_runs_in_order(name: str, cells: tuple[str, str]) -> None:
    # Columns are right-aligned and at least two spaces apart; a cell has single spaces only.
    assert tuple(re.split(r"\s{2,}", row(table(), name).strip())[1:]) == cells


def test_the_header_names_the_runs_and_columns_line_up() -> None:
    lines = table()
    assert lines[0].split() == ["domain", "choice", "blind"]
    assert len({len(line) for line in lines[:-1]}) == 1


def test_the_last_line_is_the_ratio_of_tightness_shares() -> None:
    assert table()[-1] == "tightness share, domain choice / blind: 80.0% / 20.0% = 4.00x"


def test_a_baseline_with_no_gang_in_its_tightest_domain_gives_an_infinite_ratio() -> None:
    assert table(off=dataclasses.replace(OFF, in_tightest=0))[-1].endswith("= inf")


def test_no_required_gangs_shows_a_dash() -> None:
    lines = table(on=dataclasses.replace(ON, required=0, honoured=0))
    assert row(lines, "required honoured").split()[2] == "-"


def test_the_command_line_defaults_are_the_brief_s_cluster_and_workload() -> None:
    parser = argparse.ArgumentParser()
    topology.add_parser(parser.add_subparsers())
    args = parser.parse_args(["topology", "--preferred", "zone", "--runtime", "100-200"])
    assert (args.racks, args.nodes_per_rack, args.gpus_per_node) == (64, 8, 8)
    assert (args.clique_nodes, args.racks_per_block, args.gangs) == (2, 8, 300)
    mix = topology._mix(args)
    assert mix.preferred == ZONE_LABEL and mix.runtime == (100.0, 200.0)
    assert mix.clique_gpus == 16
