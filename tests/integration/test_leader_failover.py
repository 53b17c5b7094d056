"""Two `batchsched run --leader-elect` processes: only the leader schedules, and SIGKILL of the
leader hands over within the lease time with no pod bound twice."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest
from kubernetes_asyncio import client

from batchsched.kube.client import request_json
from tests.builders import make_node, make_pod
from tests.integration.control_plane import ControlPlane
from tests.integration.helpers import create_node, create_pod, wait_for
from tests.integration.live import events_for

LEASE_S = 4.0
CONFIG = f"""\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: true
  leaseDuration: {LEASE_S:.0f}s
  renewDeadline: 3s
  retryPeriod: 500ms
  resourceNamespace: kube-system
  resourceName: gpu-scheduler-failover-test
profiles:
- schedulerName: gpu-scheduler
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Replica:
    def __init__(self, identity: str, plane: ControlPlane, config: Path, log: Path) -> None:
        self.identity = identity
        self.port = free_port()
        self.log = log
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "batchsched.cli",
                "run",
                "--kubeconfig",
                str(plane.kubeconfig),
                "--config",
                str(config),
                "--leader-elect",
                "--leader-elect-identity",
                identity,
                "--http-address",
                f"127.0.0.1:{self.port}",
                "--secure-port",  # two replicas on one host: only the plain port is read
                "0",
            ],
            stdout=subprocess.DEVNULL,
            stderr=log.open("w"),
            env=dict(os.environ),
        )

    async def attempts(self) -> float:
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"http://127.0.0.1:{self.port}/metrics") as resp,
        ):
            text = await resp.text()
        found = re.findall(r"^scheduler_schedule_attempts_total\{[^}]*\} ([0-9.e+]+)$", text, re.M)
        return sum(float(v) for v in found)

    async def ready(self) -> bool:
        try:
            async with (
                aiohttp.ClientSession() as session,
                session.get(f"http://127.0.0.1:{self.port}/readyz") as resp,
            ):
                return resp.status == 200
        except aiohttp.ClientError:
            return False

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture
def replicas(control_plane: ControlPlane, tmp_path: Path) -> Iterator[dict[str, Replica]]:
    config = tmp_path / "sched.yaml"
    config.write_text(CONFIG)
    started = {
        name: Replica(name, control_plane, config, tmp_path / f"{name}.log") for name in ("a", "b")
    }
    try:
        yield started
    finally:
        for replica in started.values():
            replica.stop()


async def holder(api: client.ApiClient) -> str:
    lease = await request_json(
        api,
        "GET",
        "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/gpu-scheduler-failover-test",
    )
    spec = lease.get("spec")
    return str(spec.get("holderIdentity") or "") if isinstance(spec, dict) else ""


async def bound_count(api: client.ApiClient, prefix: str) -> int:
    pods = await client.CoreV1Api(api).list_namespaced_pod("default")
    return sum(1 for p in pods.items if p.metadata.name.startswith(prefix) and p.spec.node_name)


async def _holder_is(api: client.ApiClient, identity: str) -> bool:
    try:
        return await holder(api) == identity
    except Exception:  # the Lease does not exist until someone wins
        return False


async def test_only_the_leader_schedules_and_a_killed_leader_hands_over_within_the_lease(
    api: client.ApiClient, replicas: dict[str, Replica]
) -> None:
    for i in range(3):
        await create_node(api, make_node(f"f{i}").cpu("4"))
    await wait_for(lambda: all_ready(replicas), timeout=60, what="both replicas ready")
    await wait_for(lambda: _any_holder(api, replicas), timeout=30, what="a leader elected")
    leader_id = await holder(api)
    leader = replicas[leader_id]
    standby = next(r for r in replicas.values() if r is not leader)

    for i in range(10):
        await create_pod(api, make_pod(f"first-{i}").cpu("100m"))
    await wait_for(lambda: _bound(api, "first-", 10), timeout=30, what="first pods bound")
    assert await leader.attempts() >= 10
    assert await standby.attempts() == 0, "the standby must not schedule"

    leader.proc.send_signal(signal.SIGKILL)
    leader.proc.wait()
    killed_at = time.monotonic()
    for i in range(10):
        await create_pod(api, make_pod(f"second-{i}").cpu("100m"))
    await wait_for(lambda: _holder_is(api, standby.identity), timeout=30, what="takeover")
    took_over = time.monotonic() - killed_at
    await wait_for(lambda: _bound(api, "second-", 10), timeout=30, what="second pods bound")
    # Within the lease (plus one retry period and this busy 2-core machine's slack).
    assert took_over <= LEASE_S + 0.5 + 3.0, f"takeover took {took_over:.1f}s"
    assert await standby.attempts() >= 10
    # No double binding: exactly one Scheduled event, seen once, per pod. Events outlive
    # their pods, so only those about these very pods (by uid) count.
    pods = await client.CoreV1Api(api).list_namespaced_pod("default")
    uids = {p.metadata.name: p.metadata.uid for p in pods.items}
    for name in [f"first-{i}" for i in range(10)] + [f"second-{i}" for i in range(10)]:
        scheduled = [
            e
            for e in await events_for(api, "default", name)
            if e["reason"] == "Scheduled" and (e.get("regarding") or {}).get("uid") == uids[name]
        ]
        assert len(scheduled) == 1, (name, scheduled)
        assert (scheduled[0].get("series") or {}).get("count", 1) == 1


async def all_ready(replicas: dict[str, Replica]) -> bool:
    for replica in replicas.values():
        assert replica.proc.poll() is None, replica.log.read_text()[-3000:]
        if not await replica.ready():
            return False
    return True


async def _any_holder(api: client.ApiClient, replicas: dict[str, Replica]) -> bool:
    try:
        return await holder(api) in replicas
    except Exception:
        return False


async def _bound(api: client.ApiClient, prefix: str, count: int) -> bool:
    return await bound_count(api, prefix) == count
