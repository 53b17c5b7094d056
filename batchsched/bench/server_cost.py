"""What a write costs the API server and etcd, by how many are in flight.

    python -m batchsched.bench server-cost [--requests 3000] [--in-flight 4,32,96,256]
        [--rounds 2] [--kubeconfig K]

Each round posts `--requests` Events (the scheduler's `Scheduled` Event after each bind) at
every in-flight level, the order of the levels reversed every other round, through the
scheduler's own client. It prints the CPU seconds kube-apiserver and etcd used per request,
read from /proc for the pids in the control plane's state dir: so the API server must be
one that scripts/control-plane.sh started (its own, or the one `--kubeconfig` names).

Why: the scheduler picks how many binds and Events it keeps in flight
(runtime/event_sender.py), and the cost of a write to the server falls when many arrive
together (etcd commits them in one batch).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

from batchsched.bench.e2e_cluster import ControlPlane, control_plane_for, new_run_dir
from batchsched.bench.e2e_procs import process_cpu_seconds
from batchsched.kube.client import api_client, micro_time, request_json

__all__ = ["Level", "add_parser", "event_body", "parse_levels"]

NAMESPACE = "default"
EVENTS = f"/apis/events.k8s.io/v1/namespaces/{NAMESPACE}/events"


@dataclass(frozen=True, slots=True)
class Level:
    in_flight: int
    apiserver_ms: float  # CPU per request
    etcd_ms: float
    requests_per_s: float


def event_body(i: int, stamp: str) -> dict[str, object]:
    """A Scheduled Event as the scheduler posts it, with a unique name."""
    return {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": f"p{i}.{stamp}", "namespace": NAMESPACE},
        "eventTime": micro_time(time.time()),
        "reportingController": "batchsched/bench",
        "reportingInstance": "bench-1",
        "action": "Binding",
        "reason": "Scheduled",
        "type": "Normal",
        "note": f"Successfully assigned {NAMESPACE}/p{i} to node-{i % 500}",
        "regarding": {"apiVersion": "v1", "kind": "Pod", "namespace": NAMESPACE, "name": f"p{i}"},
    }


def parse_levels(text: str) -> list[int]:
    levels = [int(part) for part in text.split(",") if part.strip()]
    if not levels or min(levels) < 1:
        raise argparse.ArgumentTypeError(f"in-flight levels must be integers >= 1: {text!r}")
    return levels


def _server_cpu(plane: ControlPlane) -> tuple[float, float]:
    pids = plane.pid("kube-apiserver"), plane.pid("etcd")
    seconds = [process_cpu_seconds(pid) if pid is not None else None for pid in pids]
    if seconds[0] is None or seconds[1] is None:
        raise SystemExit(
            "server-cost reads kube-apiserver's and etcd's CPU from the control plane's state "
            "dir: give a kubeconfig written by scripts/control-plane.sh, or none"
        )
    return seconds[0], seconds[1]


async def one_level(plane: ControlPlane, requests: int, in_flight: int, tag: str) -> Level:
    api = await api_client(str(plane.kubeconfig), max_in_flight=in_flight)
    async with api:
        await request_json(api, "GET", f"/api/v1/namespaces/{NAMESPACE}")  # connected
        bodies = iter([event_body(i, tag) for i in range(requests)])

        async def sender() -> None:
            for body in bodies:
                await request_json(api, "POST", EVENTS, body=body)

        api0, etcd0 = _server_cpu(plane)
        wall = time.perf_counter()
        await asyncio.gather(*(sender() for _ in range(in_flight)))
        wall = time.perf_counter() - wall
        api1, etcd1 = _server_cpu(plane)
    per = 1000.0 / requests
    return Level(in_flight, (api1 - api0) * per, (etcd1 - etcd0) * per, requests / wall)


async def measure(
    kubeconfig: Path | None, requests: int, levels: list[int], rounds: int
) -> dict[int, list[Level]]:
    got: dict[int, list[Level]] = {level: [] for level in levels}
    async with control_plane_for(kubeconfig, new_run_dir(), keep=False) as plane:
        for round_ in range(rounds):
            for level in levels if round_ % 2 == 0 else levels[::-1]:
                result = await one_level(plane, requests, level, f"r{round_}-c{level}")
                got[level].append(result)
                print(
                    f"round={round_ + 1} in_flight={level} apiserver_ms/request="
                    f"{result.apiserver_ms:.3f} etcd_ms/request={result.etcd_ms:.3f} "
                    f"requests/s={result.requests_per_s:.0f} load={os.getloadavg()[0]:.1f}",
                    flush=True,
                )
    return got


def report(got: dict[int, list[Level]]) -> str:
    lines = [
        f"{'in flight':>9} {'apiserver ms/request':>22} {'etcd ms/request':>17} {'requests/s':>11}"
    ]
    for level, runs in got.items():
        api = [r.apiserver_ms for r in runs]
        etcd = [r.etcd_ms for r in runs]
        rate = statistics.median(r.requests_per_s for r in runs)
        lines.append(
            f"{level:>9} {min(api):>7.3f}-{max(api):.3f} (med {statistics.median(api):.3f})"
            f" {min(etcd):>5.3f}-{max(etcd):.3f} {rate:>11.0f}"
        )
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    kubeconfig = Path(args.kubeconfig) if args.kubeconfig else None
    got = asyncio.run(measure(kubeconfig, args.requests, args.in_flight, args.rounds))
    print(f"{args.requests} Event POSTs per level and round, {args.rounds} round(s)")
    print(report(got))
    return 0


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "server-cost", help="API server and etcd CPU per Event POST, by requests in flight"
    )
    parser.add_argument("--requests", type=int, default=3000, help="Event POSTs per level")
    parser.add_argument("--in-flight", type=parse_levels, default=[4, 32, 96, 256])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--kubeconfig", help="a control plane of scripts/control-plane.sh")
    parser.set_defaults(run=run)
