"""`batchsched-agent`: the node agent's command line, its API writer and its HTTP endpoints.

    batchsched-agent --node-name "$NODE_NAME"             # NVML from the host driver
    batchsched-agent --fake dgx-h100 --node-name kind-worker   # a reference machine
    batchsched-agent --fake pcie-server --node-name n1 --print # the object, no API server

/healthz answers 200 while the process runs; /readyz 503 lists what is wrong (NVML
unavailable and why, the last write refused and why); /metrics is Prometheus text.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from collections.abc import Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import Final

from aiohttp import web
from kubernetes_asyncio.client import ApiClient

from batchsched.kube.client import (
    ApiError,
    ApiUnavailable,
    KubeConfigError,
    api_client,
    request_json,
)
from gpu.agent import Agent, AgentConfig, PublishError, dump
from gpu.agent_metrics import AgentMetrics
from gpu.fake_nvml import FAKE_MACHINES, FakeNvml, Faults, host_numa
from gpu.nrt import API_VERSION
from gpu.nvml import NvmlError, NvmlLibrary, NvmlReader
from gpu.nvml_model import HostNuma, parse_cpu_list
from gpu.podresources import DEFAULT_SOCKET, open_pod_resources

__all__ = ["KubePublisher", "main", "read_host_numa"]

log = logging.getLogger("batchsched.agent")

FIELD_MANAGER: Final = "batchsched-agent"
APPLY_PATCH: Final = "application/apply-patch+yaml"
SYSFS_NODES: Final = Path("/sys/devices/system/node")
_NRT_PATH: Final = f"/apis/{API_VERSION}/noderesourcetopologies"


class KubePublisher:
    """Server-side apply as field manager batchsched-agent; connects on first use."""

    def __init__(self, kubeconfig: str | None = None, api: ApiClient | None = None) -> None:
        self._kubeconfig = kubeconfig
        self._api = api

    async def apply(self, obj: Mapping[str, object]) -> None:
        meta = obj.get("metadata")
        name = meta.get("name") if isinstance(meta, Mapping) else None
        try:
            if self._api is None:
                self._api = await api_client(self._kubeconfig)
            await request_json(
                self._api,
                "PATCH",
                f"{_NRT_PATH}/{name}",
                query=[("fieldManager", FIELD_MANAGER), ("force", "true")],
                body=obj,
                content_type=APPLY_PATCH,
            )
        except ApiError as err:
            hint = " (is the NodeResourceTopology CRD installed?)" if err.status == 404 else ""
            raise PublishError(f"{err}{hint}") from err
        except (ApiUnavailable, KubeConfigError) as err:
            raise PublishError(str(err)) from err

    async def close(self) -> None:
        """Close the API client's session; safe to call again."""
        api, self._api = self._api, None
        if api is not None:
            await api.close()


def read_host_numa(root: Path = SYSFS_NODES) -> tuple[HostNuma, ...]:
    """NUMA nodes from sysfs (cpulist, MemTotal, distance, the socket of the first CPU);
    () where sysfs has none (then NUMA nodes come from the GPUs' CPU affinity)."""
    found = []
    for path in sorted(root.glob("node[0-9]*"), key=lambda p: int(p.name[4:])):
        try:
            found.append(_read_node(root, path))
        except (OSError, ValueError) as err:
            log.warning("NUMA node unreadable path=%s error=%s; using GPU CPU affinity", path, err)
            return ()
    return tuple(found)


def _read_node(root: Path, path: Path) -> HostNuma:
    numa = int(path.name[4:])
    cpus = parse_cpu_list((path / "cpulist").read_text())
    memory_kb = 0
    for line in (path / "meminfo").read_text().splitlines():
        if "MemTotal:" in line:
            memory_kb = int(line.split()[-2])
    distance = [int(d) for d in (path / "distance").read_text().split()]
    socket = numa
    if cpus:
        package = root.parent / "cpu" / f"cpu{cpus[0]}" / "topology" / "physical_package_id"
        if package.exists():
            socket = int(package.read_text())
    return HostNuma(numa, socket, cpus, memory_kb // 1024, dict(enumerate(distance)))


def _package_version() -> str:
    """The installed distribution's version: the agent ships in the batchsched package."""
    try:
        return metadata.version("batchsched")
    except metadata.PackageNotFoundError:  # a source tree that was never pip-installed
        return "unknown (not installed)"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="batchsched-agent", description=__doc__.split("\n")[0])
    parser.add_argument("--version", action="version", version=f"%(prog)s {_package_version()}")
    parser.add_argument(
        "--node-name",
        default=os.environ.get("NODE_NAME", ""),
        help="this node's name (default: $NODE_NAME, from the downward API)",
    )
    parser.add_argument("--kubeconfig", help="kubeconfig (default: in-cluster, $KUBECONFIG)")
    parser.add_argument(
        "--fake",
        choices=sorted(FAKE_MACHINES),
        help="read a reference machine through the fake NVML instead",
    )
    parser.add_argument(
        "--fake-lost", default="", help="with --fake: GPU indices that fell off the bus, e.g. 1,5"
    )
    parser.add_argument("--poll-interval", type=float, default=10.0, help="seconds between reads")
    parser.add_argument(
        "--heartbeat-interval",
        type=float,
        default=60.0,
        help="longest time between writes of the object",
    )
    parser.add_argument("--pod-resources-socket", type=Path, default=DEFAULT_SOCKET)
    parser.add_argument("--topology-manager-policy", default="none")
    parser.add_argument("--topology-manager-scope", default="container")
    parser.add_argument(
        "--http-address",
        default="0.0.0.0:8081",
        help="host:port for /healthz, /readyz and /metrics",
    )
    parser.add_argument(
        "--print",
        action="store_true",
        dest="print_only",
        help="read once, print the object as JSON and exit",
    )
    parser.add_argument(
        "--log-level", default="INFO", choices=("DEBUG", "INFO", "WARNING", "ERROR")
    )
    return parser


