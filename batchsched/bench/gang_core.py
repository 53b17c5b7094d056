"""Pure-core gang decisions: how long one `schedule_gang` takes for a 3-pod gang.

Shape: N nodes with 8 nvidia.com/gpu (64 cpu, 512Gi); gangs of 3 pods with 1 GPU each, placed
one gang after another (each decision sees the earlier gangs' pods), through the default
profile. Prints p50/p99 per gang decision and the ratio
against the 6 ms p50 goal (the Go in-tree gang figure quoted in the issue is 3.7-5.7 ms), or,
for gangs of 100 pods and more, against issue #17's 200 ms for one 1000-pod gang on 5000 nodes.
`--batching never` turns off the reuse of identical members' filter and score results, for a
before/after in one session.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import statistics
import time
from typing import Any

from batchsched.config import default_config
from batchsched.framework.runner import ProfileRunner
from batchsched.gang.core import GangRequest, Outcome, schedule_gang
from batchsched.gang.podgroup import PodGroupView, parse_pod_group
from batchsched.model.node import NodeView, parse_node
from batchsched.model.pod import PodView, parse_pod
from batchsched.snapshot import Snapshot

GOAL_P50_MS = 6.0
GOAL_LARGE_GANG_MS = 200.0  # one 1000-pod gang on 5000 nodes (issue #17 item 4)
LARGE_GANG = 100


def gpu_nodes(count: int) -> list[NodeView]:
    return [
        parse_node(
            {
                "metadata": {"name": f"gpu-{i}", "labels": {"kubernetes.io/hostname": f"gpu-{i}"}},
                "status": {
                    "allocatable": {
                        "cpu": "64",
                        "memory": "512Gi",
                        "pods": "110",
                        "nvidia.com/gpu": "8",
                    }
                },
            }
        )
        for i in range(count)
    ]


def gang(index: int, size: int) -> tuple[PodGroupView, tuple[PodView, ...]]:
    name = f"g{index}"
    group = parse_pod_group(
        {"metadata": {"name": name, "namespace": "bench"}, "spec": {"minMember": size}}
    )
    members = tuple(
        parse_pod(
            {
                "metadata": {
                    "name": f"{name}-{j}",
                    "namespace": "bench",
                    "uid": f"{name}-{j}",
                    "labels": {"scheduling.x-k8s.io/pod-group": name},
                },
                "spec": {
                    "schedulerName": "gpu-scheduler",
                    "containers": [
                        {
                            "name": "w",
                            "resources": {
                                "requests": {"cpu": "1", "memory": "4Gi", "nvidia.com/gpu": 1}
                            },
                        }
                    ],
                },
            }
        )
        for j in range(size)
    )
    return group, members


def run(args: argparse.Namespace) -> int:
    profile = default_config().build_profiles()["gpu-scheduler"]
    snapshot = Snapshot(gpu_nodes(args.nodes))
    runner = ProfileRunner(profile, seed=0)
    gangs = [gang(i, args.size) for i in range(args.gangs)]
    gc.collect()
    times: list[float] = []
    placed = 0
    for group, members in gangs:
        started = time.perf_counter()
        decision = schedule_gang(
            GangRequest(group, members), snapshot, runner, batching=args.batching
        )
        times.append(time.perf_counter() - started)
        placed += decision.outcome is Outcome.BIND
    times_ms = sorted(t * 1e3 for t in times)
    p50 = statistics.median(times_ms)
    p99 = times_ms[min(len(times_ms) - 1, int(len(times_ms) * 0.99))]
    python = f"{platform.python_implementation()} {platform.python_version()}"
    print(f"machine: {python} on {platform.machine()}, {os.cpu_count()} cpus")
    print(
        f"shape: {args.nodes} nodes x 8 nvidia.com/gpu; {args.gangs} gangs of {args.size} pods "
        f"x 1 GPU, default profile, batching {args.batching}"
    )
    print(f"placed: {placed}/{len(gangs)} gangs")
    mean = statistics.mean(times_ms)
    print(f"per gang decision: p50 {p50:.2f} ms, p99 {p99:.2f} ms, mean {mean:.2f} ms")
    goal = GOAL_LARGE_GANG_MS if args.size >= LARGE_GANG else GOAL_P50_MS
    print(f"ratio p50 vs goal {goal:.0f} ms: {goal / p50:.2f}x (above 1 is better)")
    return 0 if placed == len(gangs) else 1


def add_parser(commands: Any) -> None:
    parser = commands.add_parser("gang-core", help="pure-core gang decision latency")
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--gangs", type=int, default=2000)
    parser.add_argument("--size", type=int, default=3)
    parser.add_argument(
        "--batching",
        choices=("auto", "never"),
        default="auto",
        help="reuse identical members' filter and score results (auto) or not (never)",
    )
    parser.set_defaults(run=run)
