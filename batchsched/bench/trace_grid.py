"""`bench trace --grid`: placement policies on generated trace variants, the evaluation set.

The grid is 34 variants made from the default pod list and the GPU node list by
batchsched.sim.variants: mixes none of the published files has (CPU-heavier with sharing,
model-restricted with multi-GPU, all four shares moved at once, ...) and cluster variants (more
CPU per GPU, at most 4 or 2 GPUs per node). Each run draws its variant from its seed and then
samples it by the paper's method, so five seeds are five draws of each variant.

Tuning discipline (docs/benchmarks.md): parameters are chosen on seeds 42-46 of the published
variants only (`bench trace --seeds 42-46`); every reported figure uses seeds 47-51, on the
published variants and on this grid, which no parameter was tuned on.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from functools import cache
from pathlib import Path
from typing import Final, TypedDict

from batchsched.model.node import NodeView
from batchsched.sim.policy_run import POLICY_NAMES, parse_policies, run_policy
from batchsched.sim.trace import (
    TraceError,
    TracePod,
    embedded_default_pods,
    embedded_gpu_nodes,
    read_nodes,
    read_pods,
)
from batchsched.sim.variants import (
    fits_some_node,
    parse_variant,
    resample,
    reshape_cluster,
)

TUNING_SEEDS: Final = "42-46"
# A run draws its variant with seed + this and samples it with seed, so the two draws do not
# reuse one random stream.
VARIANT_SEED_OFFSET: Final = 1_000_000
REPORT_SEEDS: Final = "47-51"

# None of these is one of the published files' targets (cpu037..cpu300, gpushare20..100,
# gpuspec05..33, multigpu20..50); tests/bench/test_trace_grid.py checks it.
GRID: Final[tuple[str, ...]] = (
    # one share moved to a value no file has
    "cpu150",
    "cpu400",
    "gpushare30",
    "gpushare50",
    "gpushare70",
    "gpushare90",
    "gpuspec15",
    "gpuspec50",
    "multigpu10",
    "multigpu35",
    "multigpu60",
    # CPU-heavier with more sharing
    "cpu200+gpushare60",
    "cpu300+gpushare80",
    "cpu250+gpushare40",
    "cpu050+gpushare70",
    # model-restricted with multi-GPU
    "gpuspec33+multigpu30",
    "gpuspec20+multigpu40",
    "gpuspec50+multigpu20",
    # sharing with multi-GPU, sharing with models, CPU with models
    "gpushare60+multigpu20",
    "gpushare40+multigpu30",
    "gpushare50+gpuspec33",
    "cpu200+gpuspec33",
    # all four at once
    "cpu250+gpushare50+gpuspec25+multigpu25",
    "cpu100+gpushare70+gpuspec33+multigpu15",
    # cluster variants: more CPU per GPU, fewer GPUs per node, each with a mix
    "cpux1.5",
    "cpux2",
    "gpn4",
    "gpn2",
    "cpu300+cpux2",
    "cpu200+gpushare60+cpux1.5",
    "gpushare60+gpn4",
    "gpushare80+gpn2",
    "gpuspec33+gpn4",
    "multigpu30+cpux1.5+gpn4",
)

Row = dict[str, float | int | str | None]
Runs = dict[str, dict[str, list[Row]]]  # variant -> policy -> one row per seed


@cache
def _inputs(nodes_csv: str, pods_csv: str) -> tuple[list[NodeView], list[TracePod]]:
    """Each worker reads the base files once."""
    return read_nodes(Path(nodes_csv)), read_pods(Path(pods_csv))


def grid_run(
    variant: str,
    policy: str,
    seed: int,
    base: tuple[str, str],
    config: str | None,
    inflation: float,
) -> Row:
    """One policy on one generated variant and seed, in a worker process."""
    started, cpu_started = time.perf_counter(), time.process_time()
    base_nodes, base_pods = _inputs(*base)
    shape = parse_variant(variant)
    nodes = reshape_cluster(base_nodes, shape.cluster)
    drawn = resample(base_pods, shape.mix, VARIANT_SEED_OFFSET + seed)
    pods = fits_some_node(drawn, nodes)
    outcome = run_policy(
        policy, nodes, pods, seed=seed, inflation=inflation, config=Path(config) if config else None
    )
    return {
        **outcome.row(),
        "variant_pods": len(pods),
        "left_out": len(drawn) - len(pods),
        "wall_s": round(time.perf_counter() - started, 2),
        "cpu_s": round(time.process_time() - cpu_started, 2),
    }


def run_grid(args: argparse.Namespace, seeds: list[int]) -> int:
    """`bench trace --grid`: every variant x policy x seed, a JSON as it goes, then the table."""
    try:
        variants = [v for v in (args.variants or "").split(",") if v] or list(GRID)
        for name in variants:
            parse_variant(name)
        policies = parse_policies(getattr(args, "policies", None) or "default")
        pods = args.traces / "openb_pod_list_default.csv" if args.traces else None
        base = (str(args.nodes or embedded_gpu_nodes()), str(pods or embedded_default_pods()))
        _inputs(*base)
    except (ValueError, TraceError) as err:  # VariantError and UnknownPolicy are ValueErrors
        print(f"bench trace --grid: {err}", file=sys.stderr)
        return 2
    header = {
        "method": "paper (Weng et al., ATC '23) on generated variants (batchsched.sim.variants)",
        "nodes": base[0],
        "base_pods": base[1],
        "inflation": args.inflation,
        "config": str(args.config) if args.config else None,
        "seeds": seeds,
        "tuning_seeds": TUNING_SEEDS,
    }
    runs: Runs = {v: {p: [] for p in policies} for v in variants}
    # Seed-major, so a run stopped early still covers every variant and policy.
    jobs = [(v, p, s) for s in seeds for v in variants for p in policies]
    config = str(args.config) if args.config else None
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        futures = {
            pool.submit(grid_run, v, p, s, base, config, args.inflation): (v, p, s)
            for v, p, s in jobs
        }
        for done, future in enumerate(as_completed(futures), 1):
            variant, policy, seed = futures[future]
            row = future.result()
            runs[variant][policy].append(row)
            print(
                f"[{done}/{len(jobs)}] {variant} {policy} seed {seed}: "
                f"{row['gpu_alloc_pct_at_130']}% at 130% ({row['cpu_s']} s CPU)",
                file=sys.stderr,
            )
            _write(args.out, {**header, "runs": runs})
    summary = summarize_grid(runs, policies)
    _write(args.out, {**header, "runs": runs, "summary": summary})
    print(render_grid(summary, policies))
    return 0


def _write(path: Path, results: Mapping[str, object]) -> None:
    path.write_text(json.dumps(results, indent=1) + "\n")


def _mean(values: Sequence[object]) -> float | None:
    numbers = [float(v) for v in values if isinstance(v, (int, float))]
    return round(statistics.mean(numbers), 2) if numbers else None


POINTS: Final = ("at_100", "at_130")
Cell = dict[str, float | None]  # "at_100" / "at_130" -> GPU allocation %, mean of the seeds


# The bound on a single seed: default may trail FGD by at most this many points.
SEED_SLACK: Final = 0.1


class GridSummary(TypedDict):
    variants: dict[str, dict[str, Cell]]  # variant -> policy -> cell
    average: dict[str, Cell]  # policy -> the cells' mean over the variants
    default_ge_fgd: dict[str, dict[str, float | int | None]]  # point -> counts and share
    # variant -> point -> the smallest default - fgd over the seeds both ran (None: none)
    worst_seed: dict[str, Cell]


def summarize_grid(
    runs: Mapping[str, Mapping[str, Sequence[Row]]], policies: list[str]
) -> GridSummary:
    """Per variant and policy the mean over seeds at 100 % and 130 % arrived; their mean over the
    variants; where both ran, the share of variants whose default mean is at least FGD's."""
    per_variant = {
        variant: {
            policy: {p: _mean([r.get(f"gpu_alloc_pct_{p}") for r in rows]) for p in POINTS}
            for policy, rows in by_policy.items()
        }
        for variant, by_policy in runs.items()
    }
    average = {
        policy: {p: _mean([cells[policy][p] for cells in per_variant.values()]) for p in POINTS}
        for policy in policies
    }
    versus: dict[str, dict[str, float | int | None]] = {}
    worst: dict[str, Cell] = {}
    if _versus(policies):
        worst = {
            variant: {p: _worst_seed(by.get("default", ()), by.get("fgd", ()), p) for p in POINTS}
            for variant, by in runs.items()
        }
        versus = {p: _default_ge_fgd(per_variant, p) for p in POINTS}
        for p in POINTS:
            versus[p].update(_seed_counts(runs, p))
    return {
        "variants": per_variant,
        "average": average,
        "default_ge_fgd": versus,
        "worst_seed": worst,
    }


