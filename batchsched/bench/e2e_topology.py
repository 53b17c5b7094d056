"""Gangs with network-topology requests on one real API server: batchsched vs kube-scheduler
1.36 (GangScheduling + TopologyAwareWorkloadScheduling) vs scheduler-plugins Coscheduling.

`python -m batchsched.bench topology-e2e [--racks 64 --gangs N --seed 1 --json out.json]`

1. Bring up etcd + kube-apiserver v1.36.3 with the workload-aware scheduling gates
   (scripts/control-plane.sh, BATCHSCHED_K8S_VERSION; or use `--kubeconfig`), install the
   CRDs, create the cluster as plain Nodes (no kubelet: pods stay bound): `--racks` racks of
   8 nodes x 8 nvidia.com/gpu, NVLink cliques of 2 nodes, 8 racks a block, one zone.
2. Draw the seeded gangs (e2e_topology_workload.py: sim/topology_jobs' stream, as many as
   ask for `--fill` of the GPUs, or `--gangs`).
3. For each scheduler in turn, in a fresh namespace: start it; create each gang's objects in
   its scheduler's encoding at its arrival time, its members `--member-gap-ms` apart, gangs
   interleaved (e2e_topology_phase.py); watch every bind and node until all are bound or no
   bind came for `--settle` seconds; stop it after deleting the pods and groups.
4. Judge each run (e2e_topology_measure.py, sim/tightness.py) and print them side by side with
   the ratios batchsched/each and the issue's goal (met / NOT met), and the wall time.
"""

from __future__ import annotations

import argparse
import functools
import os
import re
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from kubernetes_asyncio.client import ApiClient

from batchsched.bench.dra_e2e_report import attempts_by_result
from batchsched.bench.e2e_cluster import (
    BenchError,
    create_namespace,
    create_or_keep,
    kube_version,
    run_bounded,
)
from batchsched.bench.e2e_topology_measure import judge
from batchsched.bench.e2e_topology_phase import Pacing, clean_up, topology_phase
from batchsched.bench.e2e_topology_report import (
    PhaseFigures,
    TopologyMeasurement,
    measurement,
    render,
    to_json,
)
from batchsched.bench.e2e_topology_workload import (
    Cluster,
    Encoding,
    Gang,
    demanded_gpus,
    gangs,
    node_body,
)
from batchsched.bench.harness import (
    EXIT_UNBOUND,
    Report,
    UnderTest,
    add_harness_arguments,
    compare,
    run_bench,
    running,
    scheduler_order,
    script_main,
)
from batchsched.bench.harness_phase import scheduler_metrics
from batchsched.gang.topology import DEFAULT_LEVELS
from batchsched.model.node import NodeView

SCHEDULERS: Final = ("batchsched", "kube-scheduler", "coscheduling")
ENCODINGS: Final = {
    "batchsched": Encoding.UPSTREAM,
    "kube-scheduler": Encoding.UPSTREAM,
    "coscheduling": Encoding.PLUGINS,
}
K8S_VERSION: Final = "v1.36.3"
FIRST_MINOR: Final = 36  # the v1alpha2 Workload API and kube-scheduler's gang plugins


def workload_line(args: argparse.Namespace, cluster: Cluster, workload: Sequence[Gang]) -> str:
    asked = demanded_gpus(workload)
    kinds = Counter(
        f"{'required' if g.request.required else 'preferred'} {g.request.level.rsplit('/')[-1]}"
        for g in workload
        if g.request is not None
    )
    mix = ", ".join(f"{n} {kind}" for kind, n in sorted(kinds.items()))
    return (
        f"workload: {cluster.racks * cluster.nodes_per_rack} Nodes ({cluster.racks} racks x "
        f"{cluster.nodes_per_rack} x {cluster.gpus_per_node} GPUs, cliques of "
        f"{cluster.clique_nodes} nodes, {cluster.racks_per_block} racks a block); "
        f"{len(workload)} gangs, {sum(g.members for g in workload)} pods (seed {args.seed}; "
        f"{asked} GPUs = {asked / cluster.gpus:.1%} of {cluster.gpus}; {mix}); a gang every "
        f"{args.interval_ms:g} ms on average, members {args.member_gap_ms:g} ms apart; "
        f"settled after {args.settle:g} s without a bind"
    )


