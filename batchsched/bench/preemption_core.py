"""Pure-core preemption planning on scheduler_perf's PreemptionBasic shape: ms per plan.

`python -m batchsched.bench preemption-core --nodes 500 --high 500 [--profile OUT]`

Nodes of 4 cpu, 32Gi, 110 pods, each holding four low-priority pods (900m, 500Mi, priority 0);
then high-priority pods (3000m, 500Mi, priority 10), one at a time: the filter pass that
fails (as the cycle runs it before PostFilter), then `plan_preemption` on the same snapshot
with the request the live scheduler builds (start times read through the snapshot). Each plan
is then applied (victims forgotten, the preemptor counted on its nominated node), so the next
plan sees the cluster as the live scheduler would. Prints ms per plan and per failed filter
pass, and the victims against the fewest possible (three per high pod).
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import os
import platform
import pstats
import statistics
import time
from typing import Any, Final

from batchsched.bench.core import basic_nodes
from batchsched.config import default_config
from batchsched.framework.runner import ProfileRunner
from batchsched.model.pod import PodView, parse_pod
from batchsched.preemption import NoPlan, PreemptionRequest, plan_preemption
from batchsched.preemption.node_facts import FactsMemo
from batchsched.runtime.preemption_inputs import started_times
from batchsched.snapshot import Snapshot

LOW_PER_NODE: Final = 4
VICTIMS_PER_HIGH: Final = 3  # 0.4 cpu free + 3 x 0.9 >= 3
WALL: Final = 1_800_000_000.0  # the request's wall clock: low pods were created an hour before


def bench_pod(name: str, cpu: str, priority: int, node: str = "") -> PodView:
    spec: dict[str, Any] = {
        "schedulerName": "gpu-scheduler",
        "priority": priority,
        "containers": [
            {"name": "pause", "resources": {"requests": {"cpu": cpu, "memory": "500Mi"}}}
        ],
    }
    if node:
        spec["nodeName"] = node
    meta = {
        "name": name,
        "namespace": "bench",
        "uid": name,
        "creationTimestamp": "2027-01-15T07:00:00Z",
    }
    return parse_pod({"metadata": meta, "spec": spec})


def filled(nodes: int) -> Snapshot:
    views = basic_nodes(nodes)
    low = [
        bench_pod(f"low-{i}-{j}", "900m", 0, node.name)
        for i, node in enumerate(views)
        for j in range(LOW_PER_NODE)
    ]
    return Snapshot(views, low)


def request_for(pod: PodView, snapshot: Snapshot) -> PreemptionRequest:
    now = 1000.0
    return PreemptionRequest(
        preemptor=(pod,),
        group=None,
        bound_members=0,
        now=now,
        started=started_times(snapshot, now, WALL, {}),
        min_runtime_s=0.0,
        budgets=(),
        gang_of={},
        gang_min_member={},
    )


def run(args: argparse.Namespace) -> int:
    profile = default_config().build_profiles()["gpu-scheduler"]
    snapshot = filled(args.nodes)
    runner = ProfileRunner(profile, seed=0)
    high = [bench_pod(f"high-{i}", "3000m", 10) for i in range(args.high)]
    filter_ms: list[float] = []
    plan_ms: list[float] = []
    victims = planned = 0
    profiler = cProfile.Profile() if args.profile else None
    # Facts kept between plans, as the live scheduler keeps them (none: every node read again).
    memo = None if args.no_memo else FactsMemo()
    gc.collect()
    for pod in high:
        started = time.process_time()
        result = runner.find_node(pod, snapshot)
        filter_ms.append((time.process_time() - started) * 1e3)
        if result.node_name is not None:
            snapshot.assume(pod, result.node_name)
            continue
        request = request_for(pod, snapshot)
        started = time.process_time()
        if profiler is not None:
            profiler.enable()
        answer = plan_preemption(request, snapshot, runner, memo)
        if profiler is not None:
            profiler.disable()
        plan_ms.append((time.process_time() - started) * 1e3)
        if isinstance(answer, NoPlan):
            continue
        planned += 1
        for victim in answer.victim_pods():
            snapshot.forget(victim)
            victims += 1
        snapshot.assume(pod, answer.placements[pod.uid])
    _print(args, filter_ms, plan_ms, planned, victims)
    if profiler is not None:
        profiler.dump_stats(args.profile)
        pstats.Stats(args.profile).sort_stats("cumulative").print_stats(args.top)
    fewest = VICTIMS_PER_HIGH * len(high)
    return 0 if planned == len(high) and victims == fewest else 1


def _print(
    args: argparse.Namespace,
    filter_ms: list[float],
    plan_ms: list[float],
    planned: int,
    victims: int,
) -> None:
    python = f"{platform.python_implementation()} {platform.python_version()}"
    print(f"machine: {python} on {platform.machine()}, {os.cpu_count()} cpus (process CPU time)")
    print(
        f"shape: {args.nodes} nodes (4 cpu, 32Gi) x {LOW_PER_NODE} low pods (900m, priority 0); "
        f"{args.high} high pods (3000m, priority 10), default profile"
    )
    print(
        f"plans: {planned}/{args.high}; victims {victims} (fewest {VICTIMS_PER_HIGH * args.high})"
    )
    for name, times in (("failed filter pass", filter_ms), ("plan_preemption", plan_ms)):
        if times:
            ordered = sorted(times)
            p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
            print(
                f"{name}: mean {statistics.mean(times):.2f} ms, p50 "
                f"{statistics.median(times):.2f} ms, p99 {p99:.2f} ms"
            )


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "preemption-core", help="pure-core preemption planning, ms per plan (PreemptionBasic)"
    )
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--high", type=int, default=500)
    parser.add_argument("--profile", metavar="OUT", help="cProfile the plans, stats to OUT")
    parser.add_argument(
        "--no-memo", action="store_true", help="read every node afresh for each plan"
    )
    parser.add_argument("--top", type=int, default=30, help="functions printed with --profile")
    parser.set_defaults(run=run)
