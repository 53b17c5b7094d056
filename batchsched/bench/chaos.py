"""A chaos soak with an independent checker: two leader-elected batchsched replicas schedule
gangs on KWOK nodes while the bench kills leaders, restarts the API server, cuts watches,
compacts etcd and deletes pods, and a checker of its own watches that no invariant breaks.

`python -m batchsched.bench chaos --nodes 200 --gangs 1000 --kills 10 --duration 1200`

1. Bring up etcd + kube-apiserver with an audit policy (a state dir of its own; or use
   `--kubeconfig`, then without the audit checks), and KWOK (scripts/control-plane.sh
   kwok-up); install the CRDs; create three tenant namespaces, three PriorityClasses and N
   KWOK nodes with 8 nvidia.com/gpu each.
2. Start a TCP proxy to the API server and two `batchsched run --leader-elect` replicas
   behind it, each with its own client certificate, a tenant quota file, and a short Lease.
3. Start the checker (chaos_checker.py, its own watches, straight to the API server).
4. Create the gangs as they arrive (chaos_workload.py: 1-64 pods, seconds to minutes, three
   tenants, low/normal/high priority, some with expected runtimes, PDBs or a failing
   member) and inject the planned faults (chaos_faults.py), until every gang has ended or
   the deadline passes.
5. Print gangs completed, faults by kind, violations by kind, failover and recovery times;
   exit 1 when any invariant was violated (a gang that never finished is one).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Final

from batchsched.bench.chaos_audit import apiserver_audit_args, audit_policy_yaml
from batchsched.bench.chaos_faults import KINDS
from batchsched.bench.chaos_report import render, to_json
from batchsched.bench.chaos_run import ChaosOptions, Outcome, soak
from batchsched.bench.e2e_cluster import ControlPlane, control_plane_for, run_script
from batchsched.bench.harness import Report, add_harness_arguments, run_bench, script_main

EXIT_VIOLATIONS: Final = 1


@contextlib.asynccontextmanager
async def chaos_plane(
    kubeconfig: Path | None, run_dir: Path, *, keep: bool
) -> AsyncIterator[tuple[ControlPlane, dict[str, str], Path | None]]:
    """(the control plane, the env its script needs, the audit log or None) with KWOK up.

    A plane of our own gets the audit policy; an existing one (`kubeconfig`) is used as it
    is, so the checks that need the audit log are not made."""
    env: dict[str, str] = {}
    audit_log: Path | None = None
    if not kubeconfig:
        policy, audit_log = run_dir / "audit-policy.yaml", run_dir / "audit.log"
        policy.write_text(audit_policy_yaml())
        env["BATCHSCHED_APISERVER_EXTRA_ARGS"] = apiserver_audit_args(policy, audit_log)
    # Stopping a plane of our own stops KWOK and the controller-manager too.
    async with control_plane_for(kubeconfig, run_dir, keep=keep, env=env) as plane:
        if plane.state_dir is not None:
            await asyncio.to_thread(kwok_up, plane.state_dir, env)
        yield plane, env, audit_log


def kwok_up(state: Path, env: dict[str, str]) -> None:
    """KWOK (built once, cached), which runs the chaos nodes' pods, and the controller-manager,
    whose disruption controller keeps the PodDisruptionBudgets' status (the Eviction API
    refuses every eviction a budget covers until it has)."""
    run_script(state, "install-kwok", timeout=3600.0, env=env)
    run_script(state, "kwok-up", env=env)
    run_script(state, "controller-manager-up", env=env)


def report(options: ChaosOptions, outcome: Outcome) -> Report:
    result, violations, t0 = outcome.result, outcome.violations, outcome.t0
    body = {
        "options": {k: v for k, v in vars(options).items() if k != "log"},
        "result": to_json(result),
        "violations": [
            {"kind": v.kind, "t": v.at - t0, "subject": v.subject, "detail": v.detail}
            for v in violations
        ],
    }
    return Report(render(result, violations, t0), body, 0 if result.ok() else EXIT_VIOLATIONS)


async def bench(args: argparse.Namespace, run_dir: Path) -> Report:
    options = options_from(args)
    async with chaos_plane(args.kubeconfig, run_dir, keep=args.keep) as (plane, env, audit):
        outcome = await soak(plane, env, audit, options, run_dir)
    return report(options, outcome)


def options_from(args: argparse.Namespace) -> ChaosOptions:
    faults = {
        "leader-kill": args.kills,
        "apiserver-restart": args.apiserver_restarts,
        "watch-cut": args.watch_cuts,
        "etcd-compaction": args.compactions,
        "recreate-pending": args.recreates,
        "recreate-running": args.recreates,
    }
    assert set(faults) == set(KINDS)
    return ChaosOptions(
        nodes=args.nodes,
        gangs=args.gangs,
        duration_s=args.duration,
        drain_s=args.timeout,
        seed=args.seed,
        faults=faults,
        max_size=args.max_size,
        lease_duration_s=args.lease_duration,
        slack_s=args.slack,
        concurrency=args.concurrency,
    )


def run(args: argparse.Namespace) -> int:
    return run_bench("chaos", args, functools.partial(bench, args))


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "chaos", help="chaos soak: leader kills, API server restarts, watch cuts, checked"
    )
    parser.add_argument("--nodes", type=int, default=200, help="KWOK nodes with 8 GPUs each")
    parser.add_argument("--gangs", type=int, default=1000, help="PodGroups of 1-64 pods")
    parser.add_argument("--kills", type=int, default=10, help="SIGKILLs of the leader")
    parser.add_argument(
        "--duration", type=float, default=1200.0,
        help="seconds: gangs arrive in the first half, faults come until 3/4 of it",
    )  # fmt: skip
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--apiserver-restarts", type=int, default=2)
    parser.add_argument("--watch-cuts", type=int, default=3)
    parser.add_argument("--compactions", type=int, default=2)
    parser.add_argument(
        "--recreates", type=int, default=3, help="pending and running members deleted, each"
    )
    parser.add_argument("--max-size", type=int, default=64, help="largest gang, in pods")
    parser.add_argument(
        "--lease-duration", type=float, default=15.0,
        help="the Lease's duration in seconds (renewDeadline 2/3 of it, retryPeriod 2/15)",
    )  # fmt: skip
    parser.add_argument(
        "--slack", type=float, default=30.0,
        help="seconds a gang may stay partly bound beyond its scheduleTimeoutSeconds",
    )  # fmt: skip
    add_harness_arguments(
        parser, ("batchsched",), "seconds after --duration for every gang to finish"
    )
    parser.set_defaults(run=run, concurrency=32, timeout=600.0)


if __name__ == "__main__":
    sys.exit(script_main("chaos", "chaos", add_parser))
