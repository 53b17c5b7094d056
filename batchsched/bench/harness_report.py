"""The parts of an end-to-end bench's report that every bench prints the same way: the
machine, CPU seconds by process, API writes, the bench watch's cuts, a ratio. Purely
computational but for `machine_info`, which reads the machine once at the start."""

from __future__ import annotations

import os
import platform
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

# The processes a CpuMeter names (harness_phase.cpu_meter), then the rest and the total.
CPU_COLUMNS: Final = ("scheduler", "kube-apiserver", "etcd", "bench client", "other", "machine")


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


def machine_line(machine: Machine, *, load_at_end: bool) -> str:
    """`load_at_end`: the load average now too (the report is rendered after the run)."""
    end = f", {os.getloadavg()[0]:.2f} at end" if load_at_end else ""
    return (
        f"machine: {machine.cpus} cpus ({machine.cpu_model}), {machine.python}, "
        f"kube {machine.kube}, load average {machine.load_average:.2f} at start{end}"
    )


def cell(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


CpuRow = tuple[str, Mapping[str, float], float | None]  # label, seconds by process, ms per pod


def cpu_table(rows: Iterable[CpuRow], label_width: int, missing: float | None = None) -> list[str]:
    """One line per run: CPU seconds by process (`missing` where a process was not measured,
    "-" for None) and the scheduler's CPU ms per bound pod."""
    header = f"{'run':<{label_width}} " + " ".join(f"{c:>14}" for c in CPU_COLUMNS)
    lines = [header + f" {'sched ms/pod':>13}"]
    for label, seconds, per_pod in rows:
        cells = " ".join(f"{cell(seconds.get(c, missing), '.2f'):>14}" for c in CPU_COLUMNS)
        lines.append(f"{label:<{label_width}} {cells} {cell(per_pod, '.2f'):>13}")
    return lines


def api_writes_lines(
    title: str, rows: Iterable[tuple[str, Mapping[str, int]]], label_width: int
) -> list[str]:
    """A blank line, `title`, then per run "VERB resource N, ..." (harness_phase.api_writes)."""
    return [
        "",
        title,
        *(
            f"{label:<{label_width}} " + ", ".join(f"{k} {n}" for k, n in writes.items())
            for label, writes in rows
        ),
    ]


def watch_cut_note(times: int, where: str, what: str = "times") -> str:
    return f"note: the bench's watch was cut {times} time(s) in {where}: its {what} may lag"


def ratio(rates: Mapping[str, float], baseline: str) -> float | None:
    """batchsched's rate over `baseline`'s, when both ran (and the baseline's is not 0)."""
    if "batchsched" not in rates or not rates.get(baseline):
        return None
    return rates["batchsched"] / rates[baseline]