def _margins(default: Sequence[Row], fgd: Sequence[Row], point: str) -> list[float]:
    """default - fgd per seed both ran, at `point`."""
    key = f"gpu_alloc_pct_{point}"
    theirs = {r.get("seed"): r.get(key) for r in fgd}
    margins = []
    for r in default:
        mine, other = r.get(key), theirs.get(r.get("seed"))
        if isinstance(mine, (int, float)) and isinstance(other, (int, float)):
            margins.append(float(mine) - float(other))
    return margins


def _worst_seed(default: Sequence[Row], fgd: Sequence[Row], point: str) -> float | None:
    margins = _margins(default, fgd, point)
    return round(min(margins), 2) if margins else None


def _seed_counts(
    runs: Mapping[str, Mapping[str, Sequence[Row]]], point: str
) -> dict[str, float | int | None]:
    """Over every (variant, seed) both ran: how many, and how many with default more than
    SEED_SLACK below FGD."""
    margins = [
        m for by in runs.values() for m in _margins(by.get("default", ()), by.get("fgd", ()), point)
    ]
    # Rounded as the table prints them: 95.70 against 95.80 is 0.1 below, not 0.10000001.
    below = sum(1 for m in margins if round(m, 6) < -SEED_SLACK)
    return {"seeds": len(margins), "seeds_below_slack": below}


