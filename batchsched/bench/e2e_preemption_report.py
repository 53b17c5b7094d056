"""What the preemption bench reports: per-scheduler figures and the table (e2e_preemption.py)."""

from __future__ import annotations

import argparse
import math
import os
from dataclasses import dataclass, field
from typing import Final

from batchsched.bench.e2e_report import Machine

LOW_PRIORITY: Final = 0
HIGH_PRIORITY: Final = 10
LOW_CPU_MILLI: Final = 900
HIGH_CPU_MILLI: Final = 3000
NODE_CPU_MILLI: Final = 4000  # e2e_cluster.node_body


@dataclass
class PreemptionMeasurement:
    """One scheduler's run; times in seconds unless named _ms."""

    scheduler: str
    low: int
    low_bound: int
    low_seconds: float  # first low create -> last low pod seen bound
    high: int
    bound: int  # high pods bound
    seconds: float  # first high create -> last high pod seen bound (the timeout if some never)
    pods_per_second: float
    create_seconds: float  # first high create -> last high create answered
    latency_p50_ms: float  # per high pod: seen on the watch -> seen bound
    latency_p99_ms: float
    victims: int  # low pods deleted or terminating once the high phase ended
    terminating: int  # ... of which still there with a deletionTimestamp
    reported_victims: float | None = None  # the scheduler's scheduler_preemption_victims sum
    preemption_attempts: float | None = None  # its scheduler_preemption_attempts_total
    cpu_seconds: dict[str, float] = field(default_factory=dict)
    api_writes: dict[str, int] = field(default_factory=dict)  # high phase, bench's included
    bench_watch_reconnects: int = 0


def metric_sum(text: str, name: str) -> float | None:
    """Purely computational: the sum over every series of one Prometheus sample name."""
    values = [
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.split("{", 1)[0].split(" ", 1)[0] == name
    ]
    return sum(values) if values else None


def fewest_victims(nodes: int, low: int, high: int) -> int | None:
    """Purely computational: the fewest victims that make room for every high pod when the
    low pods fill every node evenly (None otherwise): each high pod on a node of its own."""
    per_node, rest = divmod(low, nodes)
    if rest or high > nodes:
        return None
    free = NODE_CPU_MILLI - per_node * LOW_CPU_MILLI
    each = max(0, math.ceil((HIGH_CPU_MILLI - free) / LOW_CPU_MILLI))
    return high * each if each <= per_node else None


def ratio(results: list[PreemptionMeasurement]) -> float | None:
    rates = {r.scheduler: r.pods_per_second for r in results}
    if "batchsched" not in rates or not rates.get("kube-scheduler"):
        return None
    return rates["batchsched"] / rates["kube-scheduler"]


def _cell(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def row(r: PreemptionMeasurement) -> str:
    return (
        f"{r.scheduler:<15} {f'{r.low_bound}/{r.low}':>10} {r.low_seconds:7.2f} "
        f"{f'{r.bound}/{r.high}':>10} {r.seconds:8.2f} {r.pods_per_second:8.1f} "
        f"{r.latency_p50_ms:8.0f} {r.latency_p99_ms:8.0f} {r.victims:8d} {r.terminating:6d} "
        f"{_cell(r.reported_victims, '.0f'):>9} {_cell(r.preemption_attempts, '.0f'):>9}"
    )


def render(machine: Machine, results: list[PreemptionMeasurement], args: argparse.Namespace) -> str:
    columns = ("scheduler", "kube-apiserver", "etcd", "bench client", "other", "machine")
    least = fewest_victims(args.nodes, args.low, args.high)
    lines = [
        f"machine: {machine.cpus} cpus ({machine.cpu_model}), {machine.python}, kube "
        f"{machine.kube}, load average {machine.load_average:.2f} at start, "
        f"{os.getloadavg()[0]:.2f} at end",
        f"workload: PreemptionBasic, {args.nodes} nodes (4 cpu, 32Gi, 110 pods); {args.low} "
        f"low pods (900m, 500Mi, priority {LOW_PRIORITY}) bound first by the scheduler under "
        f"test; {args.high} high pods (3000m, 500Mi, priority {HIGH_PRIORITY}) measured; "
        f"{args.concurrency} creates in flight",
        "termination: no kubelet; low pods have terminationGracePeriodSeconds 0, so a victim "
        "deleted (kube-scheduler) or evicted (batchsched) is removed at once",
        "",
        f"{'scheduler':<15} {'low bound':>10} {'low s':>7} {'high bound':>10} {'seconds':>8} "
        f"{'pods/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'victims':>8} {'term.':>6} "
        f"{'reported':>9} {'attempts':>9}",
        *(row(r) for r in results),
        f"fewest possible victims: {_cell(least, 'd')} (victims: low pods gone or terminating "
        "after the run; reported: the scheduler's scheduler_preemption_victims sum)",
        "",
        "CPU seconds used during the high-priority phase:",
        f"{'run':<15} " + " ".join(f"{c:>14}" for c in columns) + f" {'sched ms/pod':>13}",
    ]
    for r in results:
        cells = " ".join(f"{r.cpu_seconds.get(c, float('nan')):14.2f}" for c in columns)
        per_pod = r.cpu_seconds.get("scheduler", float("nan")) / max(1, r.bound) * 1e3
        lines.append(f"{r.scheduler:<15} {cells} {per_pod:13.2f}")
    lines += ["", "API writes during the high-priority phase (the bench's creates included):"]
    lines += [
        f"{r.scheduler:<15} " + ", ".join(f"{k} {n}" for k, n in r.api_writes.items())
        for r in results
    ]
    lines += [
        f"note: the bench's watch was cut {r.bench_watch_reconnects} time(s) in the "
        f"{r.scheduler} run: its times may lag"
        for r in results
        if r.bench_watch_reconnects
    ]
    value = ratio(results)
    if value is not None:
        lines += ["", f"ratio batchsched / kube-scheduler (high-priority pods/s): {value:.2f}x"]
    return "\n".join(lines)
