"""Two `batchsched run --leader-elect` replicas, kept at two the way a Deployment would.

Each process (an *incarnation*) gets a new identity `replica-<slot>-<n>` and a client
certificate of its own (chaos_audit.py), and talks to the API server through the chaos
proxy. A process that exits by itself (it lost the Lease: it exits 1 by design) or that the
bench killed is replaced by a new one in the same slot.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from kubernetes_asyncio.client import ApiClient

from batchsched.bench.chaos_audit import parse_time, write_replica_kubeconfig
from batchsched.bench.e2e_cluster import BenchError
from batchsched.bench.e2e_procs import Batchsched
from batchsched.kube.client import ApiError, ApiUnavailable, request_json

SLOTS: Final = ("a", "b")
_WATCHDOG_S: Final = 0.5
_RESPAWN_DELAY_S: Final = 1.0  # as a kubelet restarting a container, not at once
_ERROR_LINE: Final = re.compile(r"^[\w.]+(Error|Exception|Lost|Group)\b.*")


class Replica(Batchsched):
    def exit_code(self) -> int | None:
        """None while it runs (or before it started)."""
        return self._proc.poll() if self._proc is not None else None


@dataclass
class Incarnation:
    slot: str
    identity: str
    process: Replica
    started: float  # wall clock
    ready: float | None = None
    ended: float | None = None
    how_ended: str = ""


@dataclass
class Replicas:
    """`start()`, then `run()` as a task (the watchdog); `kill_leader()` for the faults."""

    pki: Path
    out_dir: Path
    server: str  # what the replicas' kubeconfigs point at (the proxy)
    extra_args: Sequence[str]
    lease_namespace: str
    lease_name: str
    log: Callable[[str], None]
    incarnations: list[Incarnation] = field(default_factory=list)
    current: dict[str, Incarnation] = field(default_factory=dict)
    _counts: dict[str, int] = field(default_factory=dict)
    _starting: set[str] = field(default_factory=set)

    async def start(self) -> None:
        await asyncio.gather(*(self._spawn(slot) for slot in SLOTS))

    async def _spawn(self, slot: str) -> Incarnation:
        self._starting.add(slot)
        try:
            n = self._counts[slot] = self._counts.get(slot, 0) + 1
            identity = f"replica-{slot}-{n}"
            kubeconfig = await asyncio.to_thread(
                write_replica_kubeconfig, self.pki, self.out_dir, identity, self.server
            )
            args = [*self.extra_args, "--leader-elect", "--leader-elect-identity", identity]
            process = Replica(kubeconfig, self.out_dir / f"{identity}.log", extra_args=args)
            life = Incarnation(slot, identity, process, time.time())
            self.incarnations.append(life)
            self.current[slot] = life
            await process.start()
            life.ready = time.time()
            self.log(f"replica {identity} ready pid={process.pid()}")
            return life
        finally:
            self._starting.discard(slot)

    async def run(self) -> None:
        """Replace every replica that exited (or failed to start), until cancelled."""
        while True:
            await asyncio.sleep(_WATCHDOG_S)
            for slot, life in list(self.current.items()):
                if slot in self._starting:
                    continue
                if life.ended is None:
                    code = life.process.exit_code()
                    if code is None:
                        continue
                    life.ended, life.how_ended = time.time(), f"exited {code}"
                    self.log(f"replica {life.identity} exited by itself rc={code}; replacing it")
                await asyncio.sleep(_RESPAWN_DELAY_S)
                await self._respawn(slot)

    async def _respawn(self, slot: str) -> None:
        try:
            await self._spawn(slot)
        except BenchError as err:
            self.log(f"replica slot {slot} failed to start: {str(err).splitlines()[0]}")
            life = self.current[slot]
            life.ended, life.how_ended = time.time(), "failed to start"
            with contextlib.suppress(ProcessLookupError, TypeError):
                os.kill(life.process.pid() or -1, signal.SIGKILL)

    async def leader(self, api: ApiClient) -> tuple[Incarnation | None, dict[str, object]]:
        """The incarnation the Lease names, if its record is fresh; and the Lease itself."""
        path = f"/apis/coordination.k8s.io/v1/namespaces/{self.lease_namespace}/leases/"
        try:
            lease = await request_json(api, "GET", path + self.lease_name)
        except (ApiError, ApiUnavailable):
            return None, {}
        spec = lease.get("spec")
        spec = spec if isinstance(spec, dict) else {}
        holder = str(spec.get("holderIdentity") or "")
        renewed = parse_time(str(spec.get("renewTime") or ""))
        duration = float(spec.get("leaseDurationSeconds") or 0)
        fresh = renewed + duration > time.time()
        for life in self.incarnations:
            if life.identity == holder and life.ended is None and fresh:
                return life, spec
        return None, spec

    async def kill(self, life: Incarnation) -> None:
        """SIGKILL (no lease release, no drain), then a new process in its slot."""
        self._starting.add(life.slot)  # the watchdog keeps off this slot meanwhile
        try:
            pid = life.process.pid()
            if pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            life.ended, life.how_ended = time.time(), "SIGKILL by the bench"
            await life.process.stop()  # reaps it
        finally:
            self._starting.discard(life.slot)
        await self._respawn(life.slot)

    async def stop(self) -> None:
        """SIGTERM to every live replica: they drain and release the Lease."""
        live = [life for life in self.current.values() if life.ended is None]
        await asyncio.gather(*(life.process.stop() for life in live))
        for life in live:
            life.ended, life.how_ended = time.time(), "stopped at the end"

    def crashes(self) -> list[str]:
        """Replicas that ended on an error other than a lost Lease: "identity: last error"."""
        out = []
        for life in self.incarnations:
            error = _last_error(life.process.log_path)
            if error and "LeadershipLost" not in error:
                out.append(f"{life.identity}: {error}")
        return out

    def watch_expiries(self) -> int:
        """How often the replicas' informers relisted after 410 Gone (their logs say so)."""
        return sum(_count(life.process.log_path, "watch expired") for life in self.incarnations)


def _last_error(path: Path) -> str:
    """The exception a Python traceback in the log ends with ("" when there is none)."""
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    if not any("Traceback (most recent call last)" in line for line in lines):
        return ""
    if any("LeadershipLost" in line for line in lines):
        return "LeadershipLost"  # what follows it is the exit's noise
    for line in reversed(lines):
        text = line.strip(" |+-")
        if text and _ERROR_LINE.match(text):
            return text[:300]
    return "a traceback"


def _count(path: Path, needle: str) -> int:
    try:
        return path.read_text(errors="replace").count(needle)
    except OSError:
        return 0
