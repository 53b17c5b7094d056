"""The schedulers under test as processes of their own, and what they cost in CPU.

batchsched runs as `python -m batchsched.cli run` in a subprocess (optionally under cProfile),
kube-scheduler through `scripts/control-plane.sh scheduler-up` and scheduler-plugins'
Coscheduling through `coscheduling-up`, so each has its own process and competes for the
same cores on equal terms. Both are ready when their /readyz says so
(informers synced), and both are read through the same /metrics histogram names.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import ssl
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final, Protocol

import aiohttp

from batchsched.bench.e2e_cluster import BenchError, ControlPlane

READY_TIMEOUT_S: Final = 120.0
STOP_TIMEOUT_S: Final = 30.0
_POLL_S: Final = 0.1
_PORT_LINE: Final = re.compile(rb"serving http port=(\d+)")
_POD_WATCH_RETRY: Final = "informer retry kind=Pod "
_TICKS: Final = os.sysconf("SC_CLK_TCK")
# The control plane script runs kube-scheduler with client QPS and burst 5000 (as kube's
# scheduler_perf does); batchsched gets the same, not kube's production default of 50/100.
BENCH_CONFIG: Final = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  qps: 5000
  burst: 5000
profiles:
- schedulerName: gpu-scheduler
"""


class _AliveCheck(Protocol):
    def __call__(self, deadline: float) -> None: ...


class SchedulerProcess(Protocol):
    name: str  # for the report
    scheduler_name: str  # what the pods' spec.schedulerName must say
    # The histogram (and label filter) timing the scheduling algorithm alone, without binding.
    algorithm_metric: tuple[str, str]

    async def start(self) -> None: ...
    async def stop(self) -> None: ...
    def pid(self) -> int | None: ...
    async def metrics(self) -> str: ...
    def pod_watch_retries(self) -> int | None: ...


