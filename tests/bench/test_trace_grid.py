"""`bench trace --grid`: the evaluation grid, its command line, its table and one run of it."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from batchsched.bench import trace
from batchsched.bench.trace_grid import (
    GRID,
    REPORT_SEEDS,
    TUNING_SEEDS,
    grid_run,
    merge_runs,
    render_grid,
    report_merged,
    run_grid,
    summarize_grid,
)
from batchsched.sim.variants import parse_variant

PUBLISHED_TARGETS = [
    *(f"cpu{n}" for n in ("037", "050", "072", "100", "200", "235", "250", "300")),
    *(f"gpushare{n}" for n in (20, 40, 60, 80, 100)),
    *(f"gpuspec{n:02d}" for n in (5, 10, 20, 25, 33)),
    *(f"multigpu{n}" for n in (20, 30, 40, 50)),
    "default",
]


def test_the_grid_has_thirty_distinct_variants_none_of_them_a_published_target() -> None:
    variants = [parse_variant(name) for name in GRID]
    shapes = {(v.mix, v.cluster) for v in variants}
    published = {(v.mix, v.cluster) for v in map(parse_variant, PUBLISHED_TARGETS)}
    assert len(GRID) >= 30
    assert len(shapes) == len(GRID)
    assert not shapes & published


def test_the_grid_has_cluster_variants_with_more_cpu_and_with_fewer_gpus_per_node() -> None:
    clusters = [parse_variant(name).cluster for name in GRID]
    assert any(c.cpu_per_gpu > 1 for c in clusters)
    assert any(c.max_gpus_per_node is not None for c in clusters)


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    trace.add_parser(parser.add_subparsers())
    return parser.parse_args(["trace", *argv])


def test_the_command_reports_on_seeds_47_to_51_unless_told_and_tunes_on_42_to_46() -> None:
    assert (REPORT_SEEDS, TUNING_SEEDS) == ("47-51", "42-46")
    args = parse("--grid")
    assert args.grid is True
    assert trace.parse_seeds(args.seeds) == [47, 48, 49, 50, 51]
    assert parse().grid is False


def test_the_grid_takes_the_policies_of_the_published_variants_table() -> None:
    args = parse("--policies", "default,fgd,bestfit", "--grid", "--variants", "gpn4,cpu150")
    assert (args.grid, args.policies, args.variants) == (True, "default,fgd,bestfit", "gpn4,cpu150")


def test_an_unknown_policy_exits_2_with_a_message_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = parse("--grid", "--policies", "default,fgdx", "--out", str(tmp_path / "out.json"))
    assert run_grid(args, [47]) == 2
    assert "'fgdx'" in capsys.readouterr().err


def test_a_bad_variant_name_exits_2_with_a_message_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = parse("--grid", "--variants", "gpn4,cpux", "--out", str(tmp_path / "out.json"))
    assert run_grid(args, [47]) == 2
    assert "variant 'cpux'" in capsys.readouterr().err


def row(seed: int, at_100: float, at_130: float) -> dict[str, float | int | str | None]:
    return {"seed": seed, "gpu_alloc_pct_at_100": at_100, "gpu_alloc_pct_at_130": at_130}


RUNS = {
    "gpn4": {
        "default": [row(47, 90.0, 94.0), row(48, 92.0, 96.0)],
        "fgd": [row(47, 91.0, 94.0), row(48, 91.0, 95.0)],
    },
    "cpu150": {
        "default": [row(47, 80.0, 85.0)],
        "fgd": [row(47, 82.0, 88.0)],
    },
}


def test_the_summary_means_seeds_then_variants_and_counts_where_default_is_at_least_fgd() -> None:
    summary = summarize_grid(RUNS, ["default", "fgd"])
    assert summary["variants"]["gpn4"]["default"] == {"at_100": 91.0, "at_130": 95.0}
    assert summary["average"]["fgd"] == {"at_100": 86.5, "at_130": 91.25}
    at_130 = summary["default_ge_fgd"]["at_130"]
    assert (at_130["variants"], at_130["default_ge_fgd"], at_130["share"]) == (2, 1, 0.5)
    assert summary["default_ge_fgd"]["at_100"]["default_ge_fgd"] == 1  # gpn4's tie counts


def test_the_table_has_a_row_per_variant_the_average_and_the_default_vs_fgd_share() -> None:
    lines = render_grid(summarize_grid(RUNS, ["default", "fgd"]), ["default", "fgd"]).splitlines()
    assert lines[0].split()[:5] == ["variant", "default@100", "default@130", "fgd@100", "fgd@130"]
    assert lines[0].endswith("worst seed d-f@100 worst seed d-f@130")
    assert lines[1].split() == ["gpn4", "91.00", "95.00", "91.00", "94.50", "-1.00", "+0.00"]
    assert lines[3].split()[0] == "average"
    assert lines[-2].startswith("default >= fgd at 130 % arrived: 1 of 2 variants (share 0.50")


def test_the_worst_seed_margin_and_the_seeds_past_the_slack_are_counted() -> None:
    summary = summarize_grid(RUNS, ["default", "fgd"])
    assert summary["worst_seed"]["gpn4"] == {"at_100": -1.0, "at_130": 0.0}
    assert summary["worst_seed"]["cpu150"] == {"at_100": -2.0, "at_130": -3.0}
    # gpn4 seed 47 at 100 % and cpu150 seed 47 at both points are more than 0.1 below
    assert summary["default_ge_fgd"]["at_100"]["seeds_below_slack"] == 2
    assert summary["default_ge_fgd"]["at_130"] == {
        "variants": 2,
        "default_ge_fgd": 1,
        "share": 0.5,
        "seeds": 3,
        "seeds_below_slack": 1,
    }


def test_a_seed_exactly_one_tenth_below_is_within_the_slack() -> None:
    runs = {"gpn4": {"default": [row(47, 95.7, 95.7)], "fgd": [row(47, 95.8, 95.8)]}}
    counts = summarize_grid(runs, ["default", "fgd"])["default_ge_fgd"]["at_130"]
    assert counts["seeds_below_slack"] == 0


def test_merged_files_join_policies_and_refuse_a_seed_that_differs(tmp_path: Path) -> None:
    mine = tmp_path / "default.json"
    mine.write_text(json.dumps({"runs": {v: {"default": by["default"]} for v, by in RUNS.items()}}))
    theirs = tmp_path / "both.json"
    theirs.write_text(json.dumps({"runs": RUNS}))
    runs, policies = merge_runs([str(mine), f"{theirs}:fgd"])
    assert policies == ["default", "fgd"]
    assert runs == RUNS
    changed = {"gpn4": {"default": [row(47, 90.0, 94.5)]}}
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"runs": changed}))
    with pytest.raises(ValueError, match="gpn4 default seed 47 differs"):
        merge_runs([str(mine), str(other)])


def test_the_merged_table_is_printed_and_a_missing_file_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    saved = tmp_path / "both.json"
    saved.write_text(json.dumps({"runs": RUNS}))
    assert report_merged([str(saved)]) == 0
    assert "single seeds more than 0.1 below fgd at 130 %: 1 of 3" in capsys.readouterr().out
    assert report_merged([str(tmp_path / "none.json")]) == 2
    assert "none.json" in capsys.readouterr().err


def test_without_fgd_there_is_no_comparison_line() -> None:
    only_default = {v: {"default": by["default"]} for v, by in RUNS.items()}
    text = render_grid(summarize_grid(only_default, ["default"]), ["default"])
    assert "fgd" not in text


def test_one_grid_run_places_a_generated_variant_on_a_reshaped_cluster(tmp_path: Path) -> None:
    nodes = tmp_path / "nodes.csv"
    nodes.write_text("sn,cpu_milli,memory_mib,gpu,model\nn1,64000,262144,8,G2\n")
    pods = tmp_path / "pods.csv"
    lines = ["name,cpu_milli,memory_mib,num_gpu,gpu_milli"]
    lines += [f"p{i},4000,8192,1,{500 if i % 2 else 1000}" for i in range(8)]
    lines += ["big,8000,8192,8,1000", "cpu,2000,1024,0,0"]
    pods.write_text("\n".join(lines) + "\n")
    result = grid_run("cpu100+gpn2", "default", 47, (str(nodes), str(pods)), None, 1.3)
    assert result["left_out"] == 1  # the 8-GPU pod: no node has more than 2 GPUs
    assert isinstance(result["gpu_alloc_pct_at_100"], float)
    assert result["gpu_alloc_pct_at_100"] > 50
