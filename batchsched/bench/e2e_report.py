"""What the end-to-end bench reports: per-scheduler figures and the table (e2e.py)."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Final

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
    round: int = 1  # which of the bench's --rounds

    @property
    def scheduler_cpu_ms_per_pod(self) -> float | None:
        used = self.cpu_seconds.get("scheduler")
        return used / self.bound * 1e3 if used is not None and self.bound else None


def ratio(results: list[Measurement], mode: str = "stream", round_: int = 1) -> float | None:
    """batchsched's pods/s over kube-scheduler's in `mode` and round, when both ran in it."""
    pods_per_second = {
        r.scheduler: r.pods_per_second for r in results if r.mode == mode and r.round == round_
    }
    return harness_report.ratio(pods_per_second, "kube-scheduler")


def _rounds(results: list[Measurement]) -> list[int]:
    return sorted({r.round for r in results})


def _run(r: Measurement, many_rounds: bool) -> str:
    run = f"{r.scheduler} {r.mode}"
    return f"{run} r{r.round}" if many_rounds else run


def _modes(results: list[Measurement]) -> list[str]:
    return list(dict.fromkeys(r.mode for r in results))


def render(
    machine: Machine, results: list[Measurement], nodes: int, pods: int, concurrency: int
) -> str:
    many = len(_rounds(results)) > 1
    lines = [
        machine_line(machine, load_at_end=False),
        f"workload: SchedulingBasic, {nodes} nodes (4 cpu, 32Gi, 110 pods), {pods} "
        f"pods (100m, 500Mi) per scheduler, {concurrency} creates in flight",
        "",
        *_throughput_table(results, many),
        "",
        f"CPU seconds used during each run ({machine.cpus} cpus: at most {machine.cpus} per s):",
        *cpu_table(
            ((_run(r, many), r.cpu_seconds, r.scheduler_cpu_ms_per_pod) for r in results), 25
        ),
        *_notes(results),
    ]
    for mode in _modes(results):
        value = ratio(results, mode)
        if value is not None and not many:
            lines += ["", f"ratio batchsched / kube-scheduler (pods/s, {mode}): {value:.2f}x"]
    if many:
        lines += ["", *_spread_lines(results)]
    return "\n".join(lines)


# What each round's ratio is taken of, batchsched over kube-scheduler: above 1 is better for
# pods/s, below 1 for the others.
_RATIOS: Final = (
    ("pods/s", lambda r: r.pods_per_second),
    ("scheduler CPU ms/pod", lambda r: r.scheduler_cpu_ms_per_pod),
    ("p50 latency", lambda r: r.latency_p50_ms),
    ("p99 latency", lambda r: r.latency_p99_ms),
)


def round_ratios(
    results: list[Measurement], mode: str, figure: Callable[[Measurement], float | None]
) -> list[float]:
    """batchsched's figure over kube-scheduler's in each round both ran `mode` in."""
    found = []
    for number in _rounds(results):
        pair = {r.scheduler: figure(r) for r in results if r.mode == mode and r.round == number}
        ours, theirs = pair.get("batchsched"), pair.get("kube-scheduler")
        if ours is not None and theirs:
            found.append(ours / theirs)
    return found


def _spread_lines(results: list[Measurement]) -> list[str]:
    lines = [f"ratios batchsched / kube-scheduler, each round ({len(_rounds(results))} rounds):"]
    for mode in _modes(results):
        for name, figure in _RATIOS:
            values = round_ratios(results, mode, figure)
            if not values:
                continue
            each = " ".join(f"{v:.2f}x" for v in values)
            lines.append(
                f"  {mode:<8} {name:<21} {each}   min {min(values):.2f}x, median "
                f"{statistics.median(values):.2f}x, max {max(values):.2f}x"
            )
    return lines


def _throughput_table(results: list[Measurement], many_rounds: bool) -> list[str]:
    head = f"{'round':>5} " if many_rounds else ""
    lines = [
        f"{'scheduler':<15} {'mode':<8} {head}{'bound':>11} {'seconds':>8} {'pods/s':>8} "
        f"{'created/s':>10} {'p50 ms':>8} {'p99 ms':>8} {'algorithm ms':>13}"
    ]
    for r in results:
        algorithm = cell(r.algorithm_mean_ms, ".2f")
        number = f"{r.round:>5} " if many_rounds else ""
        lines.append(
            f"{r.scheduler:<15} {r.mode:<8} {number}{f'{r.bound}/{r.pods}':>11} "
            f"{r.seconds:8.2f} {r.pods_per_second:8.1f} {r.creates_per_second:10.1f} "
            f"{r.latency_p50_ms:8.0f} {r.latency_p99_ms:8.0f} {algorithm:>13}"
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
        "ratios_by_round": {
            m: {name: round_ratios(results, m, figure) for name, figure in _RATIOS}
            for m in _modes(results)
        },
    }
