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
import asyncio
import json
import os
import sys
import time
from pathlib import Path

import aiohttp
from kubernetes_asyncio.client import ApiClient

from batchsched.bench.e2e_cluster import (
    EXIT_UNBOUND,
    BenchError,
    ControlPlane,
    add_harness_arguments,
    add_profile_argument,
    control_plane_for,
    count_nodes,
    create_namespace,
    create_nodes,
    create_pods,
    delete_bench_nodes,
    delete_pods,
    install_crds,
    kube_version,
    new_run_dir,
    run_bench,
)
from batchsched.bench.e2e_procs import (
    Batchsched,
    CpuMeter,
    KubeScheduler,
    SchedulerProcess,
    histogram_mean_ms,
)
from batchsched.bench.e2e_report import Machine, Measurement, machine_info, render, to_json
from batchsched.bench.e2e_watch import BindWatch, percentile
from batchsched.kube.client import api_client

SCHEDULERS = ("batchsched", "kube-scheduler")


async def measure(
    api: ApiClient,
    plane: ControlPlane,
    scheduler: SchedulerProcess,
    args: argparse.Namespace,
    namespace: str,
) -> Measurement:
    await create_namespace(api, namespace)
    try:
        await scheduler.start()
        result = await _measure_running(api, plane, scheduler, args, namespace)
        result.pod_watch_retries = scheduler.pod_watch_retries()
        try:
            metric, selector = scheduler.algorithm_metric
            text = await scheduler.metrics()
            result.algorithm_mean_ms = histogram_mean_ms(text, metric, selector)
        except (BenchError, aiohttp.ClientError, TimeoutError, OSError) as err:
            print(f"{scheduler.name}: no /metrics ({err})", file=sys.stderr)
        return result
    finally:
        await scheduler.stop()
        await delete_pods(api, namespace)


async def _measure_running(
    api: ApiClient,
    plane: ControlPlane,
    scheduler: SchedulerProcess,
    args: argparse.Namespace,
    namespace: str,
) -> Measurement:
    watch = BindWatch(api, namespace, args.pods)
    meter = cpu_meter(plane, scheduler)
    async with asyncio.TaskGroup() as tasks:
        watching = tasks.create_task(watch.run())
        await watch.wait_watching()
        meter.start()
        creation = await create_pods(
            api, namespace, scheduler.scheduler_name, args.pods, args.concurrency
        )
        complete = await watch.wait_all_bound(creation.started + args.timeout)
        cpu = meter.stop()
        ended = max(watch.bound.values()) if complete else time.perf_counter()
        watching.cancel()
    seconds = ended - creation.started
    latencies = watch.latencies()
    return Measurement(
        scheduler=scheduler.name,
        pods=args.pods,
        bound=len(watch.bound),
        seconds=seconds,
        pods_per_second=len(watch.bound) / seconds,
        create_seconds=creation.seconds,
        creates_per_second=creation.per_second,
        latency_p50_ms=percentile(latencies, 50) * 1e3,
        latency_p99_ms=percentile(latencies, 99) * 1e3,
        cpu_seconds=cpu,
        bench_watch_reconnects=watch.reconnects,
    )


def cpu_meter(plane: ControlPlane, scheduler: SchedulerProcess) -> CpuMeter:
    return CpuMeter(
        {
            "scheduler": scheduler.pid(),
            "kube-apiserver": plane.pid("kube-apiserver"),
            "etcd": plane.pid("etcd"),
            "bench client": os.getpid(),
        }
    )


def make_scheduler(
    name: str, plane: ControlPlane, run_dir: Path, profile: Path | None
) -> SchedulerProcess:
    if name == "batchsched":
        return Batchsched(plane.kubeconfig, run_dir / "batchsched.log", profile)
    return KubeScheduler(plane)


async def bench(
    plane: ControlPlane, args: argparse.Namespace, run_dir: Path
) -> tuple[Machine, list[Measurement]]:
    names = [args.only] if args.only else list(SCHEDULERS)
    # Built first, so a scheduler that cannot run fails the bench before any work.
    schedulers = [make_scheduler(n, plane, run_dir, args.profile_batchsched) for n in names]
    api = await api_client(str(plane.kubeconfig))
    async with api:
        machine = machine_info(await kube_version(api))
        others = await count_nodes(api)
        if others:
            print(f"note: the cluster already has {others} node(s); they take pods too")
        await install_crds(api)
        await create_nodes(api, args.nodes, args.concurrency)
        results = []
        stamp = time.strftime("%Y%m%d-%H%M%S")
        for scheduler in schedulers:
            print(f"{scheduler.name}: scheduling {args.pods} pods ...", flush=True)
            namespace = f"bench-{scheduler.name}-{stamp}"
            results.append(await measure(api, plane, scheduler, args, namespace))
        if not plane.owned and not args.keep:
            await delete_bench_nodes(api)
    return machine, results


async def main(args: argparse.Namespace) -> int:
    run_dir = new_run_dir()
    print(f"logs: {run_dir}", flush=True)
    async with control_plane_for(args.kubeconfig, run_dir, keep=args.keep) as plane:
        machine, results = await bench(plane, args, run_dir)
    shape = (args.nodes, args.pods, args.concurrency)
    print(render(machine, results, *shape))
    if args.json:
        args.json.write_text(json.dumps(to_json(machine, results, *shape), indent=2) + "\n")
    return 0 if all(r.bound == r.pods for r in results) else EXIT_UNBOUND


def run(args: argparse.Namespace) -> int:
    return run_bench("e2e", lambda: main(args))


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "e2e", help="batchsched vs kube-scheduler on a real API server (SchedulingBasic)"
    )
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--pods", type=int, default=5000, help="pods per scheduler")
    add_harness_arguments(parser, SCHEDULERS, "seconds from the first create until all bound")
    add_profile_argument(parser)
    parser.set_defaults(run=run)
