"""The processes of `bench extender`: the real kube-scheduler with a config of the bench's own
(with or without `extenders:`), and `batchsched extender`, each with its log in the run dir."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Final

from batchsched.bench.e2e_cluster import BenchError, ControlPlane
from batchsched.bench.e2e_procs import wait_ready

READY_TIMEOUT_S: Final = 120.0
EXTENDER_WEIGHT: Final = 5


def kube_scheduler_binary(version: str) -> Path:
    """The binary scripts/control-plane.sh installs (cached by version)."""
    path = Path.home() / ".cache" / "batchsched" / "k8s" / version / "bin" / "kube-scheduler"
    if not path.exists():
        raise BenchError(f"{path} is missing: run scripts/control-plane.sh install")
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def scheduler_config(plane: ControlPlane, extender_url: str | None) -> str:
    """kube-scheduler's own defaults, plus the extender when there is one."""
    text = f"""\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: {plane.kubeconfig}
  qps: 5000
  burst: 5000
leaderElection:
  leaderElect: false
"""
    if extender_url is not None:
        text += f"""\
extenders:
- urlPrefix: {extender_url}
  filterVerb: filter
  prioritizeVerb: prioritize
  weight: {EXTENDER_WEIGHT}
  nodeCacheCapable: true
  httpTimeout: 5s
  managedResources:
  - name: nvidia.com/gpu
"""
    return text


class Process:
    """One child process, its output in a log file; stopped with SIGTERM, then SIGKILL."""

    def __init__(self, name: str, argv: list[str], log: Path) -> None:
        self.name = name
        self._argv = argv
        self._log = log
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self._log.open("ab") as out:
            self._proc = subprocess.Popen(self._argv, stdout=out, stderr=subprocess.STDOUT)

    def check_alive(self, deadline: float) -> None:
        if self._proc is None or self._proc.poll() is not None:
            raise BenchError(f"{self.name} exited; see {self._log}")
        if time.monotonic() > deadline:
            raise BenchError(f"{self.name} not ready after {READY_TIMEOUT_S:.0f}s; see {self._log}")

    async def stop(self) -> None:
        proc = self._proc
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            await asyncio.to_thread(proc.wait, 30)
        except subprocess.TimeoutExpired:
            proc.kill()
            await asyncio.to_thread(proc.wait)


async def start_extender(plane: ControlPlane, run_dir: Path) -> tuple[Process, str]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    argv = [sys.executable, "-m", "batchsched.cli", "extender"]
    argv += [f"--kubeconfig={plane.kubeconfig}", f"--address=127.0.0.1:{port}"]
    proc = Process("batchsched extender", argv, run_dir / "batchsched-extender.log")
    proc.start()
    await wait_ready(f"{url}/readyz", None, time.monotonic() + READY_TIMEOUT_S, proc.check_alive)
    return proc, url


async def start_kube_scheduler(
    plane: ControlPlane, run_dir: Path, binary: Path, extender_url: str | None
) -> Process:
    """Started; it is ready when the bench's first pod is bound (it serves no port here)."""
    tag = "with-extender" if extender_url else "plain"
    config = run_dir / f"kube-scheduler-{tag}.yaml"
    config.write_text(scheduler_config(plane, extender_url))
    argv = [str(binary), f"--config={config}", "--secure-port=0"]
    proc = Process(f"kube-scheduler ({tag})", argv, run_dir / f"kube-scheduler-{tag}.log")
    proc.start()
    return proc
