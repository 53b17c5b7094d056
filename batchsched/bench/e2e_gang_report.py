"""What the gang bench reports: per scheduler and shape figures and the table (e2e_gang.py)."""

from __future__ import annotations

import argparse
import os
from dataclasses import asdict, dataclass, field
from typing import Final

from batchsched.bench import harness_report
from batchsched.bench.harness_report import (
    Machine,
    api_writes_lines,
    cpu_table,
    machine_line,
    watch_cut_note,
)

GPU: Final = "nvidia.com/gpu"
_LABEL_WIDTH: Final = 29
# What the bench itself writes during a run (apiserver_request_total "VERB resource").
BENCH_WRITES: Final = frozenset({"POST pods", "POST podgroups"})


@dataclass
class GangMeasurement:
    """One scheduler on one gang shape; times in seconds unless named _ms."""

    scheduler: str
    shape: str
    gangs: int
    size: int
    bound_pods: int
    complete_gangs: int  # every member bound
    partial_gangs: int  # some but not all members bound at the end: a gang split apart
    seconds: float  # first PodGroup create -> last pod seen bound (the timeout if some never)
    gangs_per_second: float
    pods_per_second: float
    create_seconds: float  # first PodGroup create -> last pod create answered
    gang_p50_ms: float  # per gang: last member seen created -> last member seen bound
    gang_p99_ms: float
    cpu_seconds: dict[str, float] = field(default_factory=dict)
    # Mutating requests the API server answered during the run, "VERB resource[/sub]": the
    # bench's own creates and deletes are the same for both schedulers; the rest is theirs.
    api_writes: dict[str, int] = field(default_factory=dict)
    bench_watch_reconnects: int = 0

    @property
    def label(self) -> str:
        return f"{self.scheduler} {self.shape}"

    @property
    def scheduler_writes(self) -> dict[str, int]:
        """The API writes beyond the bench's own creates: the scheduler's."""
        return {k: n for k, n in self.api_writes.items() if k not in BENCH_WRITES}

    @property
    def writes_per_gang(self) -> float:
        return sum(self.scheduler_writes.values()) / max(1, self.gangs)


def ratios(results: list[GangMeasurement]) -> dict[str, float]:
    """Per shape: batchsched's gangs/s over Coscheduling's, when both ran."""
    out = {}
    for shape in dict.fromkeys(r.shape for r in results):
        rates = {r.scheduler: r.gangs_per_second for r in results if r.shape == shape}
        value = harness_report.ratio(rates, "coscheduling")
        if value is not None:
            out[shape] = value
    return out


def row(r: GangMeasurement) -> str:
    return (
        f"{r.scheduler:<13} {r.shape:>15} {f'{r.complete_gangs}/{r.gangs}':>10} "
        f"{r.partial_gangs:>7} {f'{r.bound_pods}/{r.gangs * r.size}':>11} "
        f"{r.seconds:8.2f} {r.gangs_per_second:8.1f} {r.pods_per_second:8.1f} "
        f"{r.create_seconds:8.2f} {r.gang_p50_ms:8.0f} {r.gang_p99_ms:8.0f}"
    )


def writes_per_gang_lines(results: list[GangMeasurement]) -> list[str]:
    """The scheduler's writes per gang (the bench's creates left out), by resource: issue
    #17 asks for at most Coscheduling's + 1."""
    counted = [r for r in results if r.api_writes]
    if not counted:
        return []
    lines = [
        "",
        "API writes per gang by the scheduler (apiserver_request_total, creates left out):",
    ]
    for r in counted:
        gangs = max(1, r.gangs)
        parts = ", ".join(f"{k} {n / gangs:.2f}" for k, n in r.scheduler_writes.items())
        lines.append(f"{r.label:<{_LABEL_WIDTH}} {r.writes_per_gang:6.2f} ({parts})")
    return lines


def render(machine: Machine, results: list[GangMeasurement], args: argparse.Namespace) -> str:
    nan = float("nan")
    cpu = [
        (r.label, r.cpu_seconds, r.cpu_seconds.get("scheduler", nan) / max(1, r.bound_pods) * 1e3)
        for r in results
    ]
    title = "API writes during each run (the bench's creates included):"
    lines = [
        machine_line(machine, load_at_end=True),
        f"workload: {args.nodes} nodes (64 cpu, 512Gi, 110 pods, 8 {GPU}); pods 1 {GPU}, "
        f"100m, 500Mi; {args.concurrency} creates in flight",
        "",
        f"{'scheduler':<13} {'shape':>15} {'gangs':>10} {'partial':>7} {'pods':>11} "
        f"{'seconds':>8} {'gangs/s':>8} {'pods/s':>8} {'create s':>8} {'p50 ms':>8} "
        f"{'p99 ms':>8}",
        *(row(r) for r in results),
        "",
        "CPU seconds used during each run:",
        *cpu_table(cpu, _LABEL_WIDTH, missing=nan),
        *api_writes_lines(title, ((r.label, r.api_writes) for r in results), _LABEL_WIDTH),
        *writes_per_gang_lines(results),
        *(
            watch_cut_note(r.bench_watch_reconnects, r.label)
            for r in results
            if r.bench_watch_reconnects
        ),
    ]
    for shape, value in ratios(results).items():
        lines.append(f"ratio batchsched / coscheduling, {shape} (gangs/s): {value:.2f}x")
    return "\n".join(lines)


def to_json(
    machine: Machine, results: list[GangMeasurement], args: argparse.Namespace
) -> dict[str, object]:
    return {
        "machine": asdict(machine),
        "load_average_end": os.getloadavg()[0],
        "workload": {
            "nodes": args.nodes,
            "concurrency": args.concurrency,
            "shapes": [s.label for s in args.shapes],
        },
        "results": [asdict(r) for r in results],
        "ratio_gangs_per_second": ratios(results),
        "scheduler_writes_per_gang": {r.label: r.writes_per_gang for r in results if r.api_writes},
    }
