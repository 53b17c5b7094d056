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
import asyncio
import json
import os
import re
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Final

import aiohttp
from kubernetes_asyncio.client import ApiClient

from batchsched.bench.e2e_cluster import (
    BENCH_LABEL,
    EXIT_UNBOUND,
    BenchError,
    ControlPlane,
    add_harness_arguments,
    control_plane_for,
    count_nodes,
    create_namespace,
    create_object,
    delete_bench_nodes,
    delete_pods,
    install_crds,
    kube_version,
    new_run_dir,
    run_bench,
    run_bounded,
)
from batchsched.bench.e2e_procs import Batchsched, CpuMeter, KubeScheduler, SchedulerProcess
from batchsched.bench.e2e_report import Machine, machine_info
from batchsched.bench.e2e_watch import BindWatch, percentile
from batchsched.gang.podgroup import POD_GROUP_LABEL
from batchsched.kube.client import (
    ApiError,
    api_client,
    open_stream,
    request_json,
)

SCHEDULERS: Final = ("batchsched", "coscheduling")
GROUPS_API: Final = "/apis/scheduling.x-k8s.io/v1alpha1"
GPU: Final = "nvidia.com/gpu"


class Coscheduling(KubeScheduler):
    """scheduler-plugins' kube-scheduler with Coscheduling (control-plane.sh coscheduling-up)."""

    name = "coscheduling"
    scheduler_name = "scheduler-plugins-scheduler"

    async def start(self) -> None:
        # The script returns once /healthz answers; its informers (PodGroups too) start first.
        await asyncio.to_thread(self._plane.script, "install-coscheduling", timeout=3600.0)
        await asyncio.to_thread(self._plane.script, "coscheduling-up")

    def _url(self) -> str:
        env = (self._state / "scheduler-plugins.env").read_text()
        found = re.search(r"COSCHEDULING_PORT=(\d+)", env)
        if found is None or found.group(1) == "0":
            raise BenchError("scheduler-plugins serves no port (BATCHSCHED_COSCHEDULING_PORT=0)")
        return f"https://127.0.0.1:{found.group(1)}"

    def pid(self) -> int | None:
        return self._plane.pid("scheduler-plugins")

    async def stop(self) -> None:
        await asyncio.to_thread(self._plane.script, "coscheduling-down")


@dataclass(frozen=True)
class Shape:
    gangs: int
    size: int

    @property
    def label(self) -> str:
        return f"{self.gangs}x{self.size}"


@dataclass
class GangMeasurement:
    """One scheduler on one gang shape; times in seconds unless named _ms."""

    scheduler: str
    shape: str
    gangs: int
    size: int
    bound_pods: int
    complete_gangs: int  # every member bound
    partial_gangs: int  # some but not all members bound at the end: a gang split apart
    seconds: float  # first PodGroup create -> last pod seen bound (the timeout if some never)
    gangs_per_second: float
    pods_per_second: float
    create_seconds: float  # first PodGroup create -> last pod create answered
    gang_p50_ms: float  # per gang: last member seen created -> last member seen bound
    gang_p99_ms: float
    cpu_seconds: dict[str, float] = field(default_factory=dict)
    # Mutating requests the API server answered during the run, "VERB resource[/sub]": the
    # bench's own creates and deletes are the same for both schedulers; the rest is theirs.
    api_writes: dict[str, int] = field(default_factory=dict)
    bench_watch_reconnects: int = 0


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


async def create_gpu_nodes(api: ApiClient, count: int, concurrency: int) -> None:
    """gpu-node-0 .. gpu-node-{count-1}; ones left from an earlier --keep run are reused."""

    async def create(i: int) -> None:
        try:
            await create_object(api, "/api/v1/nodes", node_body(f"gpu-node-{i}"))
        except ApiError as err:
            if err.status != 409:
                raise

    await run_bounded(count, concurrency, create)


async def create_gangs(
    api: ApiClient, namespace: str, scheduler_name: str, shape: Shape, concurrency: int
) -> tuple[float, float]:
    """PodGroups g-0.., then pods g-<i>-<m> gang by gang; (first request, last answer)."""
    groups = f"{GROUPS_API}/namespaces/{namespace}/podgroups"
    pods = f"/api/v1/namespaces/{namespace}/pods"

    async def create_group(i: int) -> None:
        await create_object(api, groups, pod_group_body(f"g-{i}", shape.size))

    async def create_pod(i: int) -> None:
        gang, member = divmod(i, shape.size)
        body = gang_pod_body(f"g-{gang}-{member}", f"g-{gang}", scheduler_name)
        await create_object(api, pods, body)

    started = time.perf_counter()
    await run_bounded(shape.gangs, concurrency, create_group)
    await run_bounded(shape.gangs * shape.size, concurrency, create_pod)
    return started, time.perf_counter()


_WRITE_LINE: Final = re.compile(r"^apiserver_request_total\{(.*)\} (\S+)$")
_LABEL: Final = re.compile(r'(\w+)="([^"]*)"')


