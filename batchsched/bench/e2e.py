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
import platform
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from kubernetes_asyncio.client import ApiClient

from batchsched.bench.e2e_cluster import (
    BenchError,
    ControlPlane,
    attach_control_plane,
    count_nodes,
    create_namespace,
    create_nodes,
    create_pods,
    delete_bench_nodes,
    delete_pods,
    kube_version,
    new_run_dir,
    start_control_plane,
    stop_control_plane,
)
from batchsched.bench.e2e_procs import (
    Batchsched,
    CpuMeter,
    KubeScheduler,
    SchedulerProcess,
    histogram_mean_ms,
)
from batchsched.bench.e2e_watch import BindWatch, percentile
from batchsched.kube.client import ApiError, ApiUnavailable, KubeConfigError, api_client

SCHEDULERS = ("batchsched", "kube-scheduler")
EXIT_UNBOUND = 1
EXIT_BENCH_ERROR = 2


@dataclass
class Measurement:
    """One scheduler's run; times in seconds unless named _ms."""

    scheduler: str
    pods: int
    bound: int
    seconds: float  # first create request -> last pod seen bound (the timeout if some never)
    pods_per_second: float
    create_seconds: float  # first create request -> last create answered
    creates_per_second: float
    latency_p50_ms: float  # per pod: seen on the watch -> seen bound on the watch
    latency_p99_ms: float
    algorithm_mean_ms: float | None  # the scheduler's own mean per cycle, binding excluded
    cpu_seconds: dict[str, float] = field(default_factory=dict)


@dataclass
class Machine:
    cpus: int
    cpu_model: str
    python: str
    kube: str
    load_average: float  # 1-minute, at the start: other work on the box skews the figures


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
        try:
            metric, selector = scheduler.algorithm_metric
            text = await scheduler.metrics()
            result.algorithm_mean_ms = histogram_mean_ms(text, metric, selector)
        except (BenchError, OSError) as err:
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
    meter = CpuMeter(
        {
            "scheduler": scheduler.pid(),
            "kube-apiserver": plane.pid("kube-apiserver"),
            "etcd": plane.pid("etcd"),
            "bench client": os.getpid(),
        }
    )
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
        algorithm_mean_ms=None,
        cpu_seconds=cpu,
    )


def make_scheduler(name: str, plane: ControlPlane, args: argparse.Namespace) -> SchedulerProcess:
    if name == "batchsched":
        log_path = args.run_dir / "batchsched.log"
        return Batchsched(plane.kubeconfig, log_path, args.profile_batchsched)
    return KubeScheduler(plane)


async def bench(plane: ControlPlane, args: argparse.Namespace) -> tuple[Machine, list[Measurement]]:
    names = [args.only] if args.only else list(SCHEDULERS)
    schedulers = [make_scheduler(name, plane, args) for name in names]  # fail before any work
    api = await api_client(str(plane.kubeconfig))
    async with api:
        machine = machine_info(await kube_version(api))
        others = await count_nodes(api)
        if others:
            print(f"note: the cluster already has {others} node(s); they take pods too")
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


def machine_info(kube: str) -> Machine:
    model = "unknown cpu"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    python = f"{platform.python_implementation()} {platform.python_version()}"
    return Machine(os.cpu_count() or 0, model, python, kube, os.getloadavg()[0])


def ratio(results: list[Measurement]) -> float | None:
    rates = {r.scheduler: r.pods_per_second for r in results}
    if len(rates) < 2 or not rates["kube-scheduler"]:
        return None
    return rates["batchsched"] / rates["kube-scheduler"]


