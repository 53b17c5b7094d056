"""The faults of the chaos soak: when each comes (`plan_faults`, pure) and how it is done.

- leader-kill: SIGKILL of the replica the Lease names (a new process takes its slot);
- apiserver-restart: SIGKILL of kube-apiserver, then `scripts/control-plane.sh up`, which
  starts only what is down (etcd and its data stay);
- watch-cut: the proxy between the schedulers and the API server resets every connection;
- etcd-compaction: `etcdctl compact` at the current revision, then a watch cut, so the
  schedulers resume their watches from a compacted revision;
- recreate-pending / recreate-running: the bench deletes a gang member (pending, or bound
  and running) and the operator creates it again under the same name (a new uid).
Members that fail are part of the workload (chaos_workload.py), not injected here.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import re
import signal
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from kubernetes_asyncio.client import ApiClient

from batchsched.bench.chaos_checker import Checker
from batchsched.bench.chaos_operator import Operator
from batchsched.bench.chaos_pods import TERMINAL, PodState
from batchsched.bench.chaos_proxy import ProxyProcess
from batchsched.bench.chaos_replicas import Replicas
from batchsched.bench.e2e_cluster import BenchError, ControlPlane, run_script

KINDS: Final = (
    "leader-kill",
    "apiserver-restart",
    "watch-cut",
    "etcd-compaction",
    "recreate-pending",
    "recreate-running",
)
_FIND_TIMEOUT_S: Final = 30.0


@dataclass(frozen=True)
class PlannedFault:
    at_s: float  # after the run's start
    kind: str


def plan_faults(
    counts: Mapping[str, int], start_s: float, end_s: float, seed: int
) -> list[PlannedFault]:
    """Purely computational: every fault once in its own slot of [start_s, end_s], in an
    order shuffled by `seed`; the same plan for the same arguments."""
    rng = random.Random(seed)
    kinds = [kind for kind in KINDS for _ in range(counts.get(kind, 0))]
    rng.shuffle(kinds)
    gap = (end_s - start_s) / max(1, len(kinds))
    return [
        PlannedFault(round(start_s + gap * (i + rng.uniform(0.2, 0.8)), 1), kind)
        for i, kind in enumerate(kinds)
    ]


@dataclass
class FaultRecord:
    kind: str
    at: float  # wall clock when it was done
    detail: str
    injected: bool = True
    subject: str = ""  # the killed identity, the recreated pod's key
    downtime_s: float | None = None  # apiserver-restart: kill -> `up` returned


@dataclass
class Injector:
    api: ApiClient  # the bench's admin client, straight to the API server
    plane: ControlPlane
    script_env: Mapping[str, str]
    proxy: ProxyProcess
    replicas: Replicas
    operator: Operator
    checker: Checker
    lease_wait_s: float
    seed: int
    log: Callable[[str], None]

    def __post_init__(self) -> None:
        self.records: list[FaultRecord] = []
        self._rng = random.Random(self.seed + 1)

    async def run(self, plan: list[PlannedFault], t0: float) -> None:
        for fault in plan:
            delay = t0 + fault.at_s - time.time()
            if delay > 0:
                await asyncio.sleep(delay)
            record = await self.inject(fault.kind)
            self.records.append(record)
            state = "fault" if record.injected else "fault skipped"
            self.log(f"{state} kind={record.kind} {record.detail}")

    async def inject(self, kind: str) -> FaultRecord:
        try:
            if kind == "leader-kill":
                return await self._kill_leader()
            if kind == "apiserver-restart":
                return await self._restart_apiserver()
            if kind == "watch-cut":
                self.proxy.cut()
                return FaultRecord(kind, time.time(), "proxy reset every connection")
            if kind == "etcd-compaction":
                return await self._compact()
            return await self._recreate(running=kind == "recreate-running")
        except (BenchError, OSError, RuntimeError, ValueError) as err:
            return FaultRecord(kind, time.time(), f"failed: {err}", injected=False)

    async def _kill_leader(self) -> FaultRecord:
        deadline = time.monotonic() + self.lease_wait_s
        while True:
            leader, _ = await self.replicas.leader(self.api)
            if leader is not None and leader.process.pid() is not None:
                break
            if time.monotonic() > deadline:
                return FaultRecord(
                    "leader-kill", time.time(), "no live leader to kill", injected=False
                )
            await asyncio.sleep(0.2)
        at = time.time()
        pid = leader.process.pid()
        await self.replicas.kill(leader)
        return FaultRecord(
            "leader-kill", at, f"SIGKILL {leader.identity} pid={pid}", subject=leader.identity
        )

    async def _restart_apiserver(self) -> FaultRecord:
        state = self._state_dir()
        pid = self.plane.pid("kube-apiserver")
        if pid is None:
            raise BenchError("no kube-apiserver pid in the state dir")
        at = time.time()
        os.kill(pid, signal.SIGKILL)
        while Path(f"/proc/{pid}").exists() and time.time() - at < 30:
            await asyncio.sleep(0.05)
        await asyncio.to_thread(run_script, state, "up", env=self.script_env)
        downtime = time.time() - at
        return FaultRecord(
            "apiserver-restart",
            at,
            f"SIGKILL kube-apiserver pid={pid}; up again after {downtime:.1f}s",
            downtime_s=downtime,
        )

    async def _compact(self) -> FaultRecord:
        state = self._state_dir()
        etcdctl, endpoint = _etcdctl(state, self.script_env)
        status = await asyncio.to_thread(
            _run, etcdctl, "--endpoints", endpoint, "endpoint", "status", "-w", "json"
        )
        revision = int(json.loads(status)[0]["Status"]["header"]["revision"])
        at = time.time()
        await asyncio.to_thread(_run, etcdctl, "--endpoints", endpoint, "compact", str(revision))
        await asyncio.sleep(1.0)
        self.proxy.cut()  # the schedulers' watches resume from a compacted revision
        return FaultRecord(
            "etcd-compaction", at, f"compacted at revision {revision}, then cut the watches"
        )

    async def _recreate(self, *, running: bool) -> FaultRecord:
        kind = "recreate-running" if running else "recreate-pending"
        deadline = time.monotonic() + _FIND_TIMEOUT_S
        while True:
            candidates = [p for p in self.checker.pods.values() if self._fits(p, running)]
            if candidates:
                break
            if time.monotonic() > deadline:
                return FaultRecord(kind, time.time(), "no such member to delete", injected=False)
            await asyncio.sleep(0.5)
        pod = self._rng.choice(sorted(candidates, key=lambda p: p.key))
        at = time.time()
        if not await self.operator.delete_member(pod):
            return FaultRecord(kind, at, f"delete of {pod.key} failed", injected=False)
        where = f" on {pod.node}" if pod.node else ""
        return FaultRecord(kind, at, f"deleted {pod.key} uid={pod.uid}{where}", subject=pod.key)

    def _fits(self, pod: PodState, running: bool) -> bool:
        if pod.gang not in self.operator.by_key or pod.deleting or pod.phase in TERMINAL:
            return False
        return pod.phase == "Running" if running else (not pod.node and pod.phase == "Pending")

    def _state_dir(self) -> Path:
        if self.plane.state_dir is None:
            raise BenchError("needs the control plane's state dir (set BATCHSCHED_CP_DIR)")
        return self.plane.state_dir


def _etcdctl(state: Path, env: Mapping[str, str]) -> tuple[str, str]:
    ports = (state / "ports.env").read_text()
    port = re.search(r"ETCD_CLIENT_PORT=(\d+)", ports)
    exports = run_script(state, "env", env=env)
    bin_dir = re.search(r"BATCHSCHED_K8S_BIN=(\S+)", exports)
    if port is None or bin_dir is None:
        raise BenchError("cannot find etcd's port or etcdctl from the control-plane script")
    return f"{bin_dir.group(1).strip(chr(39))}/etcdctl", f"http://127.0.0.1:{port.group(1)}"


def _run(*argv: str) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise RuntimeError(f"{Path(argv[0]).name} {argv[3:]} failed: {done.stderr.strip()}")
    return done.stdout


def stop_quietly(proxy: ProxyProcess) -> None:
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        proxy.stop()
