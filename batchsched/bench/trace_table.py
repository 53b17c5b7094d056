"""`bench trace`'s summary: per variant and policy, the mean GPU allocation at 100 % and 130 %
arrived over the seeds, beside the paper's FGD and BestFit at 130 %."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Final, TypedDict

from batchsched.bench.trace_paper import PAPER_AT_130, PAPER_SOURCE

Row = dict[str, float | int | str | None]
# variant -> policy -> one row per seed
Runs = Mapping[str, Mapping[str, Sequence[Row]]]
AT_100: Final = "gpu_alloc_pct_at_100"
AT_130: Final = "gpu_alloc_pct_at_130"
# Our policy names -> the paper's (trace_paper.PAPER_AT_130's keys).
PAPER_NAMES: Final = {
    "fgd": "FGD",
    "bestfit": "BestFit",
    "dotproduct": "DotProd",
    "gpupacking": "Packing",
    "gpuclustering": "Clustering",
    "random": "Random",
}


class PolicySummary(TypedDict):
    seeds: list[int]
    gpu_alloc_pct_at_100: float | None
    gpu_alloc_pct_at_130: float | None
    sd_at_130: float
    paper_at_130: float | None  # the paper's figure for this policy and variant, where known


class VariantSummary(TypedDict):
    policies: dict[str, PolicySummary]
    paper: dict[str, float]


def _values(rows: Sequence[Row], key: str) -> list[float]:
    return [float(v) for r in rows if isinstance(v := r.get(key), (int, float))]


def _mean(values: Sequence[float]) -> float | None:
    return round(statistics.mean(values), 2) if values else None


def summarize(runs: Runs) -> dict[str, VariantSummary]:
    summary: dict[str, VariantSummary] = {}
    for variant, by_policy in runs.items():
        paper = PAPER_AT_130.get(variant, {})
        policies: dict[str, PolicySummary] = {}
        for policy, rows in by_policy.items():
            at_130 = _values(rows, AT_130)
            paper_name = PAPER_NAMES.get(policy)
            policies[policy] = {
                "seeds": sorted(int(s) for r in rows if isinstance(s := r.get("seed"), int)),
                AT_100: _mean(_values(rows, AT_100)),
                AT_130: _mean(at_130),
                "sd_at_130": round(statistics.stdev(at_130), 2) if len(at_130) > 1 else 0.0,
                "paper_at_130": paper.get(paper_name) if paper_name else None,
            }
        summary[variant] = {"policies": policies, "paper": paper}
    return summary


def render(summary: Mapping[str, VariantSummary], policies: Sequence[str]) -> str:
    """One line per variant: each policy's mean at 100 % and 130 % arrived, the paper's FGD and
    BestFit at 130 %; then the average over the variants and, with default and fgd both run,
    on how many variants default is at least fgd."""
    cells = [f"{p + '@100':>18} {p + '@130':>18}" for p in policies]
    lines = [f"{'variant':<12} {' '.join(cells)} {'paper FGD':>10} {'paper BF':>9}"]
    for variant, row in summary.items():
        values = " ".join(_pair(row["policies"].get(p)) for p in policies)
        paper = row["paper"]
        lines.append(
            f"{variant:<12} {values} {_num(paper.get('FGD')):>10} {_num(paper.get('BestFit')):>9}"
        )
    averages = " ".join(
        f"{_num(_mean(_column(summary, p, AT_100))):>18} "
        f"{_num(_mean(_column(summary, p, AT_130))):>18}"
        for p in policies
    )
    lines.append(f"{'average':<12} {averages}")
    if "default" in policies and "fgd" in policies:
        lines.extend(_default_vs_fgd(summary))
    lines.append(f"paper: {PAPER_SOURCE}")
    return "\n".join(lines)


def _pair(cell: PolicySummary | None) -> str:
    if cell is None:
        return f"{'-':>18} {'-':>18}"
    return f"{_num(cell[AT_100]):>18} {_num(cell[AT_130]):>18}"


def _column(summary: Mapping[str, VariantSummary], policy: str, key: str) -> list[float]:
    found: list[float] = []
    for row in summary.values():
        cell = row["policies"].get(policy)
        value = cell.get(key) if cell else None
        if isinstance(value, (int, float)):
            found.append(float(value))
    return found


def default_ge_fgd(summary: Mapping[str, VariantSummary], key: str) -> tuple[int, int]:
    """(variants where default's mean >= fgd's, variants with both)."""
    wins = both = 0
    for row in summary.values():
        default, fgd = row["policies"].get("default"), row["policies"].get("fgd")
        ours = default.get(key) if default else None
        theirs = fgd.get(key) if fgd else None
        if isinstance(ours, (int, float)) and isinstance(theirs, (int, float)):
            both += 1
            wins += ours >= theirs
    return wins, both


def _default_vs_fgd(summary: Mapping[str, VariantSummary]) -> list[str]:
    lines = []
    for key, label in ((AT_100, "100"), (AT_130, "130")):
        wins, both = default_ge_fgd(summary, key)
        share = f"{100 * wins / both:.0f} %" if both else "-"
        lines.append(f"default >= fgd at {label} % arrived: {wins} of {both} variants ({share})")
    return lines


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"