async def measure(
    args: argparse.Namespace,
    nodes: Sequence[NodeView],
    workload: Sequence[Gang],
    run_dir: Path,
    run: UnderTest,
) -> list[TopologyMeasurement]:
    api, scheduler = run.api, run.scheduler
    encoding = ENCODINGS[scheduler.name]
    pacing = Pacing(args.member_gap_ms / 1e3, args.concurrency, args.timeout, args.settle)
    namespace = f"topo-{scheduler.name}-{time.strftime('%H%M%S')}"
    print(f"{scheduler.name}: {len(workload)} gangs as {encoding.value} ...", flush=True)
    async with running(scheduler):
        await create_namespace(api, namespace)
        try:
            phase = await topology_phase(
                api, namespace, workload, encoding, scheduler.scheduler_name, pacing,
                run.cpu_meter(),
            )  # fmt: skip
            metrics = await scheduler_metrics(scheduler)
            (run_dir / f"{scheduler.name}.metrics").write_text(metrics)  # for a closer look
            attempts = attempts_by_result(metrics)
        finally:
            await clean_up(api, namespace, encoding, args.concurrency)
    outcome = judge(nodes, workload, phase.watch.observed(), DEFAULT_LEVELS)
    figures = PhaseFigures(
        bound_pods=len(phase.watch.bound),
        seconds=phase.seconds,
        create_seconds=phase.created - phase.started,
        cpu_seconds=phase.cpu_seconds,
        api_writes=phase.api_writes,
        bench_watch_reconnects=phase.watch.reconnects,
        attempts=attempts,
    )
    pods = sum(g.members for g in workload)
    result = measurement(scheduler.name, encoding.value, outcome, pods, figures)
    print(
        f"  {result.complete_gangs}/{result.gangs} gangs whole in {result.seconds:.1f} s "
        f"({result.gangs_per_second:.1f}/s), {result.tightest_share:.1%} in tightest domain",
        flush=True,
    )
    return [result]


async def check_version(api: ApiClient) -> None:
    version = await kube_version(api)
    found = re.match(r"v1\.(\d+)\.", version)
    if found is None or int(found.group(1)) < FIRST_MINOR:
        raise BenchError(
            f"the API server is Kubernetes {version}; topology-e2e needs 1.{FIRST_MINOR} or later "
            f"(the v1alpha2 Workload API, kube-scheduler's GangScheduling and "
            f"TopologyAwareWorkloadScheduling): BATCHSCHED_K8S_VERSION={K8S_VERSION}"
        )


async def bench(args: argparse.Namespace, run_dir: Path) -> Report:
    began = time.perf_counter()
    cluster = Cluster(args.racks)
    nodes = cluster.nodes()
    workload = gangs(
        cluster, args.seed, count=args.gangs, fill=args.fill, interval=args.interval_ms / 1e3
    )
    line = workload_line(args, cluster, workload)
    print(line, flush=True)

    async def set_up(api: ApiClient) -> None:
        await check_version(api)

        async def create(i: int) -> None:
            await create_or_keep(api, "/api/v1/nodes", node_body(nodes[i]))

        await run_bounded(len(nodes), args.concurrency, create)

    names = scheduler_order(SCHEDULERS, args.only, baseline_first=args.baselines_first)
    each = functools.partial(measure, args, nodes, workload, run_dir)
    machine, results = await compare(args, run_dir, names, set_up, each)
    wall = time.perf_counter() - began
    text = render(machine, results, line) + f"\nwall: {wall:.0f} s (control plane included)"
    body = to_json(machine, results, {**_workload_json(args, cluster, workload), "wall_s": wall})
    return Report(text, body, _exit_code(results))


def _exit_code(results: Sequence[TopologyMeasurement]) -> int:
    """1 when batchsched split a gang or broke a required request: never expected of it."""
    ours = [r for r in results if r.scheduler == "batchsched"]
    broken = any(r.partial_gangs or r.honoured < r.required for r in ours)
    return EXIT_UNBOUND if broken else 0


def _workload_json(
    args: argparse.Namespace, cluster: Cluster, workload: Sequence[Gang]
) -> dict[str, object]:
    return {
        "racks": cluster.racks,
        "nodes": cluster.racks * cluster.nodes_per_rack,
        "gpus": cluster.gpus,
        "gangs": len(workload),
        "pods": sum(g.members for g in workload),
        "demanded_gpus": demanded_gpus(workload),
        "seed": args.seed,
        "interval_ms": args.interval_ms,
        "member_gap_ms": args.member_gap_ms,
        "settle_s": args.settle,
        "concurrency": args.concurrency,
    }


def run(args: argparse.Namespace) -> int:
    # The script's install, up, scheduler-up and coscheduling-up all read it.
    os.environ["BATCHSCHED_K8S_VERSION"] = args.k8s_version
    return run_bench("topology-e2e", args, functools.partial(bench, args))


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "topology-e2e",
        help="topology gangs: batchsched vs kube-scheduler 1.36 vs Coscheduling, real API server",
    )
    parser.add_argument("--racks", type=int, default=64, help="racks of 8 nodes x 8 GPUs")
    parser.add_argument("--gangs", type=int, help="this many gangs (default: as --fill allows)")
    parser.add_argument(
        "--fill", type=float, default=0.9, help="gangs ask for this share of the GPUs in all"
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--interval-ms", type=float, default=25.0, help="mean time between gang arrivals"
    )
    parser.add_argument(
        "--member-gap-ms", type=float, default=10.0, help="time between a gang's members"
    )
    parser.add_argument(
        "--settle", type=float, default=10.0, help="seconds without a bind that end a run"
    )
    parser.add_argument("--k8s-version", default=K8S_VERSION, help="the control plane's release")
    add_harness_arguments(parser, SCHEDULERS, "seconds per scheduler at most")
    parser.add_argument(
        "--baselines-first",
        action="store_true",
        help="run the schedulers in reverse order (coscheduling first: order bias)",
    )
    parser.set_defaults(run=run)


if __name__ == "__main__":
    sys.exit(script_main("e2e_topology", "topology-e2e", add_parser))
