"""What topology-e2e reports: per scheduler figures side by side, the ratios batchsched/each,
and whether the issue's goal was met. Purely computational but for the load average."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Final

from batchsched.bench import harness_report
from batchsched.bench.e2e_topology_measure import Outcome
from batchsched.bench.harness_report import Machine, api_writes_lines, cpu_table, machine_line
from batchsched.sim.tightness import level_name

BASELINES: Final = ("kube-scheduler", "coscheduling")
ATTEMPT_RESULTS: Final = ("scheduled", "unschedulable", "error")
_LABEL_WIDTH: Final = 15
# "other" CPU (processes outside the run) above this share of the machine's is called out
_BUSY_SHARE: Final = 0.1


@dataclass
class TopologyMeasurement:
    """One scheduler on the workload; times in seconds unless named _ms."""

    scheduler: str
    encoding: str
    gangs: int
    pods: int
    bound_pods: int
    complete_gangs: int
    partial_gangs: int  # some but not all members bound at the end: a gang split apart
    unstarted_gangs: int
    seconds: float  # first create -> last pod seen bound
    create_seconds: float  # first create -> last create answered
    gangs_per_second: float  # complete gangs / seconds
    gang_p50_ms: float  # per complete gang: last member seen created -> last member seen bound
    gang_p99_ms: float
    in_tightest: int  # complete gangs in their tightest feasible domain
    preferred: int  # complete gangs asking for a preferred level
    preferred_in_tightest: int
    required: int  # complete gangs asking for a required level
    honoured: int
    placed_by_level: tuple[int, ...]
    feasible_by_level: tuple[int, ...]
    gpu_allocation: float  # bound GPUs / the cluster's, at the end
    levels: tuple[str, ...] = ()
    left_by_gpus: dict[int, int] = field(default_factory=dict)  # gangs not bound whole
    attempts: dict[str, int] = field(default_factory=dict)  # scheduler_schedule_attempts_total
    cpu_seconds: dict[str, float] = field(default_factory=dict)
    api_writes: dict[str, int] = field(default_factory=dict)
    bench_watch_reconnects: int = 0

    @property
    def tightest_share(self) -> float:
        return self.in_tightest / self.complete_gangs if self.complete_gangs else 0.0

    @property
    def honoured_share(self) -> float:
        return self.honoured / self.required if self.required else 1.0


@dataclass(frozen=True, slots=True)
class PhaseFigures:
    """What the timed phase measured, beside the outcome."""

    bound_pods: int
    seconds: float
    create_seconds: float
    cpu_seconds: dict[str, float]
    api_writes: dict[str, int]
    bench_watch_reconnects: int
    attempts: dict[str, int]


def measurement(
    scheduler: str, encoding: str, outcome: Outcome, pods: int, phase: PhaseFigures
) -> TopologyMeasurement:
    s = outcome.summary
    return TopologyMeasurement(
        scheduler=scheduler,
        encoding=encoding,
        gangs=outcome.complete + outcome.partial + outcome.unstarted,
        pods=pods,
        bound_pods=phase.bound_pods,
        complete_gangs=outcome.complete,
        partial_gangs=outcome.partial,
        unstarted_gangs=outcome.unstarted,
        seconds=phase.seconds,
        create_seconds=phase.create_seconds,
        gangs_per_second=outcome.complete / phase.seconds if phase.seconds > 0 else 0.0,
        gang_p50_ms=outcome.p50_ms,
        gang_p99_ms=outcome.p99_ms,
        in_tightest=s.in_tightest,
        preferred=s.preferred,
        preferred_in_tightest=s.preferred_in_tightest,
        required=s.required,
        honoured=s.honoured,
        placed_by_level=s.placed_by_level,
        feasible_by_level=s.feasible_by_level,
        gpu_allocation=outcome.gpu_allocation,
        levels=s.levels,
        left_by_gpus=dict(outcome.left_by_gpus),
        attempts=phase.attempts,
        cpu_seconds=phase.cpu_seconds,
        api_writes=phase.api_writes,
        bench_watch_reconnects=phase.bench_watch_reconnects,
    )


def _share(part: int, whole: int) -> str:
    return f"{part}/{whole} {part / whole:.1%}" if whole else "-"


def _rows(r: TopologyMeasurement) -> list[tuple[str, str]]:
    rows = [
        ("gangs bound whole", f"{r.complete_gangs}/{r.gangs}"),
        ("  split (partly bound)", str(r.partial_gangs)),
        ("  none bound", str(r.unstarted_gangs)),
        ("  not whole, by GPUs: gangs", _by_size(r.left_by_gpus)),
        ("pods bound", f"{r.bound_pods}/{r.pods}"),
        ("seconds (first create -> last bind)", f"{r.seconds:.2f}"),
        ("  of which creating", f"{r.create_seconds:.2f}"),
        ("  after the last create", f"{r.seconds - r.create_seconds:.2f}"),
        ("gangs/s", f"{r.gangs_per_second:.2f}"),
        ("pods bound / s", f"{r.bound_pods / r.seconds if r.seconds > 0 else 0.0:.1f}"),
        ("gang p50 / p99 ms", f"{r.gang_p50_ms:.0f} / {r.gang_p99_ms:.0f}"),
        ("in tightest feasible domain", _share(r.in_tightest, r.complete_gangs)),
        ("  preferred gangs", _share(r.preferred_in_tightest, r.preferred)),
        ("required honoured", _share(r.honoured, r.required)),
    ]
    for i, count in enumerate(r.placed_by_level):
        rows.append((f"placed within one {level_name(r.levels, i)}", str(count)))
    for i, count in enumerate(r.feasible_by_level):
        rows.append((f"tightest feasible: {level_name(r.levels, i)}", str(count)))
    rows.append(("GPU allocation at end", f"{r.gpu_allocation:.1%}"))
    attempts = " / ".join(str(r.attempts.get(k, 0)) for k in ATTEMPT_RESULTS)
    rows.append(("attempts scheduled / unschedulable / error", attempts if r.attempts else "-"))
    return rows


def _by_size(counts: Mapping[int, int]) -> str:
    return " ".join(f"{gpus}:{n}" for gpus, n in sorted(counts.items())) or "-"


def table(results: Sequence[TopologyMeasurement]) -> list[str]:
    """The schedulers side by side, one column each."""
    names = [name for name, _ in _rows(results[0])]
    cells = [[value for _, value in _rows(r)] for r in results]
    width = max(map(len, names))
    widths = [max(len(r.scheduler), *map(len, c)) for r, c in zip(results, cells, strict=True)]
    head = "".join(f"  {r.scheduler:>{w}}" for r, w in zip(results, widths, strict=True))
    lines = [" " * width + head]
    for i, name in enumerate(names):
        line = "".join(f"  {c[i]:>{w}}" for c, w in zip(cells, widths, strict=True))
        lines.append(f"{name:<{width}}{line}")
    return lines


RATIO_METRICS: Final = ("gangs_per_second", "tightest_share", "gpu_allocation")


def ratios(results: Sequence[TopologyMeasurement]) -> dict[str, dict[str, float | None]]:
    """batchsched / each baseline that ran, per metric; None where the baseline's is 0."""
    by_name = {r.scheduler: r for r in results}
    ours = by_name.get("batchsched")
    out: dict[str, dict[str, float | None]] = {}
    for baseline in BASELINES:
        theirs = by_name.get(baseline)
        if ours is None or theirs is None:
            continue
        out[baseline] = {
            m: _over(float(getattr(ours, m)), float(getattr(theirs, m))) for m in RATIO_METRICS
        }
    return out


