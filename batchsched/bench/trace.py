"""Placement quality on the Alibaba GPU 2023 trace variants, by the ATC '23 paper's method.

`python -m batchsched.bench trace [--variants default,cpu050,...] [--policies default,fgd,...]
[--seeds 42-51] [--traces DIR] [--jobs N] --out results.json` runs `batchsched simulate`'s paper
method for every variant x policy x seed (each run one process of a pool), writes every run's
curve point at 100 % and 130 % arrived to the JSON as it goes (so a long run can be watched;
`runs[variant][policy]` is a list of rows, one per seed), and prints the GPU allocation at 100 %
and 130 % arrived, mean over the seeds, per policy, next to the paper's FGD and BestFit.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Mapping
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any, Final

from batchsched.bench.trace_grid import (
    GRID,
    REPORT_SEEDS,
    TUNING_SEEDS,
    report_merged,
    run_grid,
)
from batchsched.bench.trace_paper import PAPER_SOURCE
from batchsched.bench.trace_table import Row, render, summarize
from batchsched.sim.policy_run import POLICY_NAMES, UnknownPolicy, parse_policies, run_policy
from batchsched.sim.trace import embedded_default_pods, embedded_gpu_nodes, read_nodes, read_pods

SHARED_TRACES: Final = Path("/work/shared/traces/alibaba-gpu-2023/csv")
VARIANTS: Final = (
    "default",
    "cpu050",
    "cpu100",
    "cpu200",
    "cpu250",
    "gpushare40",
    "gpushare60",
    "gpushare80",
    "gpushare100",
    "gpuspec10",
    "gpuspec20",
    "gpuspec25",
    "gpuspec33",
    "multigpu20",
    "multigpu30",
    "multigpu40",
    "multigpu50",
)


def parse_seeds(text: str) -> list[int]:
    """ "42-51", "42,45" or a mix: "42-44,50"."""
    seeds: list[int] = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        low, sep, high = part.partition("-")
        seeds.extend(range(int(low), int(high) + 1) if sep else [int(low)])
    return seeds


def pods_csv(traces: Path | None, variant: str) -> Path:
    if traces is None:
        if variant != "default":
            raise SystemExit(f"variant {variant}: no --traces directory with the trace variants")
        return embedded_default_pods()
    return traces / f"openb_pod_list_{variant}.csv"


def one_run(
    nodes_csv: str, pods_path: str, policy: str, seed: int, config: str | None, inflation: float
) -> Row:
    """One paper-method run of `policy` in a worker process; the curve points the table needs."""
    start = time.perf_counter()
    outcome = run_policy(
        policy,
        read_nodes(Path(nodes_csv)),
        read_pods(Path(pods_path)),
        seed=seed,
        inflation=inflation,
        config=Path(config) if config else None,
    )
    return {**outcome.row(), "wall_s": round(time.perf_counter() - start, 2)}


def run(args: argparse.Namespace) -> int:
    if args.merge:
        return report_merged([source for source in args.merge.split(",") if source])
    if args.grid:
        return run_grid(args, parse_seeds(args.seeds))
    shared = SHARED_TRACES if SHARED_TRACES.is_dir() else None
    traces: Path | None = args.traces if args.traces is not None else shared
    nodes = args.nodes or (traces / "openb_node_list_gpu_node.csv" if traces else None)
    nodes = nodes or embedded_gpu_nodes()
    variants = [v for v in args.variants.split(",") if v] if args.variants else list(VARIANTS)
    config = str(args.config) if args.config else None
    try:
        policies = parse_policies(args.policies)
    except UnknownPolicy as error:
        raise SystemExit(f"bench trace: --policies: {error}") from None
    header = {
        "method": "paper (Weng et al., ATC '23): sampled to inflation x GPU capacity, "
        "placed one at a time, no departures",
        "inflation": args.inflation,
        "nodes": str(nodes),
        "config": config,
        "paper_source": PAPER_SOURCE,
        "policies": policies,
    }
    runs: dict[str, dict[str, list[Row]]] = {v: {p: [] for p in policies} for v in variants}
    # Seed-major, so a run stopped early still covers every variant and policy.
    jobs = [(v, p, s) for s in parse_seeds(args.seeds) for v in variants for p in policies]
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        futures = {
            pool.submit(
                one_run, str(nodes), str(pods_csv(traces, v)), p, s, config, args.inflation
            ): (v, p, s)
            for v, p, s in jobs
        }
        for done, future in enumerate(as_completed(futures), 1):
            variant, policy, seed = futures[future]
            row = future.result()
            runs[variant][policy].append(row)
            print(
                f"[{done}/{len(jobs)}] {variant} {policy} seed {seed}: "
                f"{row['gpu_alloc_pct_at_130']}% at 130% ({row['wall_s']} s)",
                file=sys.stderr,
            )
            _write(args.out, {**header, "runs": runs})
    summary = summarize(runs)
    _write(args.out, {**header, "runs": runs, "summary": summary})
    print(render(summary, policies))
    return 0


def _write(path: Path, results: Mapping[str, object]) -> None:
    path.write_text(json.dumps(results, indent=1) + "\n")


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "trace", help="GPU allocation at 130 %% arrived on the Alibaba GPU 2023 trace variants"
    )
    parser.add_argument("--variants", help=f"comma list (default: all {len(VARIANTS)})")
    parser.add_argument(
        "--seeds",
        default=REPORT_SEEDS,
        help=f"e.g. 47-51 or 47,48 (default {REPORT_SEEDS}, the reporting seeds; "
        f"tune on {TUNING_SEEDS} of the published variants only)",
    )
    parser.add_argument(
        "--grid",
        action="store_true",
        help=f"the {len(GRID)} generated variants (batchsched.sim.variants) instead of the "
        "published files; --variants then names generated ones (e.g. cpu200+gpushare60+gpn4)",
    )
    parser.add_argument(
        "--traces", type=Path, help=f"directory of openb_pod_list_*.csv (default {SHARED_TRACES})"
    )
    parser.add_argument("--nodes", type=Path, help="node CSV (default: the GPU node list)")
    parser.add_argument("--config", type=Path, help="KubeSchedulerConfiguration YAML")
    parser.add_argument(
        "--policies",
        default="default",
        help=f"comma list of {', '.join(POLICY_NAMES)} (default: default, the scheduler's profile)",
    )
    parser.add_argument("--inflation", type=float, default=1.3)
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--out", type=Path, default=Path("trace-results.json"))
    parser.add_argument(
        "--merge",
        help="comma list of --out files of --grid runs, each FILE or FILE:POLICY+POLICY: print "
        "their joined table (per-seed margins included) and run nothing",
    )
    parser.set_defaults(run=run)