def _versus(policies: Sequence[str]) -> bool:
    return "default" in policies and "fgd" in policies


def _default_ge_fgd(
    per_variant: Mapping[str, Mapping[str, Cell]], point: str
) -> dict[str, float | int | None]:
    pairs = [(cells["default"][point], cells["fgd"][point]) for cells in per_variant.values()]
    compared = [(d, f) for d, f in pairs if d is not None and f is not None]
    wins = sum(1 for d, f in compared if d >= f)
    share = round(wins / len(compared), 3) if compared else None
    return {"variants": len(compared), "default_ge_fgd": wins, "share": share}


def render_grid(summary: GridSummary, policies: list[str]) -> str:
    rows = {**summary["variants"], "average": summary["average"]}
    worst = summary.get("worst_seed", {})
    width = max(len(v) for v in ("variant", *rows))
    head = "".join(f" {policy + '@' + p[3:]:>14}" for policy in policies for p in POINTS)
    if worst:
        head += "".join(f" {'worst seed d-f@' + p[3:]:>18}" for p in POINTS)
    lines = [f"{'variant':<{width}}{head}"]
    for variant, cells in rows.items():
        values = "".join(f" {_num(cells[policy][p]):>14}" for policy in policies for p in POINTS)
        if variant in worst:
            values += "".join(f" {_signed(worst[variant][p]):>18}" for p in POINTS)
        lines.append(f"{variant:<{width}}{values}")
    for point, counts in summary["default_ge_fgd"].items():
        lines.append(
            f"default >= fgd at {point[3:]} % arrived: {counts['default_ge_fgd']} of "
            f"{counts['variants']} variants (share {_num(counts['share'])}; means of the seeds)"
        )
        if "seeds" in counts:
            lines.append(
                f"  single seeds more than {SEED_SLACK} below fgd at {point[3:]} %: "
                f"{counts['seeds_below_slack']} of {counts['seeds']}"
            )
    return "\n".join(lines)


def _signed(value: float | None) -> str:
    return "-" if value is None else f"{value:+.2f}"


def merge_runs(sources: Sequence[str]) -> tuple[Runs, list[str]]:
    """The runs of several `--out` files of grid runs, and the policies in them. A source is
    `FILE` or `FILE:POLICY+POLICY` (only those policies' runs of that file). A (variant,
    policy, seed) met twice must have the same figures (runs are deterministic per seed),
    else ValueError."""
    runs: Runs = {}
    policies: list[str] = []
    for source in sources:
        name, _, wanted = source.partition(":")
        only = set(wanted.split("+")) if wanted else None
        path = Path(name)
        saved = json.loads(path.read_text())
        for variant, by_policy in saved.get("runs", {}).items():
            for policy, rows in by_policy.items():
                if only is not None and policy not in only:
                    continue
                if policy not in policies:
                    policies.append(policy)
                kept = runs.setdefault(variant, {}).setdefault(policy, [])
                seen = {r.get("seed"): r for r in kept}
                for row in rows:
                    other = seen.get(row.get("seed"))
                    if other is None:
                        kept.append(row)
                        seen[row.get("seed")] = row
                    elif _figures(other) != _figures(row):
                        raise ValueError(
                            f"{path}: {variant} {policy} seed {row.get('seed')} differs from "
                            "an earlier file's run of the same seed"
                        )
    known = list(POLICY_NAMES)
    policies.sort(key=lambda p: known.index(p) if p in known else len(known))
    return runs, policies


def _figures(row: Row) -> tuple[object, ...]:
    return tuple(row.get(f"gpu_alloc_pct_{p}") for p in POINTS)


def report_merged(sources: Sequence[str]) -> int:
    """`bench trace --merge A.json,B.json:fgd`: the table of saved runs, no new run."""
    try:
        runs, policies = merge_runs(sources)
    except (OSError, ValueError) as err:  # json.JSONDecodeError is a ValueError
        print(f"bench trace --merge: {err}", file=sys.stderr)
        return 2
    print(render_grid(summarize_grid(runs, policies), policies))
    return 0


def _num(value: float | int | None) -> str:
    return "-" if value is None else f"{value:.2f}"