def _over(ours: float, theirs: float) -> float | None:
    return ours / theirs if theirs else None


def _x(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def goal_lines(results: Sequence[TopologyMeasurement]) -> list[str]:
    """The issue's goal: >= 1.0x gangs/s of both baselines, and the highest share of gangs in
    their tightest feasible domain of the three (a tie counts); met or NOT met, said plainly."""
    by_name = {r.scheduler: r for r in results}
    missing = [n for n in ("batchsched", *BASELINES) if n not in by_name]
    if missing:
        return [f"goal: not judged ({', '.join(missing)} did not run)"]
    ours = by_name["batchsched"]
    fast = all(ours.gangs_per_second >= by_name[b].gangs_per_second for b in BASELINES)
    tight = all(ours.tightest_share >= by_name[b].tightest_share for b in BASELINES)
    rates = ratios(results)
    speed = ", ".join(f"{_x(rates[b]['gangs_per_second'])} {b}" for b in BASELINES)
    shares = ", ".join(f"{r.scheduler} {r.tightest_share:.1%}" for r in results)
    return [
        f"goal: gangs/s >= 1.0x both baselines: {'met' if fast else 'NOT met'} ({speed})",
        f"goal: highest tightness share of the three: {'met' if tight else 'NOT met'} ({shares})",
    ]


def render(machine: Machine, results: Sequence[TopologyMeasurement], workload_line: str) -> str:
    nan = float("nan")
    cpu = [
        (
            r.scheduler,
            r.cpu_seconds,
            r.cpu_seconds.get("scheduler", nan) / max(1, r.bound_pods) * 1e3,
        )
        for r in results
    ]
    lines = [machine_line(machine, load_at_end=True), workload_line, "", *table(results), ""]
    lines += ["CPU seconds used during each run:", *cpu_table(cpu, _LABEL_WIDTH, missing=nan)]
    title = "API writes during each run (the bench's creates included):"
    lines += api_writes_lines(title, ((r.scheduler, r.api_writes) for r in results), _LABEL_WIDTH)
    lines += [
        harness_report.watch_cut_note(r.bench_watch_reconnects, r.scheduler)
        for r in results
        if r.bench_watch_reconnects
    ]
    lines += [_busy_note(r) for r in results if _disturbed(r)]
    lines.append("")
    for baseline, values in ratios(results).items():
        lines.append(
            f"ratio batchsched / {baseline}: gangs/s {_x(values['gangs_per_second'])}, "
            f"tightness share {_x(values['tightest_share'])}, "
            f"GPU allocation {_x(values['gpu_allocation'])}"
        )
    return "\n".join([*lines, *goal_lines(results)])


def _disturbed(r: TopologyMeasurement) -> bool:
    machine = r.cpu_seconds.get("machine", 0.0)
    return machine > 0 and r.cpu_seconds.get("other", 0.0) > _BUSY_SHARE * machine


def _busy_note(r: TopologyMeasurement) -> str:
    return (
        f"note: processes outside the run used {r.cpu_seconds['other']:.1f} of the machine's "
        f"{r.cpu_seconds['machine']:.1f} CPU-s during {r.scheduler}'s run: its figures are "
        "disturbed"
    )


def to_json(
    machine: Machine, results: Sequence[TopologyMeasurement], workload: Mapping[str, object]
) -> dict[str, object]:
    return {
        "machine": asdict(machine),
        "load_average_end": os.getloadavg()[0],
        "workload": dict(workload),
        "results": [
            {**asdict(r), "tightest_share": r.tightest_share, "honoured_share": r.honoured_share}
            for r in results
        ],
        "ratios": ratios(results),
        "goal": goal_lines(results),
    }
