"""Pure-core throughput on scheduler_perf's SchedulingBasic shape.

Nodes: 4 cpu, 32Gi, 110 pods. Pods: 100m cpu, 500Mi. Every pod goes through the default
profile (all plugins kube-scheduler enables by default that we implement), one at a time,
each placement visible to the next, exactly as the live scheduler's cycle runs it: by default
once without and once with lone-pod batching (the live scheduler's), placements compared.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import time
from typing import Any

from batchsched.framework.lone_batches import LoneBatches
from batchsched.framework.registry import assemble_profile
from batchsched.framework.runner import ProfileRunner
from batchsched.model.node import NodeView, parse_node
from batchsched.model.pod import PodView, parse_pod
from batchsched.plugins.registry import DEFAULT_PLUGINS, default_registry
from batchsched.snapshot import Snapshot

TARGET_PODS_PER_SECOND = 1000.0


def basic_nodes(count: int) -> list[NodeView]:
    return [
        parse_node(
            {
                "metadata": {
                    "name": f"node-{i}",
                    "labels": {"kubernetes.io/hostname": f"node-{i}"},
                },
                "status": {"allocatable": {"cpu": "4", "memory": "32Gi", "pods": "110"}},
            }
        )
        for i in range(count)
    ]


def basic_pods(count: int) -> list[PodView]:
    template: dict[str, Any] = {
        "spec": {
            "schedulerName": "gpu-scheduler",
            "containers": [
                {
                    "name": "pause",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": {"cpu": "100m", "memory": "500Mi"}},
                }
            ],
        }
    }
    return [
        parse_pod(
            {**template, "metadata": {"name": f"pod-{i}", "namespace": "sched-0", "uid": f"u{i}"}}
        )
        for i in range(count)
    ]


def _replay(
    args: argparse.Namespace, nodes: list[NodeView], pods: list[PodView], batching: bool
) -> tuple[list[str | None], float]:
    """Every pod through one runner on one snapshot: each pod's node, and the seconds taken."""
    profile = assemble_profile(default_registry(), "gpu-scheduler", DEFAULT_PLUGINS, {})
    snapshot = Snapshot(nodes)
    runner = ProfileRunner(profile, seed=args.seed)
    lone = LoneBatches() if batching else None
    gc.collect()
    chosen: list[str | None] = []
    start = time.perf_counter()
    for pod in pods:
        if lone is not None:
            result = lone.schedule(runner, pod, snapshot)
        else:
            result = runner.schedule_one(pod, snapshot)
        chosen.append(result.node_name if result.placed else None)
    return chosen, time.perf_counter() - start


def run(args: argparse.Namespace) -> int:
    nodes = basic_nodes(args.nodes)
    pods = basic_pods(args.pods)
    python = f"{platform.python_implementation()} {platform.python_version()}"
    print(f"machine: {python} on {platform.machine()}, {os.cpu_count()} cpus")
    print(
        f"shape: SchedulingBasic, {args.nodes} nodes (4 cpu/32Gi/110 pods), "
        f"{args.pods} pods (100m/500Mi)"
    )
    modes = {"lone": [True], "off": [False], "both": [False, True]}[args.batching]
    placements = []
    for batching in modes:
        chosen, elapsed = _replay(args, nodes, pods, batching)
        placements.append(chosen)
        placed = sum(node is not None for node in chosen)
        rate = len(pods) / elapsed
        how = "lone-pod batching" if batching else "no batching"
        print(f"{how}: placed {placed}/{len(pods)} in {elapsed:.2f} s")
        print(f"  throughput: {rate:.0f} pods/s (pure core, default profile, one pod per cycle)")
        print(f"  per pod: {elapsed / len(pods) * 1e3:.3f} ms")
        print(
            f"  ratio vs target {TARGET_PODS_PER_SECOND:.0f} pods/s: "
            f"{rate / TARGET_PODS_PER_SECOND:.2f}x"
        )
        if placed != len(pods):
            return 1
    if len(placements) == 2:
        same = placements[0] == placements[1]
        print(f"same placements with and without batching: {'yes' if same else 'NO'}")
        return 0 if same else 1
    return 0


def add_parser(commands: Any) -> None:
    parser = commands.add_parser("core", help="pure-core throughput (SchedulingBasic shape)")
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=10000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--batching",
        choices=("both", "lone", "off"),
        default="both",
        help="lone-pod batching across cycles (framework/lone_batches.py), without, or both "
        "in one run with the placements compared (default)",
    )
    parser.set_defaults(run=run)
