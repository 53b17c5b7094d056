"""What the end-to-end bench reports: per-scheduler figures, the machine, the table."""

from __future__ import annotations

import os
import platform
from dataclasses import asdict, dataclass, field
from pathlib import Path


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
    algorithm_mean_ms: float | None = None  # the scheduler's own mean per cycle, no binding
    cpu_seconds: dict[str, float] = field(default_factory=dict)  # by process, in the run
    bench_watch_reconnects: int = 0  # the bench's own watch was cut: its times lag
    pod_watch_retries: int | None = None  # the scheduler's Pod watch waited to resume

    @property
    def scheduler_cpu_ms_per_pod(self) -> float | None:
        used = self.cpu_seconds.get("scheduler")
        return used / self.bound * 1e3 if used is not None and self.bound else None


@dataclass
class Machine:
    cpus: int
    cpu_model: str
    python: str
    kube: str
    load_average: float  # 1-minute, at the start: other work on the box skews the figures


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
    """batchsched's pods/s over kube-scheduler's, when both ran."""
    rates = {r.scheduler: r.pods_per_second for r in results}
    if "batchsched" not in rates or not rates.get("kube-scheduler"):
        return None
    return rates["batchsched"] / rates["kube-scheduler"]


def render(
    machine: Machine, results: list[Measurement], nodes: int, pods: int, concurrency: int
) -> str:
    lines = [
        f"machine: {machine.cpus} cpus ({machine.cpu_model}), {machine.python}, "
        f"kube {machine.kube}, load average {machine.load_average:.2f} at start",
        f"workload: SchedulingBasic, {nodes} nodes (4 cpu, 32Gi, 110 pods), {pods} "
        f"pods (100m, 500Mi) per scheduler, {concurrency} creates in flight",
        "",
        *_throughput_table(results),
        "",
        f"CPU seconds used during each run ({machine.cpus} cpus: at most {machine.cpus} per s):",
        *_cpu_table(results),
        *_notes(results),
    ]
    value = ratio(results)
    if value is not None:
        lines += ["", f"ratio batchsched / kube-scheduler (pods/s): {value:.2f}x"]
    return "\n".join(lines)


def _throughput_table(results: list[Measurement]) -> list[str]:
    lines = [
        f"{'scheduler':<15} {'bound':>11} {'seconds':>8} {'pods/s':>8} {'created/s':>10} "
        f"{'p50 ms':>8} {'p99 ms':>8} {'algorithm ms':>13}"
    ]
    for r in results:
        algorithm = _cell(r.algorithm_mean_ms, ".2f")
        lines.append(
            f"{r.scheduler:<15} {f'{r.bound}/{r.pods}':>11} {r.seconds:8.2f} "
            f"{r.pods_per_second:8.1f} {r.creates_per_second:10.1f} {r.latency_p50_ms:8.0f} "
            f"{r.latency_p99_ms:8.0f} {algorithm:>13}"
        )
    return lines


def _cpu_table(results: list[Measurement]) -> list[str]:
    columns = ("scheduler", "kube-apiserver", "etcd", "bench client", "other", "machine")
    lines = [f"{'run':<15} " + " ".join(f"{c:>14}" for c in columns) + f" {'sched ms/pod':>13}"]
    for r in results:
        cells = [f"{_cell(r.cpu_seconds.get(c), '.2f'):>14}" for c in columns]
        per_pod = _cell(r.scheduler_cpu_ms_per_pod, ".2f")
        lines.append(f"{r.scheduler:<15} " + " ".join(cells) + f" {per_pod:>13}")
    return lines


def _notes(results: list[Measurement]) -> list[str]:
    notes = []
    for r in results:
        if r.pod_watch_retries:
            notes.append(
                f"note: {r.scheduler}'s Pod watch ended and waited to resume "
                f"{r.pod_watch_retries} time(s) (see its log): no new pods reached it meanwhile"
            )
        if r.bench_watch_reconnects:
            notes.append(
                f"note: the bench's watch was cut {r.bench_watch_reconnects} time(s) in the "
                f"{r.scheduler} run: its bound times may lag"
            )
    return ["", *notes] if notes else []


def _cell(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def to_json(
    machine: Machine, results: list[Measurement], nodes: int, pods: int, concurrency: int
) -> dict[str, object]:
    return {
        "machine": asdict(machine),
        "workload": {"nodes": nodes, "pods": pods, "concurrency": concurrency},
        "results": [
            {**asdict(r), "scheduler_cpu_ms_per_pod": r.scheduler_cpu_ms_per_pod} for r in results
        ],
        "ratio_pods_per_second": ratio(results),
    }