def render(machine: Machine, results: list[Measurement], args: argparse.Namespace) -> str:
    lines = [
        f"machine: {machine.cpus} cpus ({machine.cpu_model}), {machine.python}, "
        f"kube {machine.kube}, load average {machine.load_average:.2f} at start",
        f"workload: SchedulingBasic, {args.nodes} nodes (4 cpu, 32Gi, 110 pods), {args.pods} "
        f"pods (100m, 500Mi) per scheduler, {args.concurrency} creates in flight",
        "",
        f"{'scheduler':<15} {'bound':>11} {'seconds':>8} {'pods/s':>8} {'created/s':>10} "
        f"{'p50 ms':>8} {'p99 ms':>8} {'algorithm ms':>13}",
    ]
    for r in results:
        mean = r.algorithm_mean_ms
        algorithm = f"{mean:.2f}" if mean is not None else "-"
        lines.append(
            f"{r.scheduler:<15} {f'{r.bound}/{r.pods}':>11} {r.seconds:8.2f} "
            f"{r.pods_per_second:8.1f} {r.creates_per_second:10.1f} {r.latency_p50_ms:8.0f} "
            f"{r.latency_p99_ms:8.0f} {algorithm:>13}"
        )
    columns = ("scheduler", "kube-apiserver", "etcd", "bench client", "other", "machine")
    lines += ["", f"CPU seconds in each run ({machine.cpus} cpus: {machine.cpus} CPU-s per s):"]
    lines.append(f"{'run':<15} " + " ".join(f"{c:>14}" for c in columns))
    for r in results:
        cells = [
            f"{r.cpu_seconds[c]:14.2f}" if c in r.cpu_seconds else f"{'-':>14}" for c in columns
        ]
        lines.append(f"{r.scheduler:<15} " + " ".join(cells))
    value = ratio(results)
    if value is not None:
        lines += ["", f"ratio batchsched / kube-scheduler (pods/s): {value:.2f}x"]
    return "\n".join(lines)


async def main(args: argparse.Namespace) -> int:
    args.run_dir = new_run_dir()
    print(f"logs: {args.run_dir}", flush=True)
    if args.kubeconfig:
        plane = attach_control_plane(args.kubeconfig)
    else:
        plane = await asyncio.to_thread(start_control_plane, args.run_dir)
    try:
        machine, results = await bench(plane, args)
    finally:
        if plane.owned and not args.keep:
            await asyncio.to_thread(stop_control_plane, plane)
        elif plane.owned:
            print(f"kept: KUBECONFIG={plane.kubeconfig}; stop with BATCHSCHED_CP_DIR="
                  f"{plane.state_dir} scripts/control-plane.sh down --purge")  # fmt: skip
    print(render(machine, results, args))
    if args.json:
        report = {
            "machine": asdict(machine),
            "workload": {"nodes": args.nodes, "pods": args.pods, "concurrency": args.concurrency},
            "results": [asdict(r) for r in results],
            "ratio_pods_per_second": ratio(results),
        }
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0 if all(r.bound == r.pods for r in results) else EXIT_UNBOUND


def run(args: argparse.Namespace) -> int:
    code = EXIT_BENCH_ERROR
    try:
        code = asyncio.run(main(args))
    except* (BenchError, ApiError, ApiUnavailable, KubeConfigError) as group:
        for err in group.exceptions:
            print(f"bench e2e: {err}", file=sys.stderr)
    return code


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "e2e", help="batchsched vs kube-scheduler on a real API server (SchedulingBasic)"
    )
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--pods", type=int, default=5000, help="pods per scheduler")
    parser.add_argument("--concurrency", type=int, default=64, help="create requests in flight")
    parser.add_argument(
        "--timeout", type=float, default=600.0, help="seconds from the first create until all bound"
    )
    parser.add_argument("--kubeconfig", type=Path, help="use this API server instead of a new one")
    parser.add_argument("--only", choices=SCHEDULERS, help="run one scheduler")
    parser.add_argument("--keep", action="store_true", help="leave the control plane and Nodes")
    parser.add_argument("--json", type=Path, metavar="OUT", help="write the figures as JSON too")
    parser.add_argument(
        "--profile-batchsched",
        type=Path,
        metavar="OUT",
        help="run batchsched under cProfile, stats to OUT (slows it: not for the figures)",
    )
    parser.set_defaults(run=run)
