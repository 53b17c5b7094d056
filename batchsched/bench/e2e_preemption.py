"""Preemption on one real API server: batchsched vs kube-scheduler, in one run (PreemptionBasic).

`python -m batchsched.bench preemption --nodes 500 --low 2000 --high 500`

scheduler_perf's PreemptionBasic/500Nodes: Nodes of 4 cpu, 32Gi, 110 pods; 2000 low-priority
pods of 900m and 500Mi (four fill a node: 3.6 of 4 cpu), then 500 high-priority pods of 3000m
and 500Mi, measured. Each high pod fits only where three low pods go (0.4 + 3 x 0.9 >= 3).

1. Bring up etcd + kube-apiserver (scripts/control-plane.sh) or use `--kubeconfig`; install
   the CRDs; create N Nodes and two PriorityClasses (low 0, high 10: the API server's
   Priority admission refuses a bare spec.priority, so scheduler_perf's "priority: 10" is a
   class here). The same Nodes and classes serve both schedulers.
2. For each scheduler in turn: start it; in a fresh namespace pair, create the low pods and
   wait until the scheduler under test has bound them all (with 4 x 900m per 4-cpu node,
   binding all of them leaves exactly four on every node, whichever scheduler binds them:
   both start the measured phase from the same layout). Then create the high pods and time
   from the first create to the last high pod seen bound on a watch. Victims are the low
   pods gone or terminating afterwards.
3. Termination: no kubelet runs, so a deleted pod with a grace period would stay Terminating.
   The low pods carry terminationGracePeriodSeconds: 0, as in scheduler_perf's template, so
   kube-scheduler's DELETE and batchsched's Eviction (which deletes with the pod's own grace
   period) both remove a victim at once, and both schedulers see the same.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Final

from kubernetes_asyncio.client import ApiClient

from batchsched.bench.e2e import make_scheduler
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
    create_object,
    delete_bench_nodes,
    delete_pods,
    install_crds,
    kube_version,
    new_run_dir,
    run_bench,
    run_bounded,
)
from batchsched.bench.e2e_gang import api_writes
from batchsched.bench.e2e_preemption_report import (
    HIGH_CPU_MILLI,
    HIGH_PRIORITY,
    LOW_CPU_MILLI,
    LOW_PRIORITY,
    PreemptionMeasurement,
    fewest_victims,
    metric_sum,
    ratio,
    render,
    row,
)
from batchsched.bench.e2e_procs import CpuMeter, SchedulerProcess
from batchsched.bench.e2e_report import Machine, machine_info
from batchsched.bench.e2e_watch import BindWatch, percentile
from batchsched.kube.client import (
    ApiError,
    api_client,
    request_json,
)

SCHEDULERS: Final = ("batchsched", "kube-scheduler")
CLASSES_PATH: Final = "/apis/scheduling.k8s.io/v1/priorityclasses"
LOW_CLASS: Final = "bench-preemption-low"
HIGH_CLASS: Final = "bench-preemption-high"


def pod_body(name: str, scheduler_name: str, *, low: bool) -> dict[str, object]:
    cpu = f"{LOW_CPU_MILLI if low else HIGH_CPU_MILLI}m"
    amounts = {"cpu": cpu, "memory": "500Mi"}
    container = {
        "name": "pause",
        "image": "registry.k8s.io/pause:3.10",
        "ports": [{"containerPort": 80}],
        "resources": {"requests": amounts, "limits": amounts},
    }
    spec: dict[str, object] = {
        "schedulerName": scheduler_name,
        "priorityClassName": LOW_CLASS if low else HIGH_CLASS,
        "containers": [container],
    }
    if low:
        spec["terminationGracePeriodSeconds"] = 0  # no kubelet: a victim must go at once
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


async def create_priority_classes(api: ApiClient) -> None:
    for name, value in ((LOW_CLASS, LOW_PRIORITY), (HIGH_CLASS, HIGH_PRIORITY)):
        body = {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": name},
            "value": value,
            "preemptionPolicy": "PreemptLowerPriority",
        }
        try:
            await create_object(api, CLASSES_PATH, body)
        except ApiError as err:
            if err.status != 409:
                raise


async def create_batch(
    api: ApiClient, namespace: str, scheduler_name: str, count: int, concurrency: int, *, low: bool
) -> tuple[float, float]:
    """low-<i> or high-<i>; (first request sent, last answer) on perf_counter."""
    path = f"/api/v1/namespaces/{namespace}/pods"
    prefix = "low" if low else "high"

    async def create(i: int) -> None:
        await create_object(api, path, pod_body(f"{prefix}-{i}", scheduler_name, low=low))

    started = time.perf_counter()
    await run_bounded(count, concurrency, create)
    return started, time.perf_counter()


async def timed_batch(
    api: ApiClient,
    namespace: str,
    scheduler_name: str,
    count: int,
    args: argparse.Namespace,
    *,
    low: bool,
) -> tuple[BindWatch, float, float, float]:
    """Create the batch under a watch; (watch, first create, last create answered, end)."""
    watch = BindWatch(api, namespace, count)
    async with asyncio.TaskGroup() as tasks:
        watching = tasks.create_task(watch.run())
        await watch.wait_watching()
        started, created = await create_batch(
            api, namespace, scheduler_name, count, args.concurrency, low=low
        )
        complete = await watch.wait_all_bound(started + args.timeout)
        ended = max(watch.bound.values()) if complete else time.perf_counter()
        watching.cancel()
    return watch, started, created, ended


async def count_victims(api: ApiClient, namespace: str, created: int) -> tuple[int, int]:
    """(low pods gone or terminating, low pods terminating) in the namespace."""
    listing = await request_json(api, "GET", f"/api/v1/namespaces/{namespace}/pods")
    items = listing.get("items")
    pods = items if isinstance(items, list) else []
    terminating = sum(1 for p in pods if _deleting(p))
    return created - len(pods) + terminating, terminating


def _deleting(pod: object) -> bool:
    meta = pod.get("metadata") if isinstance(pod, dict) else None
    return isinstance(meta, dict) and bool(meta.get("deletionTimestamp"))


async def measure(
    api: ApiClient, plane: ControlPlane, scheduler: SchedulerProcess, args: argparse.Namespace
) -> PreemptionMeasurement:
    base = f"preempt-{scheduler.name}-{time.strftime('%H%M%S')}"
    low_ns, high_ns = f"{base}-low", f"{base}-high"
    await create_namespace(api, low_ns)
    await create_namespace(api, high_ns)
    try:
        await scheduler.start()
        try:
            return await _measure_running(api, plane, scheduler, args, low_ns, high_ns)
        finally:
            await scheduler.stop()
    finally:
        await delete_pods(api, high_ns)
        await delete_pods(api, low_ns)


async def _measure_running(
    api: ApiClient,
    plane: ControlPlane,
    scheduler: SchedulerProcess,
    args: argparse.Namespace,
    low_ns: str,
    high_ns: str,
) -> PreemptionMeasurement:
    name = scheduler.scheduler_name
    print(f"{scheduler.name}: binding {args.low} low-priority pods ...", flush=True)
    low_watch, low_start, _, low_end = await timed_batch(
        api, low_ns, name, args.low, args, low=True
    )
    if len(low_watch.bound) < args.low:
        raise BenchError(f"{scheduler.name} bound {len(low_watch.bound)}/{args.low} low pods")
    print(f"{scheduler.name}: {args.high} high-priority pods ...", flush=True)
    meter = CpuMeter(
        {
            "scheduler": scheduler.pid(),
            "kube-apiserver": plane.pid("kube-apiserver"),
            "etcd": plane.pid("etcd"),
            "bench client": os.getpid(),
        }
    )
    writes_before = await api_writes(api)
    meter.start()
    watch, started, created, ended = await timed_batch(
        api, high_ns, name, args.high, args, low=False
    )
    cpu = meter.stop()
    writes = {k: n - writes_before.get(k, 0) for k, n in (await api_writes(api)).items()}
    victims, terminating = await count_victims(api, low_ns, args.low)
    metrics = await _scheduler_metrics(scheduler)
    seconds = ended - started
    latencies = watch.latencies()
    return PreemptionMeasurement(
        scheduler=scheduler.name,
        low=args.low,
        low_bound=len(low_watch.bound),
        low_seconds=low_end - low_start,
        high=args.high,
        bound=len(watch.bound),
        seconds=seconds,
        pods_per_second=len(watch.bound) / seconds,
        create_seconds=created - started,
        latency_p50_ms=percentile(latencies, 50) * 1e3,
        latency_p99_ms=percentile(latencies, 99) * 1e3,
        victims=victims,
        terminating=terminating,
        reported_victims=metric_sum(metrics, "scheduler_preemption_victims_sum"),
        preemption_attempts=metric_sum(metrics, "scheduler_preemption_attempts_total"),
        cpu_seconds=cpu,
        api_writes={k: n for k, n in sorted(writes.items()) if n > 0},
        bench_watch_reconnects=watch.reconnects + low_watch.reconnects,
    )


async def _scheduler_metrics(scheduler: SchedulerProcess) -> str:
    try:
        return await scheduler.metrics()
    except (BenchError, OSError, TimeoutError) as err:
        print(f"{scheduler.name}: no /metrics ({err})", file=sys.stderr)
        return ""


async def bench(
    plane: ControlPlane, args: argparse.Namespace, run_dir: Path
) -> tuple[Machine, list[PreemptionMeasurement]]:
    names = [args.only] if args.only else list(SCHEDULERS)
    if args.kube_scheduler_first:
        names.reverse()
    schedulers = [make_scheduler(n, plane, run_dir, args.profile_batchsched) for n in names]
    api = await api_client(str(plane.kubeconfig))
    async with api:
        machine = machine_info(await kube_version(api))
        others = await count_nodes(api)
        if others:
            print(f"note: the cluster already has {others} node(s); they take pods too")
        await install_crds(api)
        await create_priority_classes(api)
        await create_nodes(api, args.nodes, args.concurrency)
        results = []
        for scheduler in schedulers:
            result = await measure(api, plane, scheduler, args)
            print(f"  {row(result)}", flush=True)
            results.append(result)
        if not plane.owned and not args.keep:
            await delete_bench_nodes(api)
    return machine, results


async def main(args: argparse.Namespace) -> int:
    run_dir = new_run_dir()
    print(f"logs: {run_dir}", flush=True)
    async with control_plane_for(args.kubeconfig, run_dir, keep=args.keep) as plane:
        machine, results = await bench(plane, args, run_dir)
    print(render(machine, results, args))
    if args.json:
        body = {
            "machine": asdict(machine),
            "load_average_end": os.getloadavg()[0],
            "workload": {k: getattr(args, k) for k in ("nodes", "low", "high", "concurrency")},
            "fewest_victims": fewest_victims(args.nodes, args.low, args.high),
            "results": [asdict(r) for r in results],
            "ratio_pods_per_second": ratio(results),
        }
        args.json.write_text(json.dumps(body, indent=2) + "\n")
    return 0 if all(r.bound == r.high for r in results) else EXIT_UNBOUND


def run(args: argparse.Namespace) -> int:
    return run_bench("preemption", lambda: main(args))


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "preemption", help="preemption: batchsched vs kube-scheduler on a real API server"
    )
    parser.add_argument("--nodes", type=int, default=500, help="nodes of 4 cpu, 32Gi")
    parser.add_argument("--low", type=int, default=2000, help="low-priority pods, bound first")
    parser.add_argument("--high", type=int, default=500, help="high-priority pods, measured")
    add_harness_arguments(parser, SCHEDULERS, "seconds per phase until all bound")
    parser.add_argument(
        "--kube-scheduler-first", action="store_true", help="run the baseline first (order bias)"
    )
    add_profile_argument(parser)
    parser.set_defaults(run=run)
