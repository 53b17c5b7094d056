"""The real kube-scheduler v1.34, unmodified, configured with `extenders:` pointing at a real
`batchsched extender` process on the real API server: pods land where batchsched's GPU
scoring prefers, and batchsched's GPU checks refuse nodes with the reason in kube's message."""

from __future__ import annotations

import socket
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes_asyncio import client

from gpu.machines import DGX_A100
from tests.builders import make_node, make_pod
from tests.integration.control_plane import ControlPlane
from tests.integration.helpers import create_node, create_pod, wait_for
from tests.integration.live import node_of, pod

NS = "default"
GPU = "nvidia.com/gpu"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as answer:
            return bool(answer.status == 200)
    except OSError:
        return False


def _scheduler_config(path: Path, plane: ControlPlane, extender_url: str) -> Path:
    path.write_text(
        f"""\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: {plane.kubeconfig}
leaderElection:
  leaderElect: false
extenders:
- urlPrefix: {extender_url}
  filterVerb: filter
  prioritizeVerb: prioritize
  weight: 5
  nodeCacheCapable: true
  httpTimeout: 5s
  managedResources:
  - name: {GPU}
"""
    )
    return path


@pytest.fixture
def extended_kube_scheduler(control_plane: ControlPlane, tmp_path: Path) -> Iterator[str]:
    """`batchsched extender` and kube-scheduler calling it, both real processes; yields the
    extender's URL. Logs in tmp_path."""
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    ext_log = (tmp_path / "extender.log").open("w")
    extender = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "batchsched.cli",
            "extender",
            f"--kubeconfig={control_plane.kubeconfig}",
            f"--address=127.0.0.1:{port}",
            "--log-level=DEBUG",
        ],
        stdout=ext_log,
        stderr=subprocess.STDOUT,
    )
    config = _scheduler_config(tmp_path / "kube-scheduler.yaml", control_plane, url)
    sched_log = (tmp_path / "kube-scheduler.log").open("w")
    scheduler = subprocess.Popen(
        [str(control_plane.bin_dir / "kube-scheduler"), f"--config={config}", "--secure-port=0"],
        stdout=sched_log,
        stderr=subprocess.STDOUT,
    )
    try:
        yield url
    finally:
        for proc in (scheduler, extender):
            proc.terminate()
        for proc in (scheduler, extender):
            proc.wait(timeout=30)
        ext_log.close()
        sched_log.close()


async def _wait_ready(url: str) -> None:
    import asyncio

    await wait_for(
        lambda: asyncio.to_thread(_ready, f"{url}/readyz"), timeout=60, what="extender ready"
    )


async def _message(api: client.ApiClient, name: str) -> str:
    body = await pod(api, NS, name)
    for condition in body.get("status", {}).get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            return str(condition.get("message", ""))
    return ""


def _dgx(name: str) -> object:
    return (
        make_node(name)
        .cpu("128")
        .memory("1Ti")
        .pods(110)
        .gpus(8)
        .label("nvidia.com/gpu.product", DGX_A100.product)
    )


async def test_kube_scheduler_with_batchsched_extender_packs_gpu_pods_where_we_score_best(
    api: client.ApiClient, extended_kube_scheduler: str
) -> None:
    # "busy" has 6 of 8 GPUs taken; "empty" none. kube-scheduler alone spreads
    # (LeastAllocated cpu/memory): it prefers "empty". batchsched's fragmentation scoring
    # packs the 2-GPU pod onto "busy", keeping "empty" whole for an 8-GPU job. (128 cpu, as
    # a DGX A100 has: with 64, FGD's typical pods would find the GPUs stranded for cpu.)
    await create_node(api, _dgx("busy"))  # type: ignore[arg-type]
    await create_node(api, _dgx("empty"))  # type: ignore[arg-type]
    await create_pod(
        api,
        make_pod("running")
        .scheduler("default-scheduler")
        .gpus(6)
        .cpu("1")
        .set("spec.nodeName", "busy"),
    )
    await _wait_ready(extended_kube_scheduler)
    await create_pod(api, make_pod("two").scheduler("default-scheduler").gpus(2).cpu("1"))
    await wait_for(lambda: node_of(api, NS, "two"), timeout=60, what="two bound")
    assert await node_of(api, NS, "two") == "busy"
    await create_pod(api, make_pod("eight").scheduler("default-scheduler").gpus(8).cpu("1"))
    await wait_for(lambda: node_of(api, NS, "eight"), timeout=60, what="eight bound")
    assert await node_of(api, NS, "eight") == "empty"


async def test_batchsched_gpu_checks_refuse_nodes_in_kube_schedulers_own_message(
    api: client.ApiClient, extended_kube_scheduler: str
) -> None:
    await create_node(api, _dgx("a100"))  # type: ignore[arg-type]
    await _wait_ready(extended_kube_scheduler)
    wants_h100 = (
        make_pod("wants-h100")
        .scheduler("default-scheduler")
        .gpus(1)
        .cpu("1")
        .annotation("batchsched.io/gpu-models", "NVIDIA-H100-80GB-HBM3")
    )
    await create_pod(api, wants_h100)
    await wait_for(lambda: _message(api, "wants-h100"), timeout=60, what="wants-h100 refused")
    assert "didn't have the requested GPU model" in await _message(api, "wants-h100")
    assert await node_of(api, NS, "wants-h100") == ""
