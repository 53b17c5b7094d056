"""Pure-core cost of allocating DRA claims, against the same GPUs asked for as `nvidia.com/gpu`.

Two clusters of the same DGX-H100-like nodes (batchsched/dra/nvidia.py's: 8 GPUs in two
NVLink islands of four, two PCIe roots), built in one run: one publishes its GPUs as
ResourceSlices as NVIDIA's DRA driver does (`gpu.nvidia.com`), the other as the
`nvidia.com/gpu` extended resource with the same topology. The same pods go through the
default profile on each, one at a time: on the first each asks for its GPUs through a
ResourceClaim, on the second through the resource.
Reported: the time per pod on each, their ratio, and the share of the pods of 2-4 GPUs (those
an island can hold) whose GPUs form one NVLink island on each (DynamicResources vs
GpuTopology, which choose by the same model).
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import random
import time
from typing import Any

from batchsched.dra.nvidia import GPU_CLASS, H100_SXM, device_class, dgx_h100_slice, dgx_topology
from batchsched.dra.parse import parse_device_class, parse_resource_claim, parse_resource_slice
from batchsched.framework.registry import assemble_profile
from batchsched.framework.runner import ProfileRunner
from batchsched.model.node import parse_node
from batchsched.model.pod import PodView, parse_pod
from batchsched.plugins.registry import DEFAULT_PLUGINS, default_registry
from batchsched.snapshot import Snapshot

SIZES = (1, 2, 4, 8)  # GPUs per pod in the mixed workload


def node(name: str, gpus: int) -> dict[str, Any]:
    allocatable = {"cpu": "128", "memory": "1Ti", "pods": "110"}
    if gpus:
        allocatable["nvidia.com/gpu"] = str(gpus)
    return {
        "metadata": {"name": name, "labels": {"nvidia.com/gpu.product": H100_SXM.name}},
        "status": {"allocatable": allocatable},
    }


def pod(index: int, gpus: int, claim: bool) -> PodView:
    resources: dict[str, Any] = {"requests": {"cpu": "1"}}
    spec: dict[str, Any] = {"schedulerName": "gpu-scheduler"}
    if claim:
        resources["claims"] = [{"name": "gpus"}]
        spec["resourceClaims"] = [{"name": "gpus", "resourceClaimName": f"claim-{index}"}]
    else:
        resources["limits"] = {"nvidia.com/gpu": str(gpus)}
    spec["containers"] = [{"name": "main", "image": "train", "resources": resources}]
    meta = {"name": f"pod-{index}", "namespace": "ml", "uid": f"u{index}"}
    return parse_pod({"metadata": meta, "spec": spec})


def claim(index: int, gpus: int) -> dict[str, Any]:
    request = {"name": "gpus", "exactly": {"deviceClassName": GPU_CLASS, "count": gpus}}
    meta = {"name": f"claim-{index}", "namespace": "ml", "uid": f"c{index}"}
    return {"metadata": meta, "spec": {"devices": {"requests": [request]}}}


def clusters(nodes: int, sizes: list[int]) -> tuple[Snapshot, Snapshot]:
    names = [f"node-{i}" for i in range(nodes)]
    dra = Snapshot([parse_node(node(n, 0)) for n in names])
    dra.dra.set_class(parse_device_class(device_class()))
    for name in names:
        dra.dra.set_slice(parse_resource_slice(dgx_h100_slice(name)))
    for index, gpus in enumerate(sizes):
        dra.dra.set_claim(parse_resource_claim(claim(index, gpus)))
    plain = Snapshot([parse_node(node(n, 8)) for n in names])
    for snapshot in (dra, plain):
        for name in names:
            snapshot.set_measured_topology(name, dgx_topology(name))
    return dra, plain


def one_island(snapshot: Snapshot, placed: PodView, node_name: str, claim: bool) -> bool:
    if claim:
        found = snapshot.dra.claim(f"ml/{placed.resource_claims[0].claim_name}")
        assert found is not None and found.allocation is not None
        indices = {int(d.device.split("-")[1]) for d in found.allocation.devices}
    else:
        indices = {i for i, _ in snapshot.gpu_grants(placed.uid)}
    return len({i // 4 for i in indices}) == 1


WARMUP = 10  # the first pods: every node's devices are met (and CEL-evaluated) once


def measure(
    snapshot: Snapshot, pods: list[PodView], claim: bool
) -> tuple[float, float, int, int, int]:
    """(seconds for the first WARMUP pods, for the rest, placed, pods of 2-4 GPUs placed, of
    them in one island)."""
    profile = assemble_profile(default_registry(), "gpu-scheduler", DEFAULT_PLUGINS, {})
    runner = ProfileRunner(profile, seed=0)
    gc.collect()
    results = []
    start = time.perf_counter()
    for p in pods[:WARMUP]:
        results.append((p, runner.schedule_one(p, snapshot).node_name))
    warm = time.perf_counter()
    for p in pods[WARMUP:]:
        results.append((p, runner.schedule_one(p, snapshot).node_name))
    end = time.perf_counter()
    placed = [(p, n) for p, n in results if n is not None]
    # Pods of 2-4 GPUs: those an island of four can hold whole.
    multi = [(p, n) for p, n in placed if 1 < _gpus(p, snapshot, claim) <= 4]
    island = sum(one_island(snapshot, p, n, claim) for p, n in multi)
    return warm - start, end - warm, len(placed), len(multi), island


def _gpus(placed: PodView, snapshot: Snapshot, claim: bool) -> int:
    if not claim:
        return len(snapshot.gpu_grants(placed.uid))
    found = snapshot.dra.claim(f"ml/{placed.resource_claims[0].claim_name}")
    return len(found.allocation.devices) if found is not None and found.allocation else 0


def run(args: argparse.Namespace) -> int:
    rng = random.Random(args.seed)
    sizes = [8] * args.pods if args.workload == "8" else rng.choices(SIZES, k=args.pods)
    dra, plain = clusters(args.nodes, sizes)
    runs = []
    for claim_mode, snapshot in ((True, dra), (False, plain)):
        pods = [pod(i, gpus, claim_mode) for i, gpus in enumerate(sizes)]
        runs.append(measure(snapshot, pods, claim_mode))
    python = f"{platform.python_implementation()} {platform.python_version()}"
    print(f"machine: {python} on {platform.machine()}, {os.cpu_count()} cpus")
    print(
        f"shape: {args.nodes} nodes x 8 H100 (two NVLink islands of 4), {args.pods} pods of "
        f"{'8 GPUs' if args.workload == '8' else '1/2/4/8 GPUs (uniform)'}, seed {args.seed}"
    )
    rest = max(1, args.pods - WARMUP)
    for label, (first, elapsed, placed, multi, island) in zip(
        ("DRA claims (DynamicResources)", "nvidia.com/gpu (GpuTopology)"), runs, strict=True
    ):
        share = island / multi if multi else 1.0
        print(
            f"{label}: placed {placed}/{args.pods}; first {WARMUP} pods {first:.2f} s, then "
            f"{elapsed / rest * 1e3:.3f} ms per pod; pods of 2-4 GPUs in one NVLink island: "
            f"{island}/{multi} ({share:.0%})"
        )
    ratio = runs[0][1] / runs[1][1]
    print(f"ratio DRA / extended resource, time per pod after the first {WARMUP}: {ratio:.2f}x")
    return 0


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "dra-core", help="pure-core DRA allocation cost vs the same GPUs as nvidia.com/gpu"
    )
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--pods", type=int, default=500)
    parser.add_argument("--workload", choices=("8", "mixed"), default="8")
    parser.add_argument("--seed", type=int, default=0)
    parser.set_defaults(run=run)
