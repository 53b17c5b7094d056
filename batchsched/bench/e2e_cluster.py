"""The cluster side of the end-to-end bench: control plane, Nodes, Pods, clean-up.

Objects follow scheduler_perf's SchedulingBasic templates: Nodes with 4 cpu, 32Gi and 110
pods (capacity and allocatable, as there is no kubelet to report them) and Pods asking for
100m cpu and 500Mi. Every request goes through `request_json`, the same raw-JSON path the
scheduler itself uses.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import yaml
from kubernetes_asyncio.client import ApiClient

from batchsched.kube.client import ApiError, ApiUnavailable, request_json

ROOT: Final = Path(__file__).resolve().parents[2]
SCRIPT: Final = ROOT / "scripts" / "control-plane.sh"
CRD_DIR: Final = ROOT / "deploy" / "crds"
CRDS_PATH: Final = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
# A fresh machine builds kube-apiserver and kube-scheduler with Go first (minutes).
INSTALL_TIMEOUT_S: Final = 3600.0
SCRIPT_TIMEOUT_S: Final = 300.0
BENCH_LABEL: Final = "bench.batchsched.io/e2e"
# Transient answers worth another try while creating objects as fast as the server takes them.
_RETRY_STATUSES: Final = frozenset({429, 500, 503, 504})
_CREATE_TRIES: Final = 5


class BenchError(RuntimeError):
    """The bench could not run as asked (no control plane, a scheduler that never got ready)."""


@dataclass(frozen=True)
class ControlPlane:
    """The API server under test; `state_dir` is None for a cluster known only by kubeconfig."""

    kubeconfig: Path
    state_dir: Path | None
    owned: bool  # this run started it, so this run tears it down

    def script(self, *args: str, timeout: float = SCRIPT_TIMEOUT_S) -> str:
        if self.state_dir is None:
            raise BenchError(f"scripts/control-plane.sh {args[0]} needs a control-plane state dir")
        return run_script(self.state_dir, *args, timeout=timeout)

    def pid(self, component: str) -> int | None:
        """The pid the script recorded for etcd, kube-apiserver or kube-scheduler."""
        if self.state_dir is None:
            return None
        try:
            return int((self.state_dir / f"{component}.pid").read_text().strip())
        except (OSError, ValueError):
            return None


def run_script(
    state_dir: Path,
    *args: str,
    timeout: float = SCRIPT_TIMEOUT_S,
    env: Mapping[str, str] | None = None,
) -> str:
    """`env` adds to (or overrides) this process's environment for the script."""
    env = dict(os.environ, **(env or {}), BATCHSCHED_CP_DIR=str(state_dir))
    try:
        done = subprocess.run(
            [str(SCRIPT), *args], env=env, capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired as err:
        raise BenchError(
            f"control-plane.sh {' '.join(args)} timed out after {timeout:.0f}s"
        ) from err
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-30:])
        raise BenchError(f"control-plane.sh {' '.join(args)} exited {done.returncode}:\n{tail}")
    return done.stdout


def start_control_plane(run_dir: Path, env: Mapping[str, str] | None = None) -> ControlPlane:
    """etcd + kube-apiserver in a state dir of their own (binaries built once, cached);
    `env` for the script (e.g. BATCHSCHED_APISERVER_EXTRA_ARGS)."""
    state = run_dir / "control-plane"
    run_script(state, "install", timeout=INSTALL_TIMEOUT_S)
    run_script(state, "up", env=env)
    return ControlPlane(kubeconfig=state / "admin.kubeconfig", state_dir=state, owned=True)


def attach_control_plane(kubeconfig: Path) -> ControlPlane:
    """An existing API server; its script state dir (needed to run kube-scheduler) is
    $BATCHSCHED_CP_DIR, else the kubeconfig's folder when the script wrote it there."""
    env_dir = os.environ.get("BATCHSCHED_CP_DIR")
    state: Path | None = Path(env_dir) if env_dir else kubeconfig.resolve().parent
    if state is not None and not (state / ".batchsched-cp").exists():
        state = None
    return ControlPlane(kubeconfig=kubeconfig, state_dir=state, owned=False)


def stop_control_plane(plane: ControlPlane) -> None:
    plane.script("down", "--purge")


def new_run_dir() -> Path:
    return Path(tempfile.mkdtemp(prefix="batchsched-e2e-"))


def node_body(
    name: str,
    resources: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, object]:
    """A bench Node with `resources` as capacity and allocatable (scheduler_perf's by
    default)."""
    resources = dict(resources or {"cpu": "4", "memory": "32Gi", "pods": "110"})
    metadata: dict[str, object] = {
        "name": name,
        "labels": {"kubernetes.io/hostname": name, BENCH_LABEL: "true"},
    }
    if annotations:
        metadata["annotations"] = dict(annotations)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": metadata,
        "status": {"capacity": resources, "allocatable": resources},
    }


def pod_body(name: str, scheduler_name: str) -> dict[str, object]:
    container = {
        "name": "pause",
        "image": "registry.k8s.io/pause:3.10",
        "resources": {"requests": {"cpu": "100m", "memory": "500Mi"}},
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"schedulerName": scheduler_name, "containers": [container]},
    }


async def kube_version(api: ApiClient) -> str:
    return str((await request_json(api, "GET", "/version")).get("gitVersion", "unknown"))


async def count_nodes(api: ApiClient) -> int:
    listing = await request_json(api, "GET", "/api/v1/nodes", query=[("limit", "1")])
    meta = listing.get("metadata")
    remaining = meta.get("remainingItemCount", 0) if isinstance(meta, dict) else 0
    items = listing.get("items")
    return (len(items) if isinstance(items, list) else 0) + int(str(remaining or 0))