async def api_writes(api: ApiClient) -> dict[str, int]:
    """apiserver_request_total of POST/PUT/PATCH/DELETE by resource, from its /metrics."""
    resp = await open_stream(api, "/metrics", [], aiohttp.ClientTimeout(total=30.0))
    try:
        text = (await resp.read()).decode()
    finally:
        resp.release()
    totals: dict[str, int] = {}
    for line in text.splitlines():
        found = _WRITE_LINE.match(line)
        if found is None:
            continue
        labels = dict(_LABEL.findall(found.group(1)))
        if labels.get("verb") not in ("POST", "PUT", "PATCH", "DELETE", "DELETECOLLECTION"):
            continue
        sub = labels.get("subresource", "")
        key = f"{labels['verb']} {labels.get('resource', '')}" + (f"/{sub}" if sub else "")
        totals[key] = totals.get(key, 0) + int(float(found.group(2)))
    return totals


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


async def measure_shape(
    api: ApiClient,
    plane: ControlPlane,
    scheduler: SchedulerProcess,
    shape: Shape,
    args: argparse.Namespace,
) -> GangMeasurement:
    namespace = f"gang-{scheduler.name}-{shape.label}-{time.strftime('%H%M%S')}"
    await create_namespace(api, namespace)
    try:
        return await _measure_running(api, plane, scheduler, shape, args, namespace)
    finally:
        await delete_pods(api, namespace)
        path = f"{GROUPS_API}/namespaces/{namespace}/podgroups"
        await request_json(api, "DELETE", path)


async def _measure_running(
    api: ApiClient,
    plane: ControlPlane,
    scheduler: SchedulerProcess,
    shape: Shape,
    args: argparse.Namespace,
    namespace: str,
) -> GangMeasurement:
    pods = shape.gangs * shape.size
    watch = BindWatch(api, namespace, pods)
    meter = CpuMeter(
        {
            "scheduler": scheduler.pid(),
            "kube-apiserver": plane.pid("kube-apiserver"),
            "etcd": plane.pid("etcd"),
            "bench client": os.getpid(),
        }
    )
    async with asyncio.TaskGroup() as tasks:
        watching = tasks.create_task(watch.run())
        await watch.wait_watching()
        writes_before = await api_writes(api)
        meter.start()
        started, created = await create_gangs(
            api, namespace, scheduler.scheduler_name, shape, args.concurrency
        )
        complete = await watch.wait_all_bound(started + args.timeout)
        cpu = meter.stop()
        ended = max(watch.bound.values()) if complete else time.perf_counter()
        watching.cancel()
    writes = {k: n - writes_before.get(k, 0) for k, n in (await api_writes(api)).items()}
    latencies, whole, partial = gang_latencies(watch)
    seconds = ended - started
    return GangMeasurement(
        scheduler=scheduler.name,
        shape=shape.label,
        gangs=shape.gangs,
        size=shape.size,
        bound_pods=len(watch.bound),
        complete_gangs=whole,
        partial_gangs=partial,
        seconds=seconds,
        gangs_per_second=whole / seconds,
        pods_per_second=len(watch.bound) / seconds,
        create_seconds=created - started,
        gang_p50_ms=percentile(latencies, 50) * 1e3,
        gang_p99_ms=percentile(latencies, 99) * 1e3,
        cpu_seconds=cpu,
        api_writes={k: n for k, n in sorted(writes.items()) if n > 0},
        bench_watch_reconnects=watch.reconnects,
    )


async def measure_scheduler(
    api: ApiClient, plane: ControlPlane, scheduler: SchedulerProcess, args: argparse.Namespace
) -> list[GangMeasurement]:
    results = []
    await scheduler.start()
    try:
        for shape in args.shapes:
            print(f"{scheduler.name}: {shape.label} gangs ...", flush=True)
            result = await measure_shape(api, plane, scheduler, shape, args)
            print(f"  {_row(result)}", flush=True)
            results.append(result)
    finally:
        await scheduler.stop()
    return results


def make_scheduler(name: str, plane: ControlPlane, run_dir: Path) -> SchedulerProcess:
    if name == "batchsched":
        return Batchsched(plane.kubeconfig, run_dir / "batchsched.log")
    return Coscheduling(plane)


async def bench(
    plane: ControlPlane, args: argparse.Namespace, run_dir: Path
) -> tuple[Machine, list[GangMeasurement]]:
    names = [args.only] if args.only else list(SCHEDULERS)
    if args.coscheduling_first:
        names.reverse()
    schedulers = [make_scheduler(n, plane, run_dir) for n in names]
    api = await api_client(str(plane.kubeconfig))
    async with api:
        machine = machine_info(await kube_version(api))
        others = await count_nodes(api)
        if others:
            print(f"note: the cluster already has {others} node(s); they take pods too")
        await install_crds(api)
        await create_gpu_nodes(api, args.nodes, args.concurrency)
        results: list[GangMeasurement] = []
        for scheduler in schedulers:
            results += await measure_scheduler(api, plane, scheduler, args)
        if not plane.owned and not args.keep:
            await delete_bench_nodes(api)
    return machine, results