def make_reader(args: argparse.Namespace) -> tuple[NvmlReader, str]:
    if args.fake:
        machine = FAKE_MACHINES[args.fake]
        lost = {int(i) for i in args.fake_lost.split(",") if i.strip()}
        lib: NvmlLibrary = FakeNvml(machine, Faults(lost=lost))
        return NvmlReader(lib, host_numa(machine)), f"fake:{args.fake}"
    import pynvml  # the real library; loading libnvidia-ml waits for nvmlInit

    return NvmlReader(pynvml, read_host_numa(), cpus=os.cpu_count() or 1024), "nvml"


def make_http_app(agent: Agent) -> web.Application:
    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def readyz(_: web.Request) -> web.Response:
        checks = agent.ready()
        lines = [f"[+]{n} ok" if ok else f"[-]{n} failed: {why}" for n, (ok, why) in checks.items()]
        ready = all(ok for ok, _ in checks.values())
        lines.append("readyz check passed" if ready else "readyz check failed")
        return web.Response(status=200 if ready else 503, text="\n".join(lines) + "\n")

    async def metrics(_: web.Request) -> web.Response:
        return web.Response(body=agent.metrics.render(), content_type="text/plain")

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics)
    return app


async def serve_agent(agent: Agent, address: str) -> None:
    """Serve HTTP and refresh until SIGTERM/SIGINT, then close what was opened: the refresh
    task is awaited to its end (a request it was making is abandoned), the HTTP site, the
    API client's session (left open it logs "Unclosed client session") and NVML."""
    host, _, port = address.rpartition(":")
    runner = web.AppRunner(make_http_app(agent), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host or "0.0.0.0", int(port)).start()
    log.info("serving /healthz /readyz /metrics address=%s", address)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    work = asyncio.create_task(agent.run())
    stopped = asyncio.create_task(stop.wait())
    try:
        await asyncio.wait({work, stopped}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
        for task in (work, stopped):
            task.cancel()
        await asyncio.gather(work, stopped, return_exceptions=True)
        await runner.cleanup()
        if isinstance(agent.publisher, KubePublisher):
            await agent.publisher.close()
        if agent.nvml_open:
            try:
                agent.reader.close()
            except NvmlError as err:
                log.warning("NVML shutdown failed error=%s", err)
        log.info("stopped")


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=args.log_level, format="%(asctime)s %(levelname)s %(name)s %(message)s"
    )
    if not args.node_name:
        print("batchsched-agent: --node-name or $NODE_NAME is required", file=sys.stderr)
        return 2
    reader, source = make_reader(args)
    config = AgentConfig(
        args.node_name,
        source,
        poll_s=args.poll_interval,
        heartbeat_s=args.heartbeat_interval,
        policy=args.topology_manager_policy,
        scope=args.topology_manager_scope,
    )
    if args.print_only:
        return asyncio.run(_print_once(reader, config))
    publisher = KubePublisher(args.kubeconfig)
    agent = Agent(
        reader,
        publisher,
        config,
        pod_resources=open_pod_resources(args.pod_resources_socket),
        metrics=AgentMetrics(),
    )
    asyncio.run(serve_agent(agent, args.http_address))
    return 0


class _Printer:
    def __init__(self) -> None:
        self.printed: Mapping[str, object] | None = None

    async def apply(self, obj: Mapping[str, object]) -> None:
        self.printed = obj


async def _print_once(reader: NvmlReader, config: AgentConfig) -> int:
    printer = _Printer()
    agent = Agent(reader, printer, config)
    await agent.refresh()
    if printer.printed is None:
        print(f"batchsched-agent: {agent.nvml_status[1]}", file=sys.stderr)
        return 1
    print(dump(printer.printed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
