"""batchsched vs kube-scheduler on one real API server, in one run (SchedulingBasic shape).

`python -m batchsched.bench e2e --nodes 500 --pods 5000`

1. Bring up etcd + kube-apiserver (scripts/control-plane.sh, a state dir of its own) or use
   the one `--kubeconfig` names; create N Nodes (4 cpu, 32Gi, 110 pods).
2. For each scheduler in turn (batchsched, then kube-scheduler): start it as its own process,
   wait for its /readyz, create P pods naming it in a fresh namespace with bounded
   concurrency (the same code for both), and time from the first create request to the last
   pod seen bound on a watch. Then stop it and force-delete the pods.
3. Print both, the ratio of their pods/s, where the CPU went, and the machine.
"""

from __future__ import annotations

import argparse
import functools
import time
from pathlib import Path

from kubernetes_asyncio.client import ApiClient

from batchsched.bench.e2e_cluster import create_namespace, create_nodes, create_pods, delete_pods
from batchsched.bench.e2e_procs import SchedulerProcess, histogram_mean_ms
from batchsched.bench.e2e_report import Measurement, render, to_json
from batchsched.bench.harness import (
    BACKLOG,
    EXIT_UNBOUND,
    STREAM,
    Report,
    UnderTest,
    add_harness_arguments,
    add_modes_argument,
    add_profile_argument,
    add_rounds_argument,
    compare,
    run_bench,
    running,
    scheduler_order,
)
from batchsched.bench.harness_phase import Phase, backlog_phase, scheduler_metrics, timed_phase

SCHEDULERS = ("batchsched", "kube-scheduler")


async def measure(args: argparse.Namespace, stamp: str, run: UnderTest) -> list[Measurement]:
    """The scheduler in each mode of `--modes`, in turn (a fresh process for each)."""
    stamp = f"{stamp}-r{run.round}" if args.rounds > 1 else stamp
    return [await measure_mode(args, f"{stamp}-{mode}", run, mode) for mode in args.modes]


async def measure_mode(
    args: argparse.Namespace, stamp: str, run: UnderTest, mode: str
) -> Measurement:
    """stream: pods are created while the scheduler runs, timed from the first create;
    backlog: all pods exist before the scheduler starts, timed from its start."""
    scheduler, api = run.scheduler, run.api
    print(f"{scheduler.name}: scheduling {args.pods} pods ({mode}) ...", flush=True)
    namespace = f"bench-{scheduler.name}-{stamp}"
    await create_namespace(api, namespace)
    create = functools.partial(
        create_pods, api, namespace, scheduler.scheduler_name, args.pods, args.concurrency
    )
    try:
        if mode == BACKLOG:
            meter = run.cpu_meter()  # the scheduler joins it once started
            phase = await backlog_phase(
                api, namespace, args.pods, create, scheduler, args.timeout, meter=meter
            )
        else:
            async with running(scheduler):
                phase = await timed_phase(
                    api, namespace, args.pods, create, args.timeout, meter=run.cpu_meter()
                )
                # Read while it runs: backlog mode reads it below, before the stop.
                result = measurement(scheduler.name, args.pods, phase, STREAM, run.round)
                return await _finished(scheduler, result)
        return await _finished(
            scheduler, measurement(scheduler.name, args.pods, phase, mode, run.round)
        )
    finally:
        await scheduler.stop()  # a no-op when stopped already
        await delete_pods(api, namespace)


async def _finished(scheduler: SchedulerProcess, result: Measurement) -> Measurement:
    """The figures only the running scheduler can tell: its watch retries and its own
    algorithm time."""
    result.pod_watch_retries = scheduler.pod_watch_retries()
    metric, selector = scheduler.algorithm_metric
    text = await scheduler_metrics(scheduler)
    result.algorithm_mean_ms = histogram_mean_ms(text, metric, selector)
    return result


def measurement(
    scheduler: str, pods: int, phase: Phase, mode: str = STREAM, round_: int = 1
) -> Measurement:
    create_seconds = phase.create_seconds
    return Measurement(
        mode=mode,
        scheduler=scheduler,
        pods=pods,
        bound=phase.bound,
        seconds=phase.seconds,
        pods_per_second=phase.bound / phase.seconds,
        create_seconds=create_seconds,
        creates_per_second=pods / create_seconds if create_seconds > 0 else float("inf"),
        latency_p50_ms=phase.latency_ms(50),
        latency_p99_ms=phase.latency_ms(99),
        cpu_seconds=phase.cpu_seconds,
        bench_watch_reconnects=phase.watch.reconnects,
        round=round_,
    )


async def bench(args: argparse.Namespace, run_dir: Path) -> Report:
    async def set_up(api: ApiClient) -> None:
        await create_nodes(api, args.nodes, args.concurrency)

    names = scheduler_order(SCHEDULERS, args.only)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    each = functools.partial(measure, args, stamp)
    machine, results = await compare(
        args, run_dir, names, set_up, each, args.profile_batchsched, args.rounds
    )
    shape = (args.nodes, args.pods, args.concurrency)
    code = 0 if all(r.bound == r.pods for r in results) else EXIT_UNBOUND
    return Report(render(machine, results, *shape), to_json(machine, results, *shape), code)


def run(args: argparse.Namespace) -> int:
    return run_bench("e2e", args, functools.partial(bench, args))


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "e2e", help="batchsched vs kube-scheduler on a real API server (SchedulingBasic)"
    )
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--pods", type=int, default=5000, help="pods per scheduler")
    add_modes_argument(parser)
    add_harness_arguments(parser, SCHEDULERS, "seconds from the first create until all bound")
    add_profile_argument(parser)
    add_rounds_argument(parser)
    parser.set_defaults(run=run)
