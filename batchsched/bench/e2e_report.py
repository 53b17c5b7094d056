"""What the end-to-end bench reports: per-scheduler figures and the table (e2e.py)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from batchsched.bench import harness_report
from batchsched.bench.harness_report import Machine, cell, cpu_table, machine_line, watch_cut_note


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
    # stream: created while the scheduler ran, timed from the first create; backlog: all
    # created first, timed from the scheduler's start (create_seconds: its start-up)
    mode: str = "stream"

    @property
    def scheduler_cpu_ms_per_pod(self) -> float | None:
        used = self.cpu_seconds.get("scheduler")
        return used / self.bound * 1e3 if used is not None and self.bound else None


def ratio(results: list[Measurement], mode: str = "stream") -> float | None:
    """batchsched's pods/s over kube-scheduler's in `mode`, when both ran in it."""
    pods_per_second = {r.scheduler: r.pods_per_second for r in results if r.mode == mode}
    return harness_report.ratio(pods_per_second, "kube-scheduler")


def _run(r: Measurement) -> str:
    return f"{r.scheduler} {r.mode}"


def _modes(results: list[Measurement]) -> list[str]:
    return list(dict.fromkeys(r.mode for r in results))


def render(
    machine: Machine, results: list[Measurement], nodes: int, pods: int, concurrency: int
) -> str:
    lines = [
        machine_line(machine, load_at_end=False),
        f"workload: SchedulingBasic, {nodes} nodes (4 cpu, 32Gi, 110 pods), {pods} "
        f"pods (100m, 500Mi) per scheduler, {concurrency} creates in flight",
        "",
        *_throughput_table(results),
        "",
        f"CPU seconds used during each run ({machine.cpus} cpus: at most {machine.cpus} per s):",
        *cpu_table(((_run(r), r.cpu_seconds, r.scheduler_cpu_ms_per_pod) for r in results), 22),
        *_notes(results),
    ]
    for mode in _modes(results):
        value = ratio(results, mode)
        if value is not None:
            lines += ["", f"ratio batchsched / kube-scheduler (pods/s, {mode}): {value:.2f}x"]
    return "\n".join(lines)


def _throughput_table(results: list[Measurement]) -> list[str]:
    lines = [
        f"{'scheduler':<15} {'mode':<8} {'bound':>11} {'seconds':>8} {'pods/s':>8} "
        f"{'created/s':>10} {'p50 ms':>8} {'p99 ms':>8} {'algorithm ms':>13}"
    ]
    for r in results:
        algorithm = cell(r.algorithm_mean_ms, ".2f")
        lines.append(
            f"{r.scheduler:<15} {r.mode:<8} {f'{r.bound}/{r.pods}':>11} {r.seconds:8.2f} "
            f"{r.pods_per_second:8.1f} {r.creates_per_second:10.1f} {r.latency_p50_ms:8.0f} "
            f"{r.latency_p99_ms:8.0f} {algorithm:>13}"
        )
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
            where = f"the {r.scheduler} run"
            notes.append(watch_cut_note(r.bench_watch_reconnects, where, "bound times"))
    return ["", *notes] if notes else []


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
        "ratio_pods_per_second_by_mode": {m: ratio(results, m) for m in _modes(results)},
    }
