"""Text and JSON for the views: kubectl-style tables (`-o table|wide`) and `-o json`."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence

from batchsched.expected_runtime import human_duration
from batchsched.views.explain import Explanation
from batchsched.views.gpus import GpuView
from batchsched.views.queue import QueueView


def table(rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "   ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows
    )


def as_json(view: QueueView | GpuView | Explanation) -> str:
    return json.dumps(dataclasses.asdict(view), indent=2, sort_keys=True)


def _gpus(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


def _start(seconds: float | None, source: str) -> str:
    if seconds is None:
        return "-"
    text = "now" if seconds < 1 else f"in {human_duration(seconds)}"
    return f"{text}*" if source == "planned" else text


def queue_text(view: QueueView, wide: bool = False) -> str:
    head = ["POS", "TENANT", "#", "WORKLOAD", "PODS", "GPUS", "PRIO", "AGE", "START", "REASON"]
    if wide:
        head[4:5] = ["PENDING/MIN"]
    rows = [head]
    for r in view.rows:
        pods = f"{r.pending}/{r.min_member}" if wide else str(r.pending)
        reason = r.reason if wide or len(r.reason) <= 60 else r.reason[:57] + "..."
        rows.append(
            [
                str(r.position),
                r.tenant or "<none>",
                str(r.tenant_position),
                r.workload if r.gang else f"pod:{r.workload}",
                pods,
                f"{r.gpus:g}",
                str(r.priority),
                human_duration(r.age_s),
                _start(r.start_in_s, r.start_source),
                reason,
            ]
        )
    tenants = [["TENANT", "USED GPUS", "GUARANTEED", "MAX", "FAIR SHARE", "PENDING"]]
    for t in view.tenants:
        tenants.append(
            [
                t.tenant,
                _gpus(t.used_gpus),
                _gpus(t.guaranteed_gpus),
                _gpus(t.max_gpus),
                f"{t.fair_share:.3f}",
                str(t.pending),
            ]
        )
    parts = [table(rows) if view.rows else "No pending workloads."]
    parts.append(table(tenants))
    if any(r.start_source == "planned" for r in view.rows):
        parts.append(
            "* planned here from expected runtimes; the others were published by the leader"
        )
    return "\n\n".join(parts)


def gpus_text(view: GpuView) -> str:
    rows = [["NODE", "MODEL", "GPUS", "USED", "FREE", "FREE NVLINK ISLANDS", "FRAG"]]
    for n in view.nodes:
        islands = "+".join(str(i) for i in n.islands) if len(n.islands) > 1 else str(n.free)
        rows.append(
            [
                n.node,
                n.model,
                str(n.allocatable),
                f"{n.used:g}",
                str(n.free),
                f"{n.free_islands}/{len(n.islands)} whole ({islands} free)",
                f"{n.fragmentation:.2f}",
            ]
        )
    rows.append(
        [
            "TOTAL",
            "",
            str(view.allocatable),
            f"{view.used:g}",
            str(view.free),
            "",
            f"{view.fragmentation:.2f}",
        ]
    )
    return table(rows)


def explain_text(e: Explanation) -> str:
    lines = [f"Workload:     {e.workload}", f"Tenant:       {e.tenant}"]
    lines.append(f"Queue:        {'position ' + str(e.position) if e.position else 'not queued'}")
    if e.gang is not None:
        g = e.gang
        lines.append(
            f"Gang:         minMember {g.min_member}, {g.bound} bound, "
            f"{len(g.pending)} pending ({', '.join(g.pending)})"
        )
        if g.domain:
            lines.append(f"Domain:       {g.domain}")
    nodes = "Nodes:        " if e.gang is None else "Nodes (1 member alone): "
    lines += [
        f"{nodes}{e.nodes}",
        f"Cycle:        {e.cycle}",
        f"Quota:        {e.quota}",
        f"Start:        {e.start}",
        f"Preemption:   {e.preemption}",
    ]
    if e.changes:
        lines.append("To start, it needs:")
        lines += [f"  - {c}" for c in e.changes]
    return "\n".join(lines)
