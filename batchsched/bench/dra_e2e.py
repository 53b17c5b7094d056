"""DRA claims end to end: how often a multi-GPU claim gets one NVLink island, batchsched vs
kube-scheduler v1.34 (DynamicResources), on one API server, in one run.

`python -m batchsched.bench dra-e2e --nodes 8 --pods 120 --seed 1`

1. Bring up etcd + kube-apiserver (or use `--kubeconfig`), KWOK and kube-controller-manager
   (its resourceclaim controller makes each pod's claim from its template, and frees the
   devices when the pod is done); install the CRDs. Create N KWOK nodes without
   `nvidia.com/gpu`, each with an 8-GPU ResourceSlice shaped as NVIDIA's DRA driver
   publishes it and the NodeResourceTopology our agent publishes for it (two NVLink islands,
   GPUs 0-3 and 4-7), and the driver's `gpu.nvidia.com` DeviceClass.
2. Plan one seeded workload: P pods of 1, 2, 4 or 8 GPUs (a ResourceClaimTemplate each),
   arriving as a Poisson stream at the rate that offers `--load` of the cluster's GPUs, each
   running 5-15 s on KWOK and then succeeding, so devices fragment and come free.
3. For each scheduler in turn (batchsched with its default config, then kube-scheduler):
   start it, replay the workload in a fresh namespace while one watch follows every
   ResourceClaim (dra_e2e_claims.py), until every pod is bound; stop it, delete the pods and
   wait until their claims are gone.
4. Print, per scheduler, the share of the 2-4 GPU claims whose GPUs are in one island, the
   same share among the claims whose node had an island with enough free GPUs when the
   allocation was written, and the ratio of the shares.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import random
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

from kubernetes_asyncio.client import ApiClient

from batchsched.bench.chaos import kwok_up
from batchsched.bench.dra_e2e_claims import CLAIMS_PATH, ClaimLedger, ClaimWatch
from batchsched.bench.dra_e2e_objects import (
    claim_pod,
    collection_path,
    dgx_nrt,
    dra_node,
    gpus_template,
)
from batchsched.bench.dra_e2e_report import (
    DraMeasurement,
    Workload,
    attempts_by_result,
    measurement,
    render,
    to_json,
)
from batchsched.bench.e2e_cluster import (
    BenchError,
    control_plane_for,
    create_namespace,
    create_object,
    create_or_keep,
    delete_pods,
    install_crds,
    kube_version,
)
from batchsched.bench.e2e_procs import make_scheduler
from batchsched.bench.harness import (
    EXIT_UNBOUND,
    Report,
    UnderTest,
    add_harness_arguments,
    run_bench,
    running,
    scheduler_order,
    script_main,
)
from batchsched.bench.harness_phase import scheduler_metrics, timed_phase
from batchsched.bench.harness_report import machine_info
from batchsched.dra.nvidia import device_class, dgx_h100_slice, dgx_topology
from batchsched.kube.client import api_client, request_json

SCHEDULERS: Final = ("batchsched", "kube-scheduler")
SIZES: Final = ((1, 35), (2, 30), (4, 25), (8, 10))  # (GPUs per pod, weight)
RUNTIME_S: Final = (5.0, 15.0)  # uniform
GPUS_PER_NODE: Final = 8
# Device names of each NVLink island of a node (all nodes alike): gpu-0..3 and gpu-4..7.
ISLANDS: Final = tuple(
    frozenset(f"gpu-{i}" for i in island) for island in dgx_topology("n").islands
)
READY_TIMEOUT_S: Final = 60.0
SETTLE_S: Final = 10.0  # the last claims' allocations may reach the watch after the bindings


@dataclass(frozen=True, slots=True)
class Arrival:
    name: str
    at: float  # seconds after the first pod
    gpus: int
    runtime_s: float


def plan(pods: int, seed: int, gpus_total: int, load: float) -> list[Arrival]:
    """Purely computational: the seeded workload, the same for both schedulers."""
    rng = random.Random(seed)
    sizes, weights = zip(*SIZES, strict=True)
    mean_gpus = sum(s * w for s, w in SIZES) / sum(weights)
    rate = load * gpus_total / (mean_gpus * sum(RUNTIME_S) / 2)  # pods per second
    arrivals, at = [], 0.0
    for i in range(pods):
        gpus = rng.choices(sizes, weights)[0]
        runtime = round(rng.uniform(*RUNTIME_S), 1)
        arrivals.append(Arrival(f"p{i:03d}-{gpus}g", round(at, 3), gpus, runtime))
        at += rng.expovariate(rate)
    return arrivals


def template_name(gpus: int) -> str:
    return f"gpus-{gpus}"


async def set_up_cluster(api: ApiClient, nodes: int) -> list[str]:
    """The KWOK nodes (Ready), their slices and NRTs, and the DeviceClass; the node names."""
    names = [f"dgx-{i}" for i in range(nodes)]
    for name in names:
        await create_or_keep(api, "/api/v1/nodes", dra_node(name))
    await wait_nodes_ready(api, names)
    heartbeat = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    objects = [device_class()]
    for name in names:
        objects += [dgx_h100_slice(name), dgx_nrt(name, heartbeat)]
    for obj in objects:
        await create_or_keep(api, collection_path(obj), obj)
    return names


async def wait_nodes_ready(api: ApiClient, names: Sequence[str]) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    pending = set(names)
    while pending:
        for name in sorted(pending):
            node = await request_json(api, "GET", f"/api/v1/nodes/{name}")
            conditions = node.get("status", {}).get("conditions") or []  # type: ignore[attr-defined]
            if any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions):
                pending.discard(name)
        if pending and time.monotonic() > deadline:
            raise BenchError(
                f"KWOK nodes not Ready after {READY_TIMEOUT_S:.0f}s: {sorted(pending)}"
            )
        await asyncio.sleep(0.5)


async def replay(
    api: ApiClient, namespace: str, scheduler_name: str, arrivals: Sequence[Arrival]
) -> None:
    """Create each pod at its arrival time (a slow create delays none after it)."""
    path = f"/api/v1/namespaces/{namespace}/pods"
    start = time.perf_counter()
    async with asyncio.TaskGroup() as tasks:
        for a in arrivals:
            await asyncio.sleep(max(0.0, start + a.at - time.perf_counter()))
            body = claim_pod(a.name, template_name(a.gpus), scheduler_name, a.runtime_s)
            tasks.create_task(create_object(api, path, body))


async def measure(
    args: argparse.Namespace,
    arrivals: Sequence[Arrival],
    nodes: Sequence[str],
    stamp: str,
    run: UnderTest,
) -> list[DraMeasurement]:
    scheduler, api = run.scheduler, run.api
    print(f"{scheduler.name}: replaying {len(arrivals)} pods ...", flush=True)
    namespace = f"dra-{scheduler.name}-{stamp}"
    await create_namespace(api, namespace)
    for gpus, _ in SIZES:
        template = gpus_template(template_name(gpus), namespace, gpus)
        await create_object(api, collection_path(template), template)
    watch = ClaimWatch(api, ClaimLedger(ISLANDS, nodes, namespace))
    try:
        async with running(scheduler), asyncio.TaskGroup() as tasks:
            watching = tasks.create_task(watch.run())
            await watch.wait_watching()
            create = functools.partial(replay, api, namespace, scheduler.scheduler_name, arrivals)
            phase = await timed_phase(
                api, namespace, len(arrivals), create, args.timeout, meter=run.cpu_meter()
            )
            await wait_placements(watch.ledger, phase.bound)
            watching.cancel()
            attempts = attempts_by_result(await scheduler_metrics(scheduler))
    finally:
        await delete_pods(api, namespace)
        await wait_no_claims(api)
    result = measurement(scheduler.name, len(arrivals), phase, watch, ISLANDS)
    result.attempts = attempts
    print(f"  {result.summary()}", flush=True)
    return [result]


async def wait_placements(ledger: ClaimLedger, bound: int) -> None:
    """Until the watch has seen a claim allocated for each bound pod (or SETTLE_S passed)."""
    deadline = time.monotonic() + SETTLE_S
    while len(ledger.placements) < bound and time.monotonic() < deadline:
        await asyncio.sleep(0.1)


async def wait_no_claims(api: ApiClient, timeout: float = 120.0) -> None:
    """The resourceclaim controller frees and deletes the claims of the deleted pods; the next
    scheduler must find every device free."""
    deadline = time.monotonic() + timeout
    while (await request_json(api, "GET", CLAIMS_PATH, query=[("limit", "1")])).get("items"):
        if time.monotonic() > deadline:
            raise BenchError(f"ResourceClaims still there {timeout:.0f}s after their pods went")
        await asyncio.sleep(0.5)


async def bench(args: argparse.Namespace, run_dir: Path) -> Report:
    arrivals = plan(args.pods, args.seed, args.nodes * GPUS_PER_NODE, args.load)
    names = scheduler_order(SCHEDULERS, args.only)
    stamp = time.strftime("%H%M%S")
    async with control_plane_for(args.kubeconfig, run_dir, keep=args.keep) as plane:
        if plane.state_dir is not None:
            await asyncio.to_thread(kwok_up, plane.state_dir, {})
        schedulers = [make_scheduler(n, plane, run_dir) for n in names]
        api = await api_client(str(plane.kubeconfig))
        async with api:
            machine = machine_info(await kube_version(api))
            await install_crds(api)
            nodes = await set_up_cluster(api, args.nodes)
            results: list[DraMeasurement] = []
            for scheduler in schedulers:
                run = UnderTest(api, plane, scheduler)
                results += await measure(args, arrivals, nodes, stamp, run)
    workload = Workload.of(args.nodes, args.seed, args.load, [(a.gpus, a.at) for a in arrivals])
    failed = any(r.bound < r.pods or r.double_allocations for r in results)
    code = EXIT_UNBOUND if failed else 0
    return Report(render(machine, workload, results), to_json(machine, workload, results), code)


def run(args: argparse.Namespace) -> int:
    return run_bench("dra-e2e", args, functools.partial(bench, args))


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "dra-e2e", help="DRA claims in one NVLink island: batchsched vs kube-scheduler (KWOK)"
    )
    parser.add_argument("--nodes", type=int, default=8, help="DGX-like KWOK nodes, 8 GPUs each")
    parser.add_argument("--pods", type=int, default=120, help="pods of 1, 2, 4 or 8 GPUs")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--load", type=float, default=0.9, help="GPUs the arrivals ask for, share of the cluster's"
    )
    add_harness_arguments(parser, SCHEDULERS, "seconds from the first create until all bound")
    parser.set_defaults(run=run, timeout=240.0)


if __name__ == "__main__":
    sys.exit(script_main("dra_e2e", "dra-e2e", add_parser))
