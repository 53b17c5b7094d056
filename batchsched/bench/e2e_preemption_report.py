"""What the preemption bench reports: per-scheduler figures and the table (e2e_preemption.py)."""

from __future__ import annotations

import argparse
import math
import os
from dataclasses import asdict, dataclass, field
from typing import Final

from batchsched.bench import harness_report
from batchsched.bench.harness_report import (
    Machine,
    api_writes_lines,
    cell,
    cpu_table,
    machine_line,
    watch_cut_note,
)

LOW_PRIORITY: Final = 0
HIGH_PRIORITY: Final = 10
LOW_CPU_MILLI: Final = 900
HIGH_CPU_MILLI: Final = 3000
NODE_CPU_MILLI: Final = 4000  # e2e_cluster.node_body
_LABEL_WIDTH: Final = 15


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
    return harness_report.ratio({r.scheduler: r.pods_per_second for r in results}, "kube-scheduler")


def row(r: PreemptionMeasurement) -> str:
    return (
        f"{r.scheduler:<15} {f'{r.low_bound}/{r.low}':>10} {r.low_seconds:7.2f} "
        f"{f'{r.bound}/{r.high}':>10} {r.seconds:8.2f} {r.pods_per_second:8.1f} "
        f"{r.latency_p50_ms:8.0f} {r.latency_p99_ms:8.0f} {r.victims:8d} {r.terminating:6d} "
        f"{cell(r.reported_victims, '.0f'):>9} {cell(r.preemption_attempts, '.0f'):>9}"
    )


def render(machine: Machine, results: list[PreemptionMeasurement], args: argparse.Namespace) -> str:
    least = fewest_victims(args.nodes, args.low, args.high)
    nan = float("nan")
    cpu = [
        (r.scheduler, r.cpu_seconds, r.cpu_seconds.get("scheduler", nan) / max(1, r.bound) * 1e3)
        for r in results
    ]
    writes = ((r.scheduler, r.api_writes) for r in results)
    lines = [
        machine_line(machine, load_at_end=True),
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
        f"fewest possible victims: {cell(least, 'd')} (victims: low pods gone or terminating "
        "after the run; reported: the scheduler's scheduler_preemption_victims sum)",
        "",
        "CPU seconds used during the high-priority phase:",
        *cpu_table(cpu, _LABEL_WIDTH, missing=nan),
        *api_writes_lines(
            "API writes during the high-priority phase (the bench's creates included):",
            writes,
            _LABEL_WIDTH,
        ),
        *(
            watch_cut_note(r.bench_watch_reconnects, f"the {r.scheduler} run")
            for r in results
            if r.bench_watch_reconnects
        ),
    ]
    value = ratio(results)
    if value is not None:
        lines += ["", f"ratio batchsched / kube-scheduler (high-priority pods/s): {value:.2f}x"]
    return "\n".join(lines)


def to_json(
    machine: Machine, results: list[PreemptionMeasurement], args: argparse.Namespace
) -> dict[str, object]:
    return {
        "machine": asdict(machine),
        "load_average_end": os.getloadavg()[0],
        "workload": {k: getattr(args, k) for k in ("nodes", "low", "high", "concurrency")},
        "fewest_victims": fewest_victims(args.nodes, args.low, args.high),
        "results": [asdict(r) for r in results],
        "ratio_pods_per_second": ratio(results),
    }