class Batchsched:
    name = "batchsched"
    scheduler_name = "gpu-scheduler"
    # The pure cycle alone, like kube-scheduler's metric of the same name.
    algorithm_metric = ("scheduler_scheduling_algorithm_duration_seconds", "")

    def __init__(
        self,
        kubeconfig: Path,
        log_path: Path,
        profile: Path | None = None,
        extra_args: Sequence[str] = (),
    ) -> None:
        """`extra_args` go after the defaults, so they win (`--leader-elect`, `--quota`)."""
        self.log_path = log_path
        if "--config" not in extra_args:  # the same client rate limit as kube-scheduler's
            config = log_path.parent / "batchsched-config.yaml"
            config.write_text(BENCH_CONFIG)
            extra_args = ("--config", str(config), *extra_args)
        run = [
            "-m", "batchsched.cli", "run", "--kubeconfig", str(kubeconfig),
            "--no-leader-elect", "--http-address", "127.0.0.1:0", "--secure-port", "0",
            *extra_args,
        ]  # fmt: skip
        profiler = ["-m", "cProfile", "-o", str(profile)] if profile else []
        self._argv = [sys.executable, *profiler, *run]
        self._proc: subprocess.Popen[bytes] | None = None
        self._port = 0
        self._log_from = 0  # where this run's part of the log starts

    async def start(self) -> None:
        """Start a process (again, after `stop`: the log goes on, each run's part read apart)."""
        self._port = 0
        self._log_from = self.log_path.stat().st_size if self.log_path.exists() else 0
        with self.log_path.open("ab") as log:
            self._proc = subprocess.Popen(
                self._argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not self._port:
            self._check_alive(deadline)
            found = _PORT_LINE.search(self.log_path.read_bytes()[self._log_from :])
            self._port = int(found.group(1)) if found else 0
            await asyncio.sleep(_POLL_S)
        await wait_ready(f"http://127.0.0.1:{self._port}/readyz", None, deadline, self._check_alive)

    def _check_alive(self, deadline: float) -> None:
        assert self._proc is not None
        if self._proc.poll() is not None:
            raise BenchError(f"batchsched exited {self._proc.returncode}:\n{self._log_tail()}")
        if time.monotonic() > deadline:
            raise BenchError(
                f"batchsched not ready after {READY_TIMEOUT_S:.0f}s:\n{self._log_tail()}"
            )

    def _log_tail(self) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-30:])

    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def pod_watch_retries(self) -> int | None:
        """How often its Pod informer waited before watching again (its log says so): while
        it waits it sees no new pod, which shows as latency."""
        this_run = self.log_path.read_bytes()[self._log_from :]
        return this_run.decode(errors="replace").count(_POD_WATCH_RETRY)

    async def metrics(self) -> str:
        return await http_get(f"http://127.0.0.1:{self._port}/metrics", None)

    async def stop(self) -> None:
        """SIGTERM: the app drains bindings and exits (and cProfile writes its file)."""
        proc = self._proc
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            await asyncio.to_thread(proc.wait, STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            await asyncio.to_thread(proc.wait)


class KubeScheduler:
    """The upstream kube-scheduler of the control plane script (QPS and burst 5000)."""

    name = "kube-scheduler"
    scheduler_name = "default-scheduler"
    # Its scheduling_attempt_duration_seconds is observed after binding: not comparable.
    algorithm_metric = ("scheduler_scheduling_algorithm_duration_seconds", "")

    def __init__(self, plane: ControlPlane) -> None:
        if plane.state_dir is None:
            raise BenchError(
                "kube-scheduler is started by scripts/control-plane.sh: give a kubeconfig the "
                "script wrote, set BATCHSCHED_CP_DIR, or use --only batchsched"
            )
        self._plane = plane
        self._state = plane.state_dir
        # /metrics needs an authorized client: the admin certificate is system:masters.
        self._tls = ssl.create_default_context()
        self._tls.check_hostname = False
        self._tls.verify_mode = ssl.CERT_NONE  # its serving certificate is self-signed
        self._tls.load_cert_chain(
            self._state / "pki" / "admin.crt", self._state / "pki" / "admin.key"
        )

    async def start(self) -> None:
        await asyncio.to_thread(self._plane.script, "scheduler-up")
        deadline = time.monotonic() + READY_TIMEOUT_S
        await wait_ready(f"{self._url()}/readyz", self._tls, deadline, self._check_alive)

    def _check_alive(self, deadline: float) -> None:
        if self.pid() is None:
            raise BenchError("kube-scheduler exited; see its log in the control-plane state dir")
        if time.monotonic() > deadline:
            raise BenchError(f"kube-scheduler not ready after {READY_TIMEOUT_S:.0f}s")

    def _url(self) -> str:
        env = (self._state / "scheduler.env").read_text()
        found = re.search(r"SCHEDULER_PORT=(\d+)", env)
        if found is None or found.group(1) == "0":
            raise BenchError("kube-scheduler serves no port (BATCHSCHED_SCHEDULER_PORT=0)")
        return f"https://127.0.0.1:{found.group(1)}"

    def pid(self) -> int | None:
        return self._plane.pid("kube-scheduler")

    def pod_watch_retries(self) -> int | None:
        return None  # client-go logs them only at high verbosity

    async def metrics(self) -> str:
        return await http_get(f"{self._url()}/metrics", self._tls)

    async def stop(self) -> None:
        await asyncio.to_thread(self._plane.script, "scheduler-down")


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


def make_scheduler(
    name: str, plane: ControlPlane, run_dir: Path, profile: Path | None = None
) -> SchedulerProcess:
    """batchsched (its log in `run_dir`; under cProfile to `profile`), kube-scheduler or
    coscheduling, on `plane`."""
    if name == "batchsched":
        return Batchsched(plane.kubeconfig, run_dir / "batchsched.log", profile)
    if name == "coscheduling":
        return Coscheduling(plane)
    return KubeScheduler(plane)


async def http_get(url: str, tls: ssl.SSLContext | None) -> str:
    timeout = aiohttp.ClientTimeout(total=10.0)
    async with (
        aiohttp.ClientSession(timeout=timeout) as session,
        session.get(url, ssl=tls or True) as resp,
    ):
        body = await resp.text()
        if resp.status != 200:
            raise BenchError(f"GET {url}: {resp.status} {body[:200]}")
        return body


async def wait_ready(
    url: str, tls: ssl.SSLContext | None, deadline: float, check: _AliveCheck
) -> None:
    """Poll /readyz until 200; `check` raises when the process died or the deadline passed."""
    while True:
        check(deadline)
        try:
            await http_get(url, tls)
            return
        except (BenchError, aiohttp.ClientError, TimeoutError, OSError):
            await asyncio.sleep(_POLL_S)


def histogram_mean_ms(metrics_text: str, metric: str, selector: str = "") -> float | None:
    """Purely computational: the mean of a Prometheus histogram in ms, over the series whose
    labels contain `selector` (all of them when empty); None before any observation."""
    totals = {"_sum": 0.0, "_count": 0.0}
    for line in metrics_text.splitlines():
        if not line.startswith(metric) or selector not in line:
            continue
        suffix = line.split("{", 1)[0].split(" ", 1)[0][len(metric) :]
        if suffix in totals:
            totals[suffix] += float(line.rsplit(" ", 1)[1])
    if not totals["_count"]:
        return None
    return totals["_sum"] / totals["_count"] * 1e3


def process_cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of a live process (all its threads); None if it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()  # the command name may hold spaces
    return (int(fields[11]) + int(fields[12])) / _TICKS  # utime, stime


def machine_busy_seconds() -> float:
    """CPU time all processes spent, summed over cores, since boot (/proc/stat)."""
    first = Path("/proc/stat").read_text().splitlines()[0].split()
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(v) for v in first[1:9])
    return (user + nice + system + irq + softirq + steal) / _TICKS


class CpuMeter:
    """CPU seconds each named process (and the whole machine) used between start and stop."""

    def __init__(self, pids: Mapping[str, int | None]) -> None:
        self._pids = {name: pid for name, pid in pids.items() if pid is not None}
        self._start: dict[str, float] = {}

    def start(self) -> None:
        self._start = self._sample()

    def add_from_birth(self, name: str, pid: int | None) -> None:
        """Meter a process started after `start`, from its first instruction (a scheduler
        started on a backlog: its start-up is part of what is timed)."""
        if pid is not None:
            self._pids[name] = pid
            self._start[name] = 0.0

    def stop(self) -> dict[str, float]:
        end = self._sample()
        used = {name: end[name] - self._start[name] for name in end if name in self._start}
        used["other"] = used["machine"] - sum(v for k, v in used.items() if k != "machine")
        return used

    def _sample(self) -> dict[str, float]:
        sample = {"machine": machine_busy_seconds()}
        for name, pid in self._pids.items():
            seconds = process_cpu_seconds(pid)
            if seconds is not None:
                sample[name] = seconds
        return sample
