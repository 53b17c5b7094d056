"""The command line of the live views, `batchsched queue|explain|gpus`: their flags only.

Apart from `live.py` so that building the `batchsched` parser (every command, the live
scheduler's `run` included) does not import the views, the cluster file reader and the
Kubernetes client they use: argparse only.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def add_view_parsers(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    queue = commands.add_parser(
        "queue",
        help="pending workloads per tenant in the order the scheduler would try them",
        description="Pending pods and gangs in the scheduler's order, with queue position, "
        "tenant fair share and quota, estimated start and why each waits (read-only).",
    )
    _common(queue, quota=True)
    queue.add_argument("-n", "--namespace", help="only workloads of this namespace")
    queue.add_argument("--tenant", help="only workloads of this tenant")
    queue.add_argument("-o", "--output", choices=("table", "wide", "json"), default="table")
    why = commands.add_parser(
        "explain",
        help="why a pending pod or gang waits, and what would have to change",
        description="Per-node reasons, quota, backfill and preemption verdicts for a pending "
        "pod or gang: NAME, pod/NAME or podgroup/NAME (read-only).",
    )
    why.add_argument("name", help="pod/NAME, podgroup/NAME or NAME")
    _common(why, quota=True)
    why.add_argument("-n", "--namespace", default="default")
    why.add_argument("-o", "--output", choices=("table", "json"), default="table")
    gpus = commands.add_parser(
        "gpus",
        help="per node: GPU model, used/free GPUs, free NVLink islands, fragmentation",
        description="The scheduler's GPU accounting per node and for the cluster (read-only).",
    )
    _common(gpus, quota=False)
    gpus.add_argument("-o", "--output", choices=("table", "json"), default="table")


def _common(parser: argparse.ArgumentParser, quota: bool) -> None:
    parser.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, in-cluster)")
    parser.add_argument("--config", type=Path, help="the scheduler's KubeSchedulerConfiguration")
    if quota:
        source = parser.add_mutually_exclusive_group()
        source.add_argument("--quota", type=Path, help="the tenant quota file (QuotaConfig YAML)")
        source.add_argument(
            "--quota-configmap",
            metavar="NAMESPACE/NAME",
            help="read the quota file from this ConfigMap (its one key, or quotas.yaml)",
        )
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