async def create_nodes(
    api: ApiClient,
    count: int,
    concurrency: int,
    *,
    prefix: str = "node",
    body: Callable[[str], dict[str, object]] = node_body,
) -> None:
    """<prefix>-0 .. <prefix>-{count-1}; ones left from an earlier --keep run are reused."""

    async def create(i: int) -> None:
        await create_or_keep(api, "/api/v1/nodes", body(f"{prefix}-{i}"))

    await run_bounded(count, concurrency, create)


async def install_crds(api: ApiClient, timeout: float = 60.0) -> None:
    """The CRDs batchsched is deployed with (deploy/crds): it watches their objects and is
    not ready until it has listed them."""
    for manifest in sorted(CRD_DIR.glob("*.yaml")):
        for crd in yaml.safe_load_all(manifest.read_text()):
            if not isinstance(crd, dict):
                continue
            await create_or_keep(api, CRDS_PATH, crd)
            await _wait_established(api, str(crd["metadata"]["name"]), timeout)


async def _wait_established(api: ApiClient, name: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        crd = await request_json(api, "GET", f"{CRDS_PATH}/{name}")
        status = crd.get("status")
        conditions = status.get("conditions") if isinstance(status, dict) else None
        for condition in conditions if isinstance(conditions, list) else []:
            if condition.get("type") == "Established" and condition.get("status") == "True":
                return
        if time.monotonic() > deadline:
            raise BenchError(f"CRD {name} not established after {timeout:.0f}s")
        await asyncio.sleep(0.2)


async def create_namespace(api: ApiClient, name: str) -> None:
    body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    await create_object(api, "/api/v1/namespaces", body)


async def create_pods(
    api: ApiClient, namespace: str, scheduler_name: str, count: int, concurrency: int
) -> None:
    """pod-0 .. pod-{count-1}, `concurrency` requests in flight: the same for every scheduler."""
    path = f"/api/v1/namespaces/{namespace}/pods"

    async def create(i: int) -> None:
        await create_object(api, path, pod_body(f"pod-{i}", scheduler_name))

    await run_bounded(count, concurrency, create)


async def run_bounded(count: int, concurrency: int, work: Callable[[int], Awaitable[None]]) -> None:
    """work(0) .. work(count-1), at most `concurrency` at a time, in index order."""
    indexes = iter(range(count))

    async def worker() -> None:
        for i in indexes:  # shared: each worker takes the next index when it is free
            await work(i)

    async with asyncio.TaskGroup() as tasks:
        for _ in range(max(1, min(concurrency, count))):
            tasks.create_task(worker())


async def create_object(api: ApiClient, path: str, body: Mapping[str, object]) -> None:
    for attempt in range(_CREATE_TRIES):
        try:
            await request_json(api, "POST", path, body=body)
            return
        except ApiUnavailable:
            if attempt == _CREATE_TRIES - 1:
                raise
        except ApiError as err:
            if err.status not in _RETRY_STATUSES or attempt == _CREATE_TRIES - 1:
                raise
        await asyncio.sleep(0.1 * 2**attempt)


async def create_or_keep(api: ApiClient, path: str, body: Mapping[str, object]) -> None:
    """Create, or keep the one of that name already there (409)."""
    try:
        await create_object(api, path, body)
    except ApiError as err:
        if err.status != 409:
            raise


async def delete_pods(api: ApiClient, namespace: str, timeout: float = 120.0) -> None:
    """Force-delete (grace 0: no kubelet will ever confirm) and wait until they are gone."""
    path = f"/api/v1/namespaces/{namespace}/pods"
    grace = [("gracePeriodSeconds", "0")]
    # One DELETE for the collection: the API server answers once every pod is gone, which
    # for 5000 pods on a busy 2-core box takes longer than a request's usual 30 s.
    await request_json(
        api, "DELETE", path, query=grace, body={"gracePeriodSeconds": 0}, timeout=timeout
    )
    deadline = time.monotonic() + timeout
    while await _any_left(api, path):
        if time.monotonic() > deadline:
            raise BenchError(f"pods in {namespace} still there {timeout:.0f}s after deletion")
        await asyncio.sleep(0.5)
    # Without a controller-manager the namespace stays Terminating; it is empty, that's enough.
    await request_json(api, "DELETE", f"/api/v1/namespaces/{namespace}")


async def delete_bench_nodes(api: ApiClient) -> None:
    await request_json(api, "DELETE", "/api/v1/nodes", query=[("labelSelector", BENCH_LABEL)])


async def _any_left(api: ApiClient, path: str) -> bool:
    items = (await request_json(api, "GET", path, query=[("limit", "1")])).get("items")
    return bool(items)


@contextlib.asynccontextmanager
async def control_plane_for(
    kubeconfig: Path | None,
    run_dir: Path,
    *,
    keep: bool,
    env: Mapping[str, str] | None = None,
) -> AsyncIterator[ControlPlane]:
    """The given cluster, or a control plane of our own (`env` for its script) that is torn
    down afterwards unless `keep` (then how to stop it is printed)."""
    if kubeconfig:
        plane = attach_control_plane(kubeconfig)
    else:
        plane = await asyncio.to_thread(start_control_plane, run_dir, env)
    try:
        yield plane
    finally:
        if plane.owned and not keep:
            await asyncio.to_thread(stop_control_plane, plane)
        elif plane.owned:
            print(f"kept: KUBECONFIG={plane.kubeconfig}; stop with BATCHSCHED_CP_DIR="
                  f"{plane.state_dir} scripts/control-plane.sh down --purge")  # fmt: skip
