"""Gangs on one real API server: batchsched vs scheduler-plugins Coscheduling, in one run.

`python -m batchsched.bench gang-e2e --nodes 1000 --gangs 1000x3,10x100`

1. Bring up etcd + kube-apiserver (scripts/control-plane.sh, a state dir of its own) or use
   the one `--kubeconfig` names; install the PodGroup CRD; create N Nodes with 8
   nvidia.com/gpu each.
2. For each scheduler in turn (batchsched, then Coscheduling): start it as its own process;
   for each gang shape G x S, in a fresh namespace, create G PodGroups (minMember S), then
   G*S pods (1 nvidia.com/gpu each, gang by gang) with bounded concurrency: the same code for
   both. Time from the first PodGroup create to the last pod seen bound on a watch, and per
   gang from its last member seen created to its last member seen bound. Force-delete the
   pods and PodGroups, next shape; then stop the scheduler.
3. Print both, the ratio of their gangs/s per shape, where the CPU went, and the machine.
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from kubernetes_asyncio.client import ApiClient

from batchsched.bench.e2e_cluster import (
    BENCH_LABEL,
    create_namespace,
    create_nodes,
    create_object,
    delete_pods,
    run_bounded,
)
from batchsched.bench.e2e_gang_report import GPU, GangMeasurement, render, row, to_json
from batchsched.bench.e2e_watch import BindWatch, percentile
from batchsched.bench.harness import (
    BACKLOG,
    EXIT_UNBOUND,
    STREAM,
    Report,
    UnderTest,
    add_harness_arguments,
    add_modes_argument,
    add_profile_argument,
    compare,
    run_bench,
    running,
    scheduler_order,
    script_main,
)
from batchsched.bench.harness_phase import Phase, backlog_phase, timed_phase
from batchsched.gang.podgroup import POD_GROUP_LABEL
from batchsched.kube.client import request_json

SCHEDULERS: Final = ("batchsched", "coscheduling")
GROUPS_API: Final = "/apis/scheduling.x-k8s.io/v1alpha1"


@dataclass(frozen=True)
class Shape:
    gangs: int
    size: int

    @property
    def label(self) -> str:
        return f"{self.gangs}x{self.size}"


def node_body(name: str) -> dict[str, object]:
    resources = {"cpu": "64", "memory": "512Gi", "pods": "110", GPU: "8"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/hostname": name, BENCH_LABEL: "true"},
        },
        "status": {"capacity": resources, "allocatable": resources},
    }


def pod_group_body(name: str, min_member: int) -> dict[str, object]:
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": {"minMember": min_member},
    }


def gang_pod_body(name: str, group: str, scheduler_name: str) -> dict[str, object]:
    # Extended resources must have limits equal to requests.
    container = {
        "name": "pause",
        "image": "registry.k8s.io/pause:3.10",
        "resources": {
            "requests": {"cpu": "100m", "memory": "500Mi", GPU: "1"},
            "limits": {GPU: "1"},
        },
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {POD_GROUP_LABEL: group}},
        "spec": {"schedulerName": scheduler_name, "containers": [container]},
    }


async def create_gangs(
    api: ApiClient, namespace: str, scheduler_name: str, shape: Shape, concurrency: int
) -> None:
    """PodGroups g-0.., then pods g-<i>-<m> gang by gang."""
    groups = f"{GROUPS_API}/namespaces/{namespace}/podgroups"
    pods = f"/api/v1/namespaces/{namespace}/pods"

    async def create_group(i: int) -> None:
        await create_object(api, groups, pod_group_body(f"g-{i}", shape.size))

    async def create_pod(i: int) -> None:
        gang, member = divmod(i, shape.size)
        body = gang_pod_body(f"g-{gang}-{member}", f"g-{gang}", scheduler_name)
        await create_object(api, pods, body)

    await run_bounded(shape.gangs, concurrency, create_group)
    await run_bounded(shape.gangs * shape.size, concurrency, create_pod)


def gang_latencies(watch: BindWatch) -> tuple[list[float], int, int]:
    """Per complete gang: last member bound - last member appeared; and the complete and
    partial gang counts (pods are named g-<gang>-<member>)."""
    members: dict[str, int] = {}
    bound: dict[str, int] = {}
    last_seen: dict[str, float] = {}
    last_bound: dict[str, float] = {}
    for name, at in watch.appeared.items():
        gang = name.rsplit("-", 1)[0]
        members[gang] = members.get(gang, 0) + 1
        last_seen[gang] = max(last_seen.get(gang, at), at)
    for name, at in watch.bound.items():
        gang = name.rsplit("-", 1)[0]
        bound[gang] = bound.get(gang, 0) + 1
        last_bound[gang] = max(last_bound.get(gang, at), at)
    complete = [g for g, n in bound.items() if n == members[g]]
    partial = sum(1 for g, n in bound.items() if n < members[g])
    return [last_bound[g] - last_seen[g] for g in complete], len(complete), partial


async def measure(args: argparse.Namespace, run: UnderTest) -> list[GangMeasurement]:
    """Stream: every shape in turn on one run of the scheduler; backlog: every shape on a
    run of its own, started once the shape's gangs exist."""
    results = []
    for mode in args.modes:
        if mode == STREAM:
            async with running(run.scheduler):
                for shape in args.shapes:
                    results.append(await measure_shape(args, run, shape, STREAM))
        else:
            for shape in args.shapes:
                try:
                    results.append(await measure_shape(args, run, shape, BACKLOG))
                finally:
                    await run.scheduler.stop()
    return results


