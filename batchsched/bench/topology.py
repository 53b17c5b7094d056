"""`python -m batchsched.bench topology`: do gangs land in the tightest topology domain that
could hold them?

One seeded gang workload (sim/topology_jobs.py: 2-64 GPUs, required rack, required clique or
preferred clique) runs twice through the batch simulator on a cluster of racks, blocks and
NVLink cliques (sim/topology_cluster.py; default 64 racks x 8 nodes x 8 GPUs, cliques of 2
nodes, 8 racks a block): with the default profile (TopologyDomains chooses a domain for each
gang) and topology-blind (the plugin dropped, the gangs' requests stripped). Each gang is
judged at its start (sim/tightness.py): the tightest level containing all its nodes against
the tightest level where one domain had room for it just before. The script prints both runs
side by side, the ratio of their shares in the tightest feasible domain, and wall times; it
exits 1 when domain choice is on and a required request was not honoured.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from batchsched.gang.topology import DEFAULT_LEVELS
from batchsched.sim.batch_workloads import default_profile
from batchsched.sim.tightness import TightnessSummary, level_name
from batchsched.sim.topology_cluster import topology_cluster
from batchsched.sim.topology_jobs import TopologyMix, strip_topology, topology_jobs
from batchsched.sim.topology_run import domain_choice, run_topology, without_domains


@dataclass(frozen=True, slots=True)
class Column:
    """One run as a column of the table."""

    title: str
    summary: TightnessSummary
    attempts: int
    wall_s: float


def _share(part: int, whole: int) -> str:
    return f"{part}/{whole} {part / whole:.1%}" if whole else "-"


def _rows(c: TightnessSummary) -> list[tuple[str, str]]:
    rows = [
        ("gangs started", f"{c.started}" + (f" ({c.unstarted} never)" if c.unstarted else "")),
        ("in tightest feasible domain", _share(c.in_tightest, c.started)),
        ("  preferred gangs", _share(c.preferred_in_tightest, c.preferred)),
        ("required honoured", _share(c.honoured, c.required)),
    ]
    for i, count in enumerate(c.placed_by_level):
        rows.append((f"placed within one {level_name(c.levels, i)}", str(count)))
    for i, count in enumerate(c.feasible_by_level):
        rows.append((f"tightest feasible: {level_name(c.levels, i)}", str(count)))
    rows += [
        ("gang wait p50 / p99", f"{c.wait_p50:.0f} s / {c.wait_p99:.0f} s"),
        ("GPU allocation, mean while arriving", f"{c.gpu_allocation:.1%}"),
        ("GPU allocation at last arrival", f"{c.gpu_at_last_arrival:.1%}"),
    ]
    return rows


def format_table(columns: Sequence[Column]) -> list[str]:
    """The runs side by side, then the ratio of the first's tightness share to each other's."""
    names = [label for label, _ in _rows(columns[0].summary)]
    cells = [
        [value for _, value in _rows(col.summary)] + [str(col.attempts), f"{col.wall_s:.1f} s"]
        for col in columns
    ]
    names += ["gang attempts", "wall"]
    width = max(map(len, names))
    widths = [
        max(len(col.title), *map(len, values)) for col, values in zip(columns, cells, strict=True)
    ]
    lines = [
        " " * width + "".join(f"  {c.title:>{w}}" for c, w in zip(columns, widths, strict=True))
    ]
    for r, name in enumerate(names):
        row = "".join(f"  {v[r]:>{w}}" for v, w in zip(cells, widths, strict=True))
        lines.append(f"{name:<{width}}{row}")
    first = columns[0].summary.tightest_share
    for other in columns[1:]:
        share = other.summary.tightest_share
        ratio = f"{first / share:.2f}x" if share else "inf"
        lines.append(
            f"tightness share, {columns[0].title} / {other.title}: "
            f"{first:.1%} / {share:.1%} = {ratio}"
        )
    return lines


def _mix(args: argparse.Namespace) -> TopologyMix:
    low, _, high = args.runtime.partition("-")
    preferred = {level_name(DEFAULT_LEVELS, i): key for i, key in enumerate(DEFAULT_LEVELS)}
    return TopologyMix(
        gangs=args.gangs,
        interval=args.interval,
        runtime=(float(low), float(high or low)),
        clique_gpus=args.clique_nodes * args.gpus_per_node,
        preferred=preferred[args.preferred],
    )


def run(args: argparse.Namespace) -> int:
    nodes = topology_cluster(
        args.racks, args.nodes_per_rack, args.gpus_per_node, args.clique_nodes,
        args.racks_per_block,
    )  # fmt: skip
    mix = _mix(args)
    jobs = topology_jobs(mix, args.seed)
    profile = default_profile()
    choosing = domain_choice(profile)
    print(
        f"topology: {len(nodes)} nodes ({args.racks} racks x {args.nodes_per_rack} x "
        f"{args.gpus_per_node} GPUs, cliques of {args.clique_nodes} nodes, "
        f"{args.racks_per_block} racks a block), {len(jobs)} gangs (seed {args.seed}, one every "
        f"{mix.interval:g} s, runtime {mix.runtime[0]:g}-{mix.runtime[1]:g} s, preferred "
        f"{args.preferred}), mode {args.mode}"
    )
    if not choosing:
        print("note: the default profile has no TopologyDomains yet: both runs are topology-blind")
    started = time.perf_counter()
    on = run_topology(nodes, jobs, profile, args.mode, args.seed)
    middle = time.perf_counter()
    blind = strip_topology(jobs)
    requests = {job.key: job for job in jobs}
    off = run_topology(
        nodes, blind, without_domains(profile), args.mode, args.seed, requests=requests
    )
    ended = time.perf_counter()
    columns = [
        Column("domain choice", on.summary, on.result.attempts, middle - started),
        Column("topology-blind", off.summary, off.result.attempts, ended - middle),
    ]
    for line in format_table(columns):
        print(line)
    print(f"wall {ended - started:.1f} s")
    return 1 if choosing and on.summary.honoured < on.summary.required else 0


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "topology", help="gangs in their tightest feasible topology domain, with and without"
    )
    parser.add_argument("--racks", type=int, default=64)
    parser.add_argument("--nodes-per-rack", type=int, default=8)
    parser.add_argument("--gpus-per-node", type=int, default=8)
    parser.add_argument("--clique-nodes", type=int, default=2, help="nodes per NVLink clique")
    parser.add_argument("--racks-per-block", type=int, default=8)
    parser.add_argument("--gangs", type=int, default=300)
    parser.add_argument("--interval", type=float, default=4.0, help="mean s between arrivals")
    parser.add_argument("--runtime", default="600-2400", help="seconds, uniform: low-high")
    parser.add_argument(
        "--preferred",
        choices=[level_name(DEFAULT_LEVELS, i) for i in range(len(DEFAULT_LEVELS))],
        default="gpu.clique",
        help="the level of the preferred requests (tried from the tightest up to it)",
    )
    parser.add_argument("--mode", choices=("backfill", "fifo", "greedy"), default="backfill")
    parser.add_argument("--seed", type=int, default=1)
    parser.set_defaults(run=run)
