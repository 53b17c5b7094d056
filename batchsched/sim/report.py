"""The HTML report: index.html with the summary as tables and PNG plots (matplotlib, Agg
backend). matplotlib is the `report` extra's: it is imported here only, when a report is
written. The paper's method places each pod on arrival or never, so its report has no
wait-time plot, only a sentence saying so."""

from __future__ import annotations

import html
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Final

from batchsched.sim.run import PAPER, Outcome

if TYPE_CHECKING:
    from matplotlib.figure import Figure

ALLOCATION_PNG: Final = "allocation_vs_arrived.png"
UTILISATION_PNG: Final = "utilisation_over_time.png"
WAIT_CDF_PNG: Final = "wait_time_cdf.png"
_SIZE: Final = (7.0, 4.0)


def write_report(outcome: Outcome, directory: Path, title: str) -> list[Path]:
    """Write index.html and the PNGs into `directory` (created if needed); returns the files."""
    import matplotlib

    matplotlib.use("Agg")  # files only: no display on servers or in CI
    directory.mkdir(parents=True, exist_ok=True)
    files = [
        _allocation_plot(outcome, directory / ALLOCATION_PNG),
        _utilisation_plot(outcome, directory / UTILISATION_PNG),
    ]
    if outcome.method != PAPER:
        files.append(_wait_plot(outcome, directory / WAIT_CDF_PNG))
    index = directory / "index.html"
    index.write_text(_html(outcome, title))
    return [index, *files]


def _allocation_plot(outcome: Outcome, path: Path) -> Path:
    import matplotlib.pyplot as plt

    curve = outcome.recorder.curve()
    arrived = [p["arrived_pct"] for p in curve]
    fig, ax = plt.subplots(figsize=_SIZE)
    ax.plot(arrived, [p["gpu_alloc_pct"] for p in curve], label="GPU allocated")
    ax.plot(arrived, [p["frag_gpu_pct"] for p in curve], "--", label="GPU fragmented")
    ax.plot([0, 100], [0, 100], ":", color="grey", label="everything placed")
    ax.set_xlabel("arrived GPU requests (% of cluster GPUs)")
    ax.set_ylabel("% of cluster GPUs")
    ax.set_xlim(0, max(arrived[-1], 1))
    ax.set_ylim(0, 105)
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left")
    return _save(fig, path)


def _utilisation_plot(outcome: Outcome, path: Path) -> Path:
    import matplotlib.pyplot as plt

    rows = outcome.recorder.timeline()
    paper = outcome.method == PAPER
    # In the paper's method one pod arrives per virtual second, so time is the pod count.
    xs = [r["t"] if paper else r["t"] / 3600 for r in rows]
    fig, ax = plt.subplots(figsize=_SIZE)
    gpu = [r["gpu_alloc_pct"] for r in rows]
    cpu = [r["cpu_alloc_pct"] for r in rows]
    ax.plot(xs, gpu, label="GPU allocated")
    ax.plot(xs, cpu, label="CPU allocated")
    ax.set_xlabel("pods arrived" if paper else "virtual time (hours)")
    ax.set_ylabel("% of cluster capacity")
    # A replay that never loads the cluster much still shows its shape.
    ax.set_ylim(0, min(105.0, max(5.0, 1.15 * max(gpu + cpu, default=0.0))))
    ax.grid(alpha=0.3)
    waiting = ax.twinx()
    waiting.plot(xs, [r["waiting"] for r in rows], color="tab:red", alpha=0.6, label="waiting")
    waiting.set_ylabel("pods waiting")
    lines = ax.get_legend_handles_labels()
    more = waiting.get_legend_handles_labels()
    ax.legend(lines[0] + more[0], lines[1] + more[1], loc="lower right")
    return _save(fig, path)


def _wait_plot(outcome: Outcome, path: Path) -> Path:
    import matplotlib.pyplot as plt

    waits = sorted(outcome.recorder.waits)
    fig, ax = plt.subplots(figsize=_SIZE)
    if waits:
        fractions = [(i + 1) / len(waits) for i in range(len(waits))]
        ax.step(waits, fractions, where="post")
        if waits[-1] > 0 and waits[-1] > 100 * max(waits[len(waits) // 2], 1):
            ax.set_xscale("symlog")
    ax.set_xlabel("wait from arrival to placement (virtual seconds)")
    ax.set_ylabel("fraction of placed pods")
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3)
    waiting = outcome.simulator.waiting
    ax.set_title(f"{len(waits)} placed, {waiting} still waiting at the end", fontsize=10)
    return _save(fig, path)


def _save(fig: Figure, path: Path) -> Path:
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _html(outcome: Outcome, title: str) -> str:
    plots = [
        (ALLOCATION_PNG, "GPU allocation and fragmentation against arrived load"),
        (UTILISATION_PNG, "Allocation and waiting pods over time"),
    ]
    if outcome.method != PAPER:
        plots.append((WAIT_CDF_PNG, "Wait-time distribution (CDF)"))
    images = "\n".join(
        f'<figure><img src="{name}" alt="{alt}"><figcaption>{alt}</figcaption></figure>'
        for name, alt in plots
    )
    if outcome.method == PAPER:
        images += (
            "\n<p>No wait-time plot: the paper's method places each pod when it arrives or "
            "never, so no pod waits. Replay (<code>--method replay</code>) has waits.</p>"
        )
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>body{{font-family:sans-serif;max-width:60em;margin:2em auto}}
th{{text-align:left;padding-right:1em}}td table{{border-left:1px solid #ccc}}
figure{{margin:1em 0}}</style></head>
<body><h1>{html.escape(title)}</h1>
{_table(outcome.summary())}
{images}
</body></html>
"""


def _table(values: Mapping[str, object]) -> str:
    """A mapping as a two-column table; a nested mapping as a table in its cell."""
    rows = "\n".join(
        f"<tr><th>{html.escape(str(key))}</th><td>{_cell(value)}</td></tr>"
        for key, value in values.items()
    )
    return f"<table>\n{rows}\n</table>"


def _cell(value: object) -> str:
    if isinstance(value, Mapping):
        return _table(value)
    if isinstance(value, list | tuple):
        return html.escape(", ".join(_plain(v) for v in value))
    return html.escape(_plain(value))


def _plain(value: object) -> str:
    if isinstance(value, Mapping):
        return "; ".join(f"{k}: {_plain(v)}" for k, v in value.items())
    return "" if value is None else str(value)