async def measure_shape(
    args: argparse.Namespace, run: UnderTest, shape: Shape, mode: str
) -> GangMeasurement:
    api, scheduler = run.api, run.scheduler
    print(f"{scheduler.name}: {shape.label} gangs ({mode}) ...", flush=True)
    namespace = f"gang-{scheduler.name}-{shape.label}-{mode}-{time.strftime('%H%M%S')}"
    await create_namespace(api, namespace)
    try:
        create = functools.partial(
            create_gangs, api, namespace, scheduler.scheduler_name, shape, args.concurrency
        )
        pods = shape.gangs * shape.size
        if mode == BACKLOG:
            meter = run.cpu_meter()  # the scheduler joins it once started
            phase = await backlog_phase(
                api,
                namespace,
                pods,
                create,
                scheduler,
                args.timeout,
                meter=meter,
                count_writes=True,
            )
        else:
            phase = await timed_phase(
                api, namespace, pods, create, args.timeout, meter=run.cpu_meter(), count_writes=True
            )
    finally:
        await delete_pods(api, namespace)
        await request_json(api, "DELETE", f"{GROUPS_API}/namespaces/{namespace}/podgroups")
    result = measurement(scheduler.name, shape, phase, mode)
    print(f"  {row(result)}", flush=True)
    return result


def measurement(scheduler: str, shape: Shape, phase: Phase, mode: str = STREAM) -> GangMeasurement:
    latencies, whole, partial = gang_latencies(phase.watch)
    seconds = phase.seconds
    return GangMeasurement(
        scheduler=scheduler,
        # A backlog row is its own shape: its ratio and write counts stand apart.
        shape=shape.label if mode == STREAM else f"{shape.label} {mode}",
        gangs=shape.gangs,
        size=shape.size,
        bound_pods=phase.bound,
        complete_gangs=whole,
        partial_gangs=partial,
        seconds=seconds,
        gangs_per_second=whole / seconds,
        pods_per_second=phase.bound / seconds,
        create_seconds=phase.create_seconds,
        gang_p50_ms=percentile(latencies, 50) * 1e3,
        gang_p99_ms=percentile(latencies, 99) * 1e3,
        cpu_seconds=phase.cpu_seconds,
        api_writes=phase.api_writes,
        bench_watch_reconnects=phase.watch.reconnects,
    )


async def bench(args: argparse.Namespace, run_dir: Path) -> Report:
    async def set_up(api: ApiClient) -> None:
        await create_nodes(api, args.nodes, args.concurrency, prefix="gpu-node", body=node_body)

    names = scheduler_order(SCHEDULERS, args.only, baseline_first=args.coscheduling_first)
    each = functools.partial(measure, args)
    machine, results = await compare(args, run_dir, names, set_up, each, args.profile_batchsched)
    code = 0 if all(r.complete_gangs == r.gangs for r in results) else EXIT_UNBOUND
    return Report(render(machine, results, args), to_json(machine, results, args), code)


def run(args: argparse.Namespace) -> int:
    if args.gangs is not None or args.size is not None:
        args.shapes = [Shape(args.gangs or 1000, args.size or 3)]
    return run_bench("gang-e2e", args, functools.partial(bench, args))


def parse_shapes(text: str) -> list[Shape]:
    """Parse "1000x3,10x100" into [Shape(1000, 3), Shape(10, 100)]."""
    shapes = []
    for part in text.split(","):
        gangs, _, size = part.strip().partition("x")
        if not (gangs.isdigit() and size.isdigit() and int(gangs) > 0 and int(size) > 0):
            raise argparse.ArgumentTypeError(f"gang shape {part!r} is not GANGSxSIZE")
        shapes.append(Shape(int(gangs), int(size)))
    return shapes


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "gang-e2e", help="gangs: batchsched vs scheduler-plugins Coscheduling on a real API server"
    )
    parser.add_argument("--nodes", type=int, default=1000, help=f"nodes with 8 {GPU} each")
    parser.add_argument(
        "--shapes",
        type=parse_shapes,
        default=parse_shapes("1000x3,10x100"),
        metavar="GxS[,GxS]",
        help="gang shapes run in turn: G PodGroups of minMember S (default 1000x3,10x100)",
    )
    parser.add_argument("--gangs", type=int, help="one shape of this many gangs (default 1000)")
    parser.add_argument("--size", type=int, help="... of this many pods each (default 3)")
    add_modes_argument(parser)
    add_harness_arguments(parser, SCHEDULERS, "seconds per shape until all bound")
    add_profile_argument(parser)
    parser.add_argument(
        "--coscheduling-first", action="store_true", help="run the baseline first (order bias)"
    )
    parser.set_defaults(run=run)


if __name__ == "__main__":
    sys.exit(script_main("e2e_gang", "gang-e2e", add_parser))
