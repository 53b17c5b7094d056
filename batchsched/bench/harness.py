"""The end-to-end bench harness the e2e, gang, preemption and chaos benches share.

`run_bench` is the command's shell: a run dir for the logs, the bench, its report printed
and written as JSON, its exit code, and the expected failures as one line each. `compare`
is the body of the benches that compare schedulers on one API server: the control plane
(ours or `--kubeconfig`), the scheduler processes built up front, the machine, the CRDs and
the bench's own objects, then each scheduler measured in turn. A measurement runs its
scheduler with `running` and times its phases with `harness_phase.timed_phase`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, TypeVar

from kubernetes_asyncio.client import ApiClient

from batchsched.bench.e2e_cluster import (
    BenchError,
    ControlPlane,
    control_plane_for,
    count_nodes,
    delete_bench_nodes,
    install_crds,
    kube_version,
    new_run_dir,
)
from batchsched.bench.e2e_procs import CpuMeter, SchedulerProcess, make_scheduler
from batchsched.bench.harness_phase import cpu_meter
from batchsched.bench.harness_report import Machine, machine_info
from batchsched.kube.client import ApiError, ApiUnavailable, KubeConfigError, api_client

EXIT_UNBOUND: Final = 1  # the run finished, but not every pod was bound
EXIT_BENCH_ERROR: Final = 2  # the bench itself could not run

R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class Report:
    """What a bench prints, writes with --json, and exits with."""

    text: str
    body: Mapping[str, object]
    exit_code: int


def run_bench(
    name: str, args: argparse.Namespace, bench: Callable[[Path], Awaitable[Report]]
) -> int:
    """Run one end-to-end bench to its exit code; its expected failures (no control plane, an
    API error, a bad kubeconfig) are printed as one line each, not as tracebacks."""
    code = EXIT_BENCH_ERROR
    try:
        code = asyncio.run(_report(args, bench))
    except* (BenchError, ApiError, ApiUnavailable, KubeConfigError) as group:
        for err in group.exceptions:
            print(f"bench {name}: {err}", file=sys.stderr)
    return code


async def _report(args: argparse.Namespace, bench: Callable[[Path], Awaitable[Report]]) -> int:
    run_dir = new_run_dir()
    print(f"logs: {run_dir}", flush=True)
    report = await bench(run_dir)  # the control plane is down again when it returns
    print(report.text)
    if args.json:
        args.json.write_text(json.dumps(report.body, indent=2, default=str) + "\n")
    return report.exit_code


@dataclass(frozen=True)
class UnderTest:
    """One scheduler to measure, on the API server of the run."""

    api: ApiClient
    plane: ControlPlane
    scheduler: SchedulerProcess
    round: int = 1  # which of `--rounds`, from 1

    def cpu_meter(self) -> CpuMeter:
        return cpu_meter(self.plane, self.scheduler)


async def compare(
    args: argparse.Namespace,
    run_dir: Path,
    names: Sequence[str],
    set_up: Callable[[ApiClient], Awaitable[None]],
    measure: Callable[[UnderTest], Awaitable[list[R]]],
    profile: Path | None = None,
    rounds: int = 1,
) -> tuple[Machine, list[R]]:
    """Each scheduler of `names` measured in turn on one control plane, after `set_up` made
    the bench's objects; `profile`: batchsched under cProfile. With several `rounds` the
    order alternates (the second round starts with the last scheduler), so neither always
    runs on the warmer or the more crowded API server."""
    async with control_plane_for(args.kubeconfig, run_dir, keep=args.keep) as plane:
        # Built first, so a scheduler that cannot run fails the bench before any work.
        schedulers = [make_scheduler(n, plane, run_dir, profile) for n in names]
        api = await api_client(str(plane.kubeconfig))
        async with api:
            machine = machine_info(await kube_version(api))
            others = await count_nodes(api)
            if others:
                print(f"note: the cluster already has {others} node(s); they take pods too")
            await install_crds(api)
            await set_up(api)
            results: list[R] = []
            for number in range(1, rounds + 1):
                for scheduler in round_order(schedulers, number):
                    results += await measure(UnderTest(api, plane, scheduler, number))
            if not plane.owned and not args.keep:
                await delete_bench_nodes(api)
    return machine, results


def round_order(schedulers: Sequence[R], number: int) -> list[R]:
    """Round `number` (from 1) runs the schedulers in order, the next one in reverse."""
    return list(schedulers) if number % 2 else list(schedulers)[::-1]


def scheduler_order(
    schedulers: Sequence[str], only: str | None, *, baseline_first: bool = False
) -> list[str]:
    """batchsched first, then the baseline (`--only` one of them; `baseline_first` reverses)."""
    names = [only] if only else list(schedulers)
    return names[::-1] if baseline_first else names


@contextlib.asynccontextmanager
async def running(scheduler: SchedulerProcess) -> AsyncIterator[SchedulerProcess]:
    """Started and ready inside; stopped afterwards, also when it never got ready."""
    try:
        await scheduler.start()
        yield scheduler
    finally:
        await scheduler.stop()


STREAM: Final = "stream"  # pods created while the scheduler runs, timed from the first create
BACKLOG: Final = "backlog"  # every pod created first, timed from the scheduler's start


def parse_modes(text: str) -> list[str]:
    """`--modes stream,backlog`: the modes to measure each scheduler in, in this order."""
    modes = [m for m in text.split(",") if m]
    unknown = sorted(set(modes) - {STREAM, BACKLOG})
    if unknown or not modes:
        raise argparse.ArgumentTypeError(f"modes are {STREAM} and {BACKLOG}, not {text!r}")
    return modes


def add_modes_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--modes",
        type=parse_modes,
        default=[STREAM],
        help="stream (pods created while the scheduler runs: measures creation too), backlog "
        "(every pod first, then the scheduler starts: measures the scheduler), or both: "
        "stream,backlog",
    )


def add_harness_arguments(
    parser: argparse.ArgumentParser, schedulers: Sequence[str], timeout_help: str
) -> None:
    """The options every end-to-end bench shares: load, limits, where and what to keep."""
    parser.add_argument("--concurrency", type=int, default=64, help="create requests in flight")
    parser.add_argument("--timeout", type=float, default=600.0, help=timeout_help)
    parser.add_argument("--kubeconfig", type=Path, help="use this API server instead of a new one")
    parser.add_argument("--only", choices=schedulers, help="run one scheduler")
    parser.add_argument("--keep", action="store_true", help="leave the control plane and Nodes")
    parser.add_argument("--json", type=Path, metavar="OUT", help="write the figures as JSON too")


def add_rounds_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--rounds",
        type=_positive,
        default=1,
        help="measure every scheduler this many times, alternating which goes first; the "
        "report gives each round and the spread of the ratios",
    )


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"at least 1, not {value}")
    return value


def add_profile_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--profile-batchsched",
        type=Path,
        metavar="OUT",
        help="run batchsched under cProfile, stats to OUT (slows it: not for the figures)",
    )


def script_main(
    module: str,
    command: str,
    add_parser: Callable[[argparse._SubParsersAction[argparse.ArgumentParser]], None],
) -> int:
    """`python -m batchsched.bench.<module> ...`: the same as `... bench <command> ...`."""
    parser = argparse.ArgumentParser(prog=f"python -m batchsched.bench.{module}")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args([command, *sys.argv[1:]])
    return int(args.run(args))