def ratios(results: list[GangMeasurement]) -> dict[str, float]:
    """Per shape: batchsched's gangs/s over Coscheduling's, when both ran."""
    rates = {(r.scheduler, r.shape): r.gangs_per_second for r in results}
    out = {}
    for shape in dict.fromkeys(r.shape for r in results):
        ours, theirs = rates.get(("batchsched", shape)), rates.get(("coscheduling", shape))
        if ours is not None and theirs:
            out[shape] = ours / theirs
    return out


def _row(r: GangMeasurement) -> str:
    return (
        f"{r.scheduler:<13} {r.shape:>7} {f'{r.complete_gangs}/{r.gangs}':>10} "
        f"{r.partial_gangs:>7} {f'{r.bound_pods}/{r.gangs * r.size}':>11} "
        f"{r.seconds:8.2f} {r.gangs_per_second:8.1f} {r.pods_per_second:8.1f} "
        f"{r.create_seconds:8.2f} {r.gang_p50_ms:8.0f} {r.gang_p99_ms:8.0f}"
    )


def render(machine: Machine, results: list[GangMeasurement], args: argparse.Namespace) -> str:
    columns = ("scheduler", "kube-apiserver", "etcd", "bench client", "other", "machine")
    lines = [
        f"machine: {machine.cpus} cpus ({machine.cpu_model}), {machine.python}, "
        f"kube {machine.kube}, load average {machine.load_average:.2f} at start, "
        f"{os.getloadavg()[0]:.2f} at end",
        f"workload: {args.nodes} nodes (64 cpu, 512Gi, 110 pods, 8 {GPU}); pods 1 {GPU}, "
        f"100m, 500Mi; {args.concurrency} creates in flight",
        "",
        f"{'scheduler':<13} {'shape':>7} {'gangs':>10} {'partial':>7} {'pods':>11} "
        f"{'seconds':>8} {'gangs/s':>8} {'pods/s':>8} {'create s':>8} {'p50 ms':>8} "
        f"{'p99 ms':>8}",
        *(_row(r) for r in results),
        "",
        "CPU seconds used during each run:",
        f"{'run':<21} " + " ".join(f"{c:>14}" for c in columns) + f" {'sched ms/pod':>13}",
    ]
    for r in results:
        cells = " ".join(f"{r.cpu_seconds.get(c, float('nan')):14.2f}" for c in columns)
        per_pod = r.cpu_seconds.get("scheduler", float("nan")) / max(1, r.bound_pods) * 1e3
        lines.append(f"{r.scheduler + ' ' + r.shape:<21} {cells} {per_pod:13.2f}")
    lines += ["", "API writes during each run (the bench's creates included):"]
    lines += [f"{r.scheduler + ' ' + r.shape:<21} "
              + ", ".join(f"{k} {n}" for k, n in r.api_writes.items())
              for r in results]  # fmt: skip
    lines += [f"note: the bench's watch was cut {r.bench_watch_reconnects} time(s) in "
              f"{r.scheduler} {r.shape}: its times may lag"
              for r in results if r.bench_watch_reconnects]  # fmt: skip
    for shape, value in ratios(results).items():
        lines.append(f"ratio batchsched / coscheduling, {shape} (gangs/s): {value:.2f}x")
    return "\n".join(lines)


async def main(args: argparse.Namespace) -> int:
    run_dir = new_run_dir()
    print(f"logs: {run_dir}", flush=True)
    async with control_plane_for(args.kubeconfig, run_dir, keep=args.keep) as plane:
        machine, results = await bench(plane, args, run_dir)
    print(render(machine, results, args))
    if args.json:
        body = {
            "machine": asdict(machine),
            "load_average_end": os.getloadavg()[0],
            "workload": {
                "nodes": args.nodes,
                "concurrency": args.concurrency,
                "shapes": [s.label for s in args.shapes],
            },
            "results": [asdict(r) for r in results],
            "ratio_gangs_per_second": ratios(results),
        }
        args.json.write_text(json.dumps(body, indent=2) + "\n")
    whole = all(r.complete_gangs == r.gangs for r in results)
    return 0 if whole else EXIT_UNBOUND


def run(args: argparse.Namespace) -> int:
    if args.gangs is not None or args.size is not None:
        args.shapes = [Shape(args.gangs or 1000, args.size or 3)]
    return run_bench("gang-e2e", lambda: main(args))


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
    add_harness_arguments(parser, SCHEDULERS, "seconds per shape until all bound")
    parser.add_argument(
        "--coscheduling-first", action="store_true", help="run the baseline first (order bias)"
    )
    parser.set_defaults(run=run)


if __name__ == "__main__":
    _parser = argparse.ArgumentParser(prog="python -m batchsched.bench.e2e_gang")
    add_parser(_parser.add_subparsers(dest="command", required=True))
    _args = _parser.parse_args(["gang-e2e", *sys.argv[1:]])
    sys.exit(int(_args.run(_args)))
