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
import functools
import time
from pathlib import Path
from typing import Final

from kubernetes_asyncio.client import ApiClient

from batchsched.bench.e2e_cluster import (
    BenchError,
    create_namespace,
    create_nodes,
    create_object,
    create_or_keep,
    delete_pods,
    run_bounded,
)
from batchsched.bench.e2e_preemption_report import (
    HIGH_CPU_MILLI,
    HIGH_PRIORITY,
    LOW_CPU_MILLI,
    LOW_PRIORITY,
    PreemptionMeasurement,
    metric_sum,
    render,
    row,
    to_json,
)
from batchsched.bench.harness import (
    EXIT_UNBOUND,
    Report,
    UnderTest,
    add_harness_arguments,
    add_profile_argument,
    compare,
    run_bench,
    running,
    scheduler_order,
)
from batchsched.bench.harness_phase import scheduler_metrics, timed_phase
from batchsched.kube.client import request_json

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
        await create_or_keep(api, CLASSES_PATH, body)


async def create_batch(
    api: ApiClient, namespace: str, scheduler_name: str, count: int, concurrency: int, *, low: bool
) -> None:
    """low-<i> or high-<i>."""
    path = f"/api/v1/namespaces/{namespace}/pods"
    prefix = "low" if low else "high"

    async def create(i: int) -> None:
        await create_object(api, path, pod_body(f"{prefix}-{i}", scheduler_name, low=low))

    await run_bounded(count, concurrency, create)


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


async def measure(args: argparse.Namespace, run: UnderTest) -> list[PreemptionMeasurement]:
    api, scheduler = run.api, run.scheduler
    base = f"preempt-{scheduler.name}-{time.strftime('%H%M%S')}"
    low_ns, high_ns = f"{base}-low", f"{base}-high"
    await create_namespace(api, low_ns)
    await create_namespace(api, high_ns)
    try:
        async with running(scheduler):
            result = await _measure_running(args, run, low_ns, high_ns)
    finally:
        await delete_pods(api, high_ns)
        await delete_pods(api, low_ns)
    print(f"  {row(result)}", flush=True)
    return [result]


async def _measure_running(
    args: argparse.Namespace, run: UnderTest, low_ns: str, high_ns: str
) -> PreemptionMeasurement:
    api, scheduler = run.api, run.scheduler
    name, concurrency = scheduler.scheduler_name, args.concurrency
    print(f"{scheduler.name}: binding {args.low} low-priority pods ...", flush=True)
    create = functools.partial(create_batch, api, low_ns, name, args.low, concurrency, low=True)
    low = await timed_phase(api, low_ns, args.low, create, args.timeout)
    if low.bound < args.low:
        raise BenchError(f"{scheduler.name} bound {low.bound}/{args.low} low pods")
    print(f"{scheduler.name}: {args.high} high-priority pods ...", flush=True)
    create = functools.partial(create_batch, api, high_ns, name, args.high, concurrency, low=False)
    high = await timed_phase(
        api, high_ns, args.high, create, args.timeout, meter=run.cpu_meter(), count_writes=True
    )
    victims, terminating = await count_victims(api, low_ns, args.low)
    metrics = await scheduler_metrics(scheduler)
    return PreemptionMeasurement(
        scheduler=scheduler.name,
        low=args.low,
        low_bound=low.bound,
        low_seconds=low.seconds,
        high=args.high,
        bound=high.bound,
        seconds=high.seconds,
        pods_per_second=high.bound / high.seconds,
        create_seconds=high.create_seconds,
        latency_p50_ms=high.latency_ms(50),
        latency_p99_ms=high.latency_ms(99),
        victims=victims,
        terminating=terminating,
        reported_victims=metric_sum(metrics, "scheduler_preemption_victims_sum"),
        preemption_attempts=metric_sum(metrics, "scheduler_preemption_attempts_total"),
        cpu_seconds=high.cpu_seconds,
        api_writes=high.api_writes,
        bench_watch_reconnects=high.watch.reconnects + low.watch.reconnects,
    )


async def bench(args: argparse.Namespace, run_dir: Path) -> Report:
    async def set_up(api: ApiClient) -> None:
        await create_priority_classes(api)
        await create_nodes(api, args.nodes, args.concurrency)

    names = scheduler_order(SCHEDULERS, args.only, baseline_first=args.kube_scheduler_first)
    each = functools.partial(measure, args)
    machine, results = await compare(args, run_dir, names, set_up, each, args.profile_batchsched)
    code = 0 if all(r.bound == r.high for r in results) else EXIT_UNBOUND
    return Report(render(machine, results, args), to_json(machine, results, args), code)


def run(args: argparse.Namespace) -> int:
    return run_bench("preemption", args, functools.partial(bench, args))


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
