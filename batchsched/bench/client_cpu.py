"""Client CPU per request, aiohttp's path against the lean HTTP/1.1 pool, on a real API
server: N Event POSTs per round (what the scheduler sends after each bind), rounds
alternating which transport goes first, CPU time of this process per request.

    python -m batchsched.bench.client_cpu --kubeconfig K [--requests 3000] [--rounds 4]

Events are created in the `default` namespace (they expire with the server's event TTL).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from dataclasses import dataclass

from batchsched.kube.client import api_client, micro_time, request_json
from batchsched.kube.transport import TRANSPORT_VARIABLE, lean_pool

EVENTS = "/apis/events.k8s.io/v1/namespaces/default/events"
TRANSPORTS = ("aiohttp", "http1")


@dataclass(frozen=True, slots=True)
class Round:
    transport: str
    cpu_ms_per_request: float
    requests_per_s: float
    connections: int | None  # the pool's, None on aiohttp's path


def event(i: int) -> dict[str, object]:
    return {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"generateName": "bench-", "namespace": "default"},
        "eventTime": micro_time(time.time()),
        "reportingController": "batchsched/bench",
        "reportingInstance": "bench-1",
        "action": "Binding",
        "reason": "Scheduled",
        "note": f"Successfully assigned default/p{i} to node-{i % 500}",
        "type": "Normal",
        "regarding": {"kind": "Pod", "namespace": "default", "name": f"p{i}", "uid": "u"},
    }


async def one_round(kubeconfig: str, transport: str, requests: int, concurrency: int) -> Round:
    os.environ[TRANSPORT_VARIABLE] = transport  # read when the client's first request goes
    api = await api_client(kubeconfig)
    async with api:
        await request_json(api, "GET", "/api/v1/namespaces/default")  # connected, warm
        bodies = iter([event(i) for i in range(requests)])

        async def sender() -> None:
            for body in bodies:
                await request_json(api, "POST", EVENTS, body=body)

        cpu, wall = time.process_time(), time.perf_counter()
        await asyncio.gather(*(sender() for _ in range(concurrency)))
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        pool = lean_pool(api)
        opened = None if pool is None else pool.opened
    return Round(transport, cpu / requests * 1000, requests / wall, opened)


async def run(kubeconfig: str, requests: int, rounds: int, concurrency: int) -> None:
    by: dict[str, list[float]] = {t: [] for t in TRANSPORTS}
    for i in range(rounds):
        for transport in TRANSPORTS if i % 2 == 0 else TRANSPORTS[::-1]:
            got = await one_round(kubeconfig, transport, requests, concurrency)
            by[transport].append(got.cpu_ms_per_request)
            print(
                f"round={i + 1} transport={transport} cpu_ms/request="
                f"{got.cpu_ms_per_request:.3f} requests/s={got.requests_per_s:.0f} "
                f"connections={got.connections} load={os.getloadavg()[0]:.1f}",
                flush=True,
            )
    medians = {t: statistics.median(v) for t, v in by.items()}
    for transport, median in medians.items():
        print(f"{transport}: median {median:.3f} ms of client CPU per request")
    print(f"http1/aiohttp: {medians['http1'] / medians['aiohttp']:.2f}")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m batchsched.bench.client_cpu")
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--requests", type=int, default=3000, help="Event POSTs per round")
    parser.add_argument("--rounds", type=int, default=4, help="rounds per transport")
    parser.add_argument("--concurrency", type=int, default=16, help="requests in flight")
    args = parser.parse_args(argv)
    asyncio.run(run(args.kubeconfig, args.requests, args.rounds, args.concurrency))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
