"""The `batchsched simulate` subcommand's options (the command itself is `command.py`).

Light at import (argparse only), as the rest of the command line is: the simulator loads
when the subcommand runs.
"""

from __future__ import annotations

import argparse
from pathlib import Path

__all__ = ["add_simulate_parser"]


def add_simulate_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    sim = commands.add_parser(
        "simulate",
        help="replay a trace or workload on a virtual clock through the scheduler's core",
        description="Discrete-event simulation through the same snapshot and scheduling core as "
        "`batchsched run`. With no arguments: the embedded Alibaba GPU 2023 trace (openb "
        "default) on its 1213 GPU nodes, by the method of Weng et al. (ATC '23): pods sampled "
        "with --seed until their GPU requests reach --inflation x capacity, placed one at a "
        "time, never leaving.",
    )
    where = sim.add_mutually_exclusive_group()
    where.add_argument(
        "--nodes", type=Path, help="trace node CSV (sn,cpu_milli,memory_mib,gpu,model)"
    )
    where.add_argument("--cluster", type=Path, help="Kubernetes YAML: Nodes, bound Pods, ...")
    what = sim.add_mutually_exclusive_group()
    what.add_argument("--pods", type=Path, help="trace pod CSV, or Kubernetes YAML pending Pods")
    what.add_argument(
        "--generate",
        metavar="SPEC",
        help="synthetic workload, e.g. jobs=200,gang=1-4,gpus=1|2|4|8,share=0.2,tenants=3,"
        "runtime=600-7200,interval=30",
    )
    sim.add_argument(
        "--method",
        choices=("paper", "replay"),
        help="paper: sample to --inflation, no departures (default for a trace CSV); replay: "
        "arrivals and departures on the virtual clock (default otherwise)",
    )
    sim.add_argument("--inflation", type=float, default=1.3, help="paper: target GPU load (1.3)")
    sim.add_argument("--seed", type=int, default=42, help="sampling and tie-breaking seed (42)")
    sim.add_argument("--config", type=Path, help="KubeSchedulerConfiguration YAML")
    sim.add_argument("--quota", type=Path, help="tenant quota file: quotas, fair share apply")
    sim.add_argument(
        "--policy",
        default="default",
        help="default (the config's profile), or a policy of the ATC '23 paper scoring alone: "
        "fgd, bestfit, dotproduct, gpupacking, gpuclustering, random",
    )
    sim.add_argument(
        "--percentage",
        type=int,
        help="percentageOfNodesToScore (default: 100 for the paper's method, else the config's)",
    )
    sim.add_argument("--json", type=Path, dest="json_out", metavar="OUT", help="write metrics")
    sim.add_argument("--report", type=Path, metavar="DIR", help="write index.html and PNG plots")
    sim.add_argument("--quiet", action="store_true", help="no progress bar")
