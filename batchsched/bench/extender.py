"""`python -m batchsched.bench extender`: GPU allocation by the real kube-scheduler alone and by
kube-scheduler with `batchsched extender`, on one API server and one workload, in one run.

The cluster is `--nodes` DGX A100 nodes (8 GPUs, 128 cpu, 1 TiB; plain API objects, no
kubelet, so pods never end). The workload is `--pods` GPU pods drawn with `--seed` (1, 2, 4 or
8 GPUs, 40/25/20/15 %), asking for more GPUs than the cluster has, created one at a time: each
is bound or found unschedulable before the next, as a cluster filling up sees them. Each
scheduler gets the same pods on empty nodes. Reported per scheduler: pods and GPUs placed,
the GPU allocation, the 8-GPU pods placed, and the nodes left partly used (their free GPUs
are the fragments an 8-GPU job cannot use).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Final

from kubernetes_asyncio.client import ApiClient

from batchsched.bench.e2e_cluster import (
    ControlPlane,
    control_plane_for,
    delete_bench_nodes,
    kube_version,
    node_body,
)
from batchsched.bench.extender_procs import (
    kube_scheduler_binary,
    start_extender,
    start_kube_scheduler,
)
from batchsched.bench.harness import Report, run_bench
from batchsched.kube.client import api_client, request_json
from gpu.machines import DGX_A100

NS: Final = "default"
GPUS_PER_NODE: Final = 8
SIZES: Final = ((1, 40), (2, 25), (4, 20), (8, 15))  # GPUs, percent
POD_TIMEOUT_S: Final = 30.0
PLAIN: Final = "kube-scheduler"
EXTENDED: Final = "kube-scheduler + batchsched extender"


@dataclass(frozen=True, slots=True)
class Outcome:
    scheduler: str
    pods: int
    placed: int
    gpus_asked: int
    gpus_placed: int
    capacity: int
    eight_gpu_asked: int
    eight_gpu_placed: int
    partly_used_nodes: int
    fragment_gpus: int  # free GPUs on partly used nodes
    seconds: float

    @property
    def allocation(self) -> float:
        return self.gpus_placed / self.capacity if self.capacity else 0.0


def workload(pods: int, seed: int) -> list[int]:
    """GPUs per pod, in creation order."""
    rng = random.Random(seed)
    sizes, weights = zip(*SIZES, strict=True)
    return rng.choices(sizes, weights=weights, k=pods)


def gpu_node(name: str) -> dict[str, object]:
    body = node_body(name, {"cpu": "128", "memory": "1Ti", "pods": "110", "nvidia.com/gpu": "8"})
    labels = body["metadata"]["labels"]  # type: ignore[index]
    labels["nvidia.com/gpu.product"] = DGX_A100.product
    return body


def gpu_pod(name: str, gpus: int) -> dict[str, object]:
    amount = {"cpu": "1", "memory": "4Gi", "nvidia.com/gpu": str(gpus)}
    container = {
        "name": "main",
        "image": "registry.k8s.io/pause:3.10",
        "resources": {"requests": amount, "limits": {"nvidia.com/gpu": str(gpus)}},
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"bench": "extender"}},
        "spec": {"schedulerName": "default-scheduler", "containers": [container]},
    }


async def _settled(api: ApiClient, name: str) -> str | None:
    """The node the pod was bound to, "" when the scheduler found no node, None meanwhile."""
    body: dict[str, Any] = await request_json(api, "GET", f"/api/v1/namespaces/{NS}/pods/{name}")
    node = body.get("spec", {}).get("nodeName")
    if node:
        return str(node)
    for cond in body.get("status", {}).get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            return ""
    return None


async def place_all(api: ApiClient, sizes: list[int]) -> dict[str, str]:
    """Create the pods one at a time; where each went ("" for nowhere)."""
    placed: dict[str, str] = {}
    for i, gpus in enumerate(sizes):
        name = f"gpu-{i:04d}-{gpus}"
        await request_json(api, "POST", f"/api/v1/namespaces/{NS}/pods", body=gpu_pod(name, gpus))
        deadline = time.monotonic() + POD_TIMEOUT_S
        while (where := await _settled(api, name)) is None:
            if time.monotonic() > deadline:
                where = ""
                break
            await asyncio.sleep(0.05)  # polling the API server, not waiting in a test
        placed[name] = where
    return placed


def outcome(scheduler: str, sizes: list[int], placed: dict[str, str], nodes: int,
            seconds: float) -> Outcome:  # fmt: skip
    used: dict[str, int] = {}
    for gpus, node in zip(sizes, placed.values(), strict=True):
        if node:
            used[node] = used.get(node, 0) + gpus
    partly = [u for u in used.values() if 0 < u < GPUS_PER_NODE]
    on_node = [(g, n) for g, n in zip(sizes, placed.values(), strict=True)]
    return Outcome(
        scheduler=scheduler,
        pods=len(sizes),
        placed=sum(1 for _, n in on_node if n),
        gpus_asked=sum(sizes),
        gpus_placed=sum(g for g, n in on_node if n),
        capacity=nodes * GPUS_PER_NODE,
        eight_gpu_asked=sum(1 for g in sizes if g == GPUS_PER_NODE),
        eight_gpu_placed=sum(1 for g, n in on_node if n and g == GPUS_PER_NODE),
        partly_used_nodes=len(partly),
        fragment_gpus=sum(GPUS_PER_NODE - u for u in partly),
        seconds=seconds,
    )


async def _delete_pods(api: ApiClient) -> None:
    path = f"/api/v1/namespaces/{NS}/pods"
    query = [("labelSelector", "bench=extender"), ("gracePeriodSeconds", "0")]
    await request_json(api, "DELETE", path, query=query)
    while (await request_json(api, "GET", path, query=query[:1])).get("items"):
        await asyncio.sleep(0.2)


async def measure(
    api: ApiClient,
    plane: ControlPlane,
    run_dir: Path,
    with_extender: bool,
    args: argparse.Namespace,
) -> Outcome:
    binary = kube_scheduler_binary(await kube_version(api))
    sizes = workload(args.pods, args.seed)
    extender, url = await start_extender(plane, run_dir) if with_extender else (None, None)
    scheduler = await start_kube_scheduler(plane, run_dir, binary, url)
    try:
        started = time.monotonic()
        placed = await place_all(api, sizes)
        seconds = time.monotonic() - started
    finally:
        await scheduler.stop()
        if extender is not None:
            await extender.stop()
    await _delete_pods(api)
    return outcome(EXTENDED if with_extender else PLAIN, sizes, placed, args.nodes, seconds)


async def bench(args: argparse.Namespace, run_dir: Path) -> Report:
    async with control_plane_for(args.kubeconfig, run_dir, keep=args.keep) as plane:
        api = await api_client(str(plane.kubeconfig))
        async with api:
            for i in range(args.nodes):
                await request_json(api, "POST", "/api/v1/nodes", body=gpu_node(f"dgx-{i:03d}"))
            results = [await measure(api, plane, run_dir, w, args) for w in (False, True)]
            if not plane.owned and not args.keep:
                await delete_bench_nodes(api)
    return Report(render(results, args), {"results": [asdict(r) for r in results]}, 0)


def render(results: list[Outcome], args: argparse.Namespace) -> str:
    lines = [
        f"bench extender: {args.nodes} DGX A100 nodes ({args.nodes * GPUS_PER_NODE} GPUs), "
        f"{args.pods} GPU pods, seed {args.seed}",
        f"{'scheduler':<38} {'pods':>9} {'GPUs':>9} {'alloc':>6} {'8-GPU':>7} "
        f"{'partly used':>11} {'fragments':>9} {'s':>6}",
    ]
    for r in results:
        lines.append(
            f"{r.scheduler:<38} {r.placed:>4}/{r.pods:<4} {r.gpus_placed:>4}/{r.gpus_asked:<4} "
            f"{r.allocation:>6.1%} {r.eight_gpu_placed:>3}/{r.eight_gpu_asked:<3} "
            f"{r.partly_used_nodes:>11} {r.fragment_gpus:>9} {r.seconds:>6.1f}"
        )
    return "\n".join(lines)


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser("extender", help=__doc__.splitlines()[0] if __doc__ else "")
    parser.add_argument("--nodes", type=int, default=16, help="DGX A100 nodes (default 16)")
    parser.add_argument("--pods", type=int, default=64, help="GPU pods (default 64)")
    parser.add_argument("--seed", type=int, default=1, help="workload seed (default 1)")
    parser.add_argument("--kubeconfig", type=Path, help="use this API server instead of a new one")
    parser.add_argument("--keep", action="store_true", help="leave the control plane and Nodes")
    parser.add_argument("--json", type=Path, metavar="OUT", help="write the figures as JSON too")
    parser.set_defaults(run=lambda a: run_bench("extender", a, lambda d: bench(a, d)))
