"""`python -m batchsched.bench trace`: seed ranges and the table beside the paper's numbers."""

from __future__ import annotations

import pytest

from batchsched.bench.trace import parse_seeds, render, summarize
from batchsched.bench.trace_paper import PAPER_AT_130


@pytest.mark.parametrize(
    ("text", "seeds"),
    [("42-51", list(range(42, 52))), ("42,45", [42, 45]), ("42-43,50", [42, 43, 50])],
    ids=["a range is inclusive", "a list is kept in order", "ranges and single seeds mix"],
)
def test_seed_lists(text: str, seeds: list[int]) -> None:
    assert parse_seeds(text) == seeds


def test_the_table_puts_our_mean_beside_the_papers_policies() -> None:
    runs = {
        "default": [
            {"seed": 42, "gpu_alloc_pct_at_130": 95.0},
            {"seed": 43, "gpu_alloc_pct_at_130": 96.0},
        ]
    }
    summary = summarize(runs)
    assert summary["default"]["gpu_alloc_pct_at_130"] == 95.5
    assert summary["default"]["paper"] == PAPER_AT_130["default"]
    line = render(summary).splitlines()[1]
    assert line.split() == ["default", "95.50", "0.71", "95.39", "93.08", "+0.11"]


def test_the_paper_table_covers_the_seventeen_variants_with_fgd_and_best_fit() -> None:
    assert len(PAPER_AT_130) == 17
    assert all({"FGD", "BestFit"} <= set(policies) for policies in PAPER_AT_130.values())
