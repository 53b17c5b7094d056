"""`python -m batchsched.bench kueue`: tenant queues under Kueue's baseline performance load.

The shape of Kueue's scheduler performance test (test/performance/scheduler, "baseline"):
5 cohorts x 6 cluster queues, each queue with a nominal quota of 20 and a borrowing limit of
100, and per queue 350 small workloads (1 unit, 200 ms, priority 50, one every 100 ms), 100
medium (5 units, 500 ms, priority 100, one every 500 ms) and 50 large (20 units, 1000 ms,
priority 200, one every 1200 ms): 15,000 workloads.

Here the unit is one GPU and workloads are placed on nodes, not only admitted: a cohort is an
organisation, a cluster queue a team (guaranteed 20 GPUs, max 120); the cluster has exactly
the 600 GPUs the quotas add up to (75 nodes x 8). A small workload is one 1-GPU pod, a medium
one 5-GPU pod, a large one a gang of five 4-GPU pods. Everything runs on the simulator's
virtual clock; the script prints wall time, and per class the mean and p95 virtual time from
creation to admission (start).
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time
from typing import Any

from batchsched.sim.batch import BatchJob, BatchSimulator, Mode
from batchsched.sim.batch_workloads import default_profile, gang_job, gpu_cluster
from queues.model import GPU, MILLI_PER_GPU, QuotaPolicy, Tenant

COHORTS = 5
QUEUES = 6
NOMINAL_GPUS = 20
BORROWING_LIMIT = 100
# (class, count per queue, interval s, members, GPUs per member, runtime s, priority)
CLASSES = (
    ("small", 350, 0.1, 1, 1, 0.2, 50),
    ("medium", 100, 0.5, 1, 5, 0.5, 100),
    ("large", 50, 1.2, 5, 4, 1.0, 200),
)


def policy() -> QuotaPolicy:
    tenants: dict[str, Tenant] = {}
    for c in range(COHORTS):
        org = f"cohort-{c}"
        tenants[org] = Tenant(org, guaranteed={GPU: QUEUES * NOMINAL_GPUS * MILLI_PER_GPU})
        for q in range(QUEUES):
            name = f"{org}/cq-{q}"
            tenants[name] = Tenant(
                name,
                parent=org,
                guaranteed={GPU: NOMINAL_GPUS * MILLI_PER_GPU},
                max={GPU: (NOMINAL_GPUS + BORROWING_LIMIT) * MILLI_PER_GPU},
                namespaces=frozenset({f"c{c}-q{q}"}),
            )
    return QuotaPolicy(tenants, half_life_s=600.0, reservations=4)


def workloads(scale: float = 1.0) -> list[BatchJob]:
    jobs = []
    for c in range(COHORTS):
        for q in range(QUEUES):
            namespace, tenant = f"c{c}-q{q}", f"cohort-{c}/cq-{q}"
            for name, count, interval, members, gpus, runtime, priority in CLASSES:
                for i in range(round(count * scale)):
                    jobs.append(
                        gang_job(
                            f"{namespace}/{name}-{i}",
                            tenant,
                            members,
                            gpus,
                            i * interval,
                            runtime,
                            priority,
                            job_class=name,
                        )
                    )
    return jobs


def run(args: argparse.Namespace) -> int:
    jobs = workloads(args.scale)
    nodes = COHORTS * QUEUES * NOMINAL_GPUS // 8
    mode: Mode = args.mode
    quotas = dataclasses.replace(policy(), reservations=args.reservations)
    simulator = BatchSimulator(gpu_cluster(nodes), default_profile(), quotas, mode=mode)
    started = time.perf_counter()
    result = simulator.run(jobs)
    wall = time.perf_counter() - started
    log = result.log
    print(f"kueue baseline shape: {len(jobs)} workloads, {nodes} nodes x 8 GPUs, mode {mode}")
    print(
        f"wall {wall:.1f} s, {result.attempts} gang attempts, virtual makespan "
        f"{log.makespan():.1f} s, GPU utilisation {log.gpu_utilisation(0, log.makespan()):.1%}"
    )
    for name, *_ in CLASSES:
        waits = [r.wait for r in log.jobs.values() if r.job_class == name and r.wait is not None]
        unstarted = sum(1 for r in log.jobs.values() if r.job_class == name and r.start is None)
        p95 = statistics.quantiles(waits, n=20)[-1] if len(waits) >= 20 else max(waits, default=0)
        print(
            f"  {name:<6} admitted {len(waits):>5}  mean time to admission "
            f"{statistics.fmean(waits) * 1000:8.1f} ms  p95 {p95 * 1000:8.1f} ms"
            f"{'  never admitted ' + str(unstarted) if unstarted else ''}"
        )
    return 0


def add_parser(commands: Any) -> None:
    parser = commands.add_parser("kueue", help="tenant queues under Kueue's baseline load")
    parser.add_argument("--mode", choices=("backfill", "fifo", "greedy"), default="backfill")
    parser.add_argument("--scale", type=float, default=1.0, help="fraction of the workloads")
    parser.add_argument(
        "--reservations", type=int, default=4, help="K: gangs that get a reservation (4)"
    )
    parser.set_defaults(run=run)
