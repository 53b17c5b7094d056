"""One chaos soak on a control plane that is up (with KWOK): `soak()` sets the cluster up,
starts the proxy, the checker and the replicas, runs the workload and the faults, and
returns what was seen. The CLI (chaos.py) and the smoke test both call it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import yaml
from kubernetes_asyncio.client import ApiClient

from batchsched.bench.chaos_audit import AuditCheck, AuditRecord, read_new_records
from batchsched.bench.chaos_checker import Checker, Violation
from batchsched.bench.chaos_faults import Injector, plan_faults, stop_quietly
from batchsched.bench.chaos_operator import Operator, set_up_cluster, wait_nodes_ready
from batchsched.bench.chaos_proxy import ProxyProcess
from batchsched.bench.chaos_replicas import Replicas
from batchsched.bench.chaos_report import (
    ChaosResult,
    audit_violations,
    failovers,
    recoveries,
    recreated_bound,
    with_evidence,
)
from batchsched.bench.chaos_watch import CheckerWatch
from batchsched.bench.chaos_workload import (
    GangSpec,
    WorkloadShape,
    leader_config_yaml,
    make_workload,
    quota_yaml,
)
from batchsched.bench.e2e_cluster import BenchError, ControlPlane, install_crds
from batchsched.kube.client import api_client

LEASE_NAMESPACE: Final = "kube-system"
LEASE_NAME: Final = "gpu-scheduler"
_TICK_S: Final = 1.0
_SETTLE_S: Final = 3.0  # after the replicas stopped, for their last Events to be seen
_AUDIT_LAG_S: Final = 5.0  # audit lines are written when a request completes, not in order


@dataclass
class ChaosOptions:
    nodes: int = 200
    gangs: int = 1000
    duration_s: float = 1200.0  # arrivals in the first half, faults until 3/4 of it
    drain_s: float = 600.0  # after `duration_s`, how long gangs may take to finish
    seed: int = 1
    faults: dict[str, int] = field(
        default_factory=lambda: {
            "leader-kill": 10,
            "apiserver-restart": 2,
            "watch-cut": 3,
            "etcd-compaction": 2,
            "recreate-pending": 3,
            "recreate-running": 3,
        }
    )
    max_size: int = 64
    min_runtime_s: int = 5
    max_runtime_s: int = 240
    schedule_timeout_s: int = 60
    load: float = 0.7  # GPU-seconds asked over what the arrival window offers
    lease_duration_s: float = 15.0
    slack_s: float = 30.0
    concurrency: int = 32
    progress_every_s: float = 30.0
    log: Callable[[str], None] = field(default=lambda line: print(line, flush=True))


@dataclass
class Outcome:
    result: ChaosResult
    violations: list[Violation]
    t0: float


class _AuditTail:
    def __init__(self, path: Path | None, lease_duration_s: float) -> None:
        self.path = path
        self.check = AuditCheck(LEASE_NAME, lease_duration_s)
        self._offset = 0
        self._held: list[AuditRecord] = []

    def poll(self, *, final: bool = False) -> None:
        if self.path is None:
            return
        records, self._offset = read_new_records(self.path, self._offset)
        pending = [*self._held, *records]
        cutoff = float("inf") if final else time.time() - _AUDIT_LAG_S
        self._held = [r for r in pending if r.at >= cutoff]
        self.check.feed(r for r in pending if r.at < cutoff)


def server_of(kubeconfig: Path) -> str:
    """host:port of the API server a kubeconfig names (the proxy's upstream)."""
    doc = yaml.safe_load(kubeconfig.read_text())
    server = str(doc["clusters"][0]["cluster"]["server"])
    return server.split("://", 1)[-1].rstrip("/")


async def soak(
    plane: ControlPlane,
    script_env: dict[str, str],
    audit_log: Path | None,
    opts: ChaosOptions,
    run_dir: Path,
) -> Outcome:
    started = time.time()
    shape = WorkloadShape(
        nodes=opts.nodes,
        gangs=opts.gangs,
        duration_s=opts.duration_s,
        seed=opts.seed,
        max_size=opts.max_size,
        min_runtime_s=opts.min_runtime_s,
        max_runtime_s=opts.max_runtime_s,
        schedule_timeout_s=opts.schedule_timeout_s,
        load=opts.load,
    )
    gangs = make_workload(shape)
    opts.log(
        f"workload: {len(gangs)} gangs, {sum(g.size for g in gangs)} pods, "
        f"{sum(g.gpus * g.runtime_s for g in gangs) / 3600:.1f} GPU-hours on "
        f"{opts.nodes * 8} GPUs; faults {opts.faults}"
    )
    api = await api_client(str(plane.kubeconfig))
    watch_api = await api_client(str(plane.kubeconfig))  # the checker's own client
    async with api, watch_api:
        await install_crds(api)
        await set_up_cluster(api, opts.nodes, opts.concurrency)
        await wait_nodes_ready(api, opts.nodes, timeout=max(60.0, opts.nodes / 2))
        return await _run(plane, script_env, audit_log, opts, run_dir, gangs, api, watch_api,
                          started)  # fmt: skip


@dataclass
class _Parts:
    """What one soak runs, once the proxy is up: the checker and its watch, the replicas,
    the operator creating the gangs, the fault injector."""

    opts: ChaosOptions
    gangs: list[GangSpec]
    checker: Checker
    watch: CheckerWatch
    audit: _AuditTail
    replicas: Replicas
    operator: Operator
    injector: Injector


async def _run(
    plane: ControlPlane,
    script_env: dict[str, str],
    audit_log: Path | None,
    opts: ChaosOptions,
    run_dir: Path,
    gangs: list[GangSpec],
    api: ApiClient,
    watch_api: ApiClient,
    started: float,
) -> Outcome:
    if plane.state_dir is None:
        raise BenchError("the chaos soak needs the control plane's state dir (its CA signs the "
                         "replicas' certificates): set BATCHSCHED_CP_DIR")  # fmt: skip
    files = run_dir / "replicas"
    replica_args = _replica_files(files, opts)
    proxy = ProxyProcess(server_of(plane.kubeconfig), run_dir / "proxy.log")
    await asyncio.to_thread(proxy.start)
    checker = Checker(slack_s=opts.slack_s, default_timeout_s=opts.schedule_timeout_s)
    trace = (run_dir / "pods.trace").open("w", buffering=1 << 16)
    watch = CheckerWatch(watch_api, checker, LEASE_NAMESPACE, LEASE_NAME, trace=trace)
    replicas = Replicas(
        pki=plane.state_dir / "pki",
        out_dir=files,
        server=f"https://127.0.0.1:{proxy.port}",
        extra_args=replica_args,
        lease_namespace=LEASE_NAMESPACE,
        lease_name=LEASE_NAME,
        log=opts.log,
    )
    operator = Operator(api, checker, gangs, opts.concurrency, opts.log)
    watch.pod_gone.append(operator.pod_gone)
    injector = Injector(
        api, plane, script_env, proxy, replicas, operator, checker,
        lease_wait_s=3 * opts.lease_duration_s, seed=opts.seed, log=opts.log,
    )  # fmt: skip
    audit = _AuditTail(audit_log, opts.lease_duration_s)
    parts = _Parts(opts, gangs, checker, watch, audit, replicas, operator, injector)
    try:
        t0 = await _drive(parts)
    finally:
        await operator.stop()
        await replicas.stop()
        stop_quietly(proxy)
        trace.close()
    end = time.time()
    audit.poll(final=True)
    checker.finish(end)
    return _outcome(parts, t0, end - started)


def _replica_files(files: Path, opts: ChaosOptions) -> list[str]:
    """The replicas' scheduler config (short Lease) and quota file, in `files`; their args."""
    files.mkdir(exist_ok=True)
    lease = opts.lease_duration_s
    config = files / "scheduler.yaml"
    config.write_text(leader_config_yaml(lease, lease * 2 / 3, lease * 2 / 15, LEASE_NAME))
    quota = files / "quota.yaml"
    quota.write_text(quota_yaml(opts.nodes))
    return ["--config", str(config), "--quota", str(quota), "--seed", str(opts.seed)]


async def _drive(p: _Parts) -> float:
    """Replicas up, then the workload and the faults until every gang ended or the deadline
    passed; the replicas drain at the end. Returns t0, when the replicas were ready."""
    opts = p.opts
    plan = plan_faults(opts.faults, opts.duration_s * 0.05, opts.duration_s * 0.75, opts.seed)
    async with asyncio.TaskGroup() as tasks:
        watching = tasks.create_task(p.watch.run())
        await p.watch.wait_synced()
        await p.replicas.start()
        t0 = time.time()
        opts.log(f"t0: replicas ready; {len(plan)} faults planned")
        background = [
            watching,
            tasks.create_task(p.replicas.run()),
            tasks.create_task(p.operator.run(t0)),
        ]
        faults = tasks.create_task(p.injector.run(plan, t0))
        await _until_done(p, faults, t0)
        faults.cancel()
        background[1].cancel()  # no more replacements
        await p.operator.stop()
        await p.replicas.stop()  # they drain: what they post then is still watched
        await asyncio.sleep(_SETTLE_S)
        for task in background:
            task.cancel()
    return t0


async def _until_done(p: _Parts, faults: asyncio.Task[None], t0: float) -> None:
    opts, checker, operator = p.opts, p.checker, p.operator
    deadline = t0 + opts.duration_s + opts.drain_s
    last_report = time.time()
    while time.time() < deadline:
        await asyncio.sleep(_TICK_S)
        now = time.time()
        checker.tick(now)
        p.audit.poll()
        done = sum(1 for key in operator.by_key if checker.gang_done(checker.gangs[key]))
        if now - last_report >= opts.progress_every_s:
            last_report = now
            _progress(p, done, now - t0)
        if done == len(operator.by_key) and faults.done():
            return
    opts.log(f"deadline: {opts.duration_s + opts.drain_s:.0f}s after t0, not every gang ended")


def _progress(p: _Parts, done: int, elapsed: float) -> None:
    pods = p.checker.pods.values()
    bound = sum(1 for pod in pods if pod.node and pod.phase not in ("Succeeded", "Failed"))
    pending = sum(1 for pod in pods if not pod.node)
    violations = p.checker.counts()
    for _, kind, _ in p.audit.check.standby_writes:
        violations[kind] = violations.get(kind, 0) + 1
    p.opts.log(
        f"t={elapsed:.0f}s gangs ended {done}/{len(p.operator.by_key)} (created "
        f"{len(p.operator.created)}), pods bound {bound} pending {pending}, faults "
        f"{len(p.injector.records)}, violations {violations or 0}"
    )


def _outcome(p: _Parts, t0: float, wall: float) -> Outcome:
    checker, audit, replicas, records = p.checker, p.audit, p.replicas, p.injector.records
    violations = with_evidence(checker.violations, audit.check if audit.path else None)
    if audit.path is not None:
        violations += audit_violations(audit.check, checker)
    may_fail = [g for g in p.gangs if g.fail_member is not None]
    lease_s, binding_s = failovers(records, p.watch.leases, checker)
    result = ChaosResult(
        gangs_total=len(p.gangs),
        gangs_completed=sum(
            1 for g in p.gangs if g.fail_member is None and checker.gang_done(checker.gangs[g.key])
        ),
        gangs_expected_to_fail=len(may_fail),
        gangs_failed_as_planned=sum(1 for g in may_fail if checker.gang_done(checker.gangs[g.key])),
        pods_created=sum(len(v) for v in checker.names_seen.values()),
        faults=_count(r.kind for r in records if r.injected),
        faults_skipped=_count(r.kind for r in records if not r.injected),
        violations=_count(v.kind for v in violations),
        failover_lease_s=lease_s,
        failover_binding_s=binding_s,
        recovery_s=recoveries(records, checker),
        recreated_bound_s=recreated_bound(records, checker),
        members_recreated=len(p.operator.recreated),
        replica_crashes=replicas.crashes(),
        apiserver_downtime_s=[r.downtime_s for r in records if r.downtime_s is not None],
        wall_s=wall,
        audit=audit.path is not None,
        writes_by_replica=dict(sorted(audit.check.writes_by_user.items())),
        replica_incarnations=len(replicas.incarnations),
        replica_self_exits=sum(
            1 for i in replicas.incarnations if i.how_ended.startswith("exited")
        ),
        scheduler_watch_expiries=replicas.watch_expiries(),
        checker_relists=p.watch.relists(),
        preempted_victims=len(checker.preempted),
    )
    return Outcome(result, violations, t0)


def _count(kinds: Iterable[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for kind in kinds:
        out[kind] = out.get(kind, 0) + 1
    return out
