"""`python -m batchsched.bench trace`: seed ranges and the table beside the paper's numbers."""

from __future__ import annotations

import pytest

from batchsched.bench.trace import parse_seeds
from batchsched.bench.trace_paper import PAPER_AT_130
from batchsched.bench.trace_table import Row, default_ge_fgd, render, summarize


@pytest.mark.parametrize(
    ("text", "seeds"),
    [("42-51", list(range(42, 52))), ("42,45", [42, 45]), ("42-43,50", [42, 43, 50])],
    ids=["a range is inclusive", "a list is kept in order", "ranges and single seeds mix"],
)
def test_seed_lists(text: str, seeds: list[int]) -> None:
    assert parse_seeds(text) == seeds


def row(seed: int, at_100: float, at_130: float) -> Row:
    return {"seed": seed, "gpu_alloc_pct_at_100": at_100, "gpu_alloc_pct_at_130": at_130}


def test_the_table_puts_each_policys_mean_beside_the_papers_figures() -> None:
    runs = {
        "default": {
            "default": [row(42, 94.0, 95.0), row(43, 95.0, 96.0)],
            "fgd": [row(42, 93.0, 95.5), row(43, 93.0, 95.5)],
        }
    }
    summary = summarize(runs)
    cell = summary["default"]["policies"]["default"]
    assert (cell["gpu_alloc_pct_at_100"], cell["gpu_alloc_pct_at_130"]) == (94.5, 95.5)
    assert cell["sd_at_130"] == 0.71
    assert summary["default"]["policies"]["fgd"]["paper_at_130"] == PAPER_AT_130["default"]["FGD"]
    lines = render(summary, ["default", "fgd"]).splitlines()
    assert lines[0].split() == [
        "variant", "default@100", "default@130", "fgd@100", "fgd@130", "paper", "FGD", "paper", "BF"
    ]  # fmt: skip
    assert lines[1].split() == ["default", "94.50", "95.50", "93.00", "95.50", "95.39", "93.08"]
    assert lines[2].split() == ["average", "94.50", "95.50", "93.00", "95.50"]


def test_the_table_counts_the_variants_where_default_is_at_least_fgd() -> None:
    runs = {
        "default": {"default": [row(42, 94.0, 96.0)], "fgd": [row(42, 95.0, 95.0)]},
        "cpu050": {"default": [row(42, 94.0, 95.0)], "fgd": [row(42, 93.0, 95.0)]},
        "cpu100": {"default": [row(42, 90.0, 90.0)], "fgd": [row(42, 93.0, 95.0)]},
    }
    summary = summarize(runs)
    assert default_ge_fgd(summary, "gpu_alloc_pct_at_130") == (2, 3)
    assert default_ge_fgd(summary, "gpu_alloc_pct_at_100") == (1, 3)
    text = render(summary, ["default", "fgd"])
    assert "default >= fgd at 130 % arrived: 2 of 3 variants (67 %)" in text
    assert "default >= fgd at 100 % arrived: 1 of 3 variants (33 %)" in text
    assert "default >= fgd" not in render(summary, ["default"])


def test_the_paper_table_covers_the_seventeen_variants_with_fgd_and_best_fit() -> None:
    assert len(PAPER_AT_130) == 17
    assert all({"FGD", "BestFit"} <= set(policies) for policies in PAPER_AT_130.values())
