"""What the leader's queue status pass costs (runtime/queue_status_writer.py): the order of
every pending gang, their statuses and the write plan, for N pending gangs of 4 members in
4 tenants on 100 nodes. Prints the process CPU time per pass (median of the runs), then
runs the writer's passes on an event loop beside a task that only counts its turns, and
prints the longest the loop waited for a pass between two turns (the pass hands the loop
back every `slice_s` of work), in process CPU time.

    PYTHONPATH=. python3 scripts/queue-status-cost.py [gangs] [runs]
"""

from __future__ import annotations

import asyncio
import gc
import statistics
import sys
import time
from collections.abc import Mapping

from batchsched.cache import SchedulerCache
from batchsched.clock import FakeClock
from batchsched.config import default_config
from batchsched.gang.podgroup import parse_pod_group
from batchsched.gang.status import NotStarted
from batchsched.metrics import SchedulerMetrics
from batchsched.runtime.queue import SchedulingQueue
from batchsched.runtime.queue_status import QueueStatus
from batchsched.runtime.queue_status_writer import (
    QueueStatusWriter,
    live_status_steps,
    live_statuses,
    plan_writes,
)
from batchsched.runtime.scheduler import Scheduler
from batchsched.tenants import TenantLayer
from queues.config import policy_from_mapping
from tests.builders import make_node, make_pod
from tests.runtime.test_handlers import Recorded

TEAMS = ("team-a", "team-b", "team-c", "team-d")


def build(gangs: int) -> Scheduler:
    clock = FakeClock()
    profiles = default_config().build_profiles()
    policy = policy_from_mapping(
        {
            "apiVersion": "batchsched.io/v1alpha1",
            "kind": "QuotaConfig",
            "tenants": [
                {"name": t, "weight": i + 1, "namespaces": [t]} for i, t in enumerate(TEAMS)
            ],
        }
    )
    layer = TenantLayer(policy, clock, lambda p: True)
    queue = SchedulingQueue(
        profiles["gpu-scheduler"].queue_sort.less, clock, tenant_of=layer.tenant_of, rank=layer.rank
    )
    cache = SchedulerCache(clock)
    layer.attach(cache.snapshot)
    recorded = Recorded()
    scheduler = Scheduler(
        profiles, cache, queue, recorded, recorded, SchedulerMetrics(), clock, tenants=layer
    )
    for n in range(100):
        cache.add_node(make_node(f"n{n}").gpus(8).cpu("64").view())
    for g in range(gangs):
        team = TEAMS[g % len(TEAMS)]
        meta = {"name": f"g{g}", "namespace": team, "uid": f"pg-{g}"}
        meta["creationTimestamp"] = (
            f"2026-11-26T{g // 3600 % 24:02d}:{g // 60 % 60:02d}:{g % 60:02d}Z"
        )
        group = parse_pod_group({"metadata": meta, "spec": {"minMember": 4}})
        scheduler.gangs.on_add(group)
        scheduler.gangs.rejections[group.key] = NotStarted("0/100 nodes are available: ...")
        for m in range(4):
            pod = make_pod(f"g{g}-{m}", team).gpus(8).cpu("1").set("spec.priority", g % 3)
            queue.add(pod.label("scheduling.x-k8s.io/pod-group", f"g{g}").view())
    return scheduler


async def _no_patch(path: str, body: Mapping[str, object], content_type: str) -> object:
    return {}


async def loop_waits(scheduler: Scheduler, runs: int) -> tuple[float, int]:
    """The longest gap (ms of process CPU) between two turns of another task while the
    writer runs `runs` passes, and how many times the passes gave the loop back."""
    writer = QueueStatusWriter(_no_patch, FakeClock(), timer=time.process_time)
    longest = 0.0
    done = False

    async def other_task() -> None:
        nonlocal longest
        last = time.process_time()
        while not done:
            await asyncio.sleep(0)
            now = time.process_time()
            longest, last = max(longest, now - last), now

    ticker = asyncio.create_task(other_task())
    for _ in range(runs):
        await writer.publish(lambda: live_status_steps(scheduler), {})
    done = True
    await ticker
    return longest * 1000, writer.slices


def main() -> None:
    gangs = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    scheduler = build(gangs)
    costs: list[float] = []
    written: dict[str, QueueStatus] = {}
    for _ in range(runs):
        start = time.process_time()
        statuses = live_statuses(scheduler)
        plan = plan_writes(statuses, written, {}, lambda key: 1e9, (15.0, 20), 1.8e9)
        costs.append((time.process_time() - start) * 1000)
        written = dict(statuses)
    print(
        f"{gangs} pending gangs x 4 members, {len(statuses)} statuses, {len(plan)} writes "
        f"planned: median {statistics.median(costs):.1f} ms CPU per pass "
        f"(min {min(costs):.1f}, max {max(costs):.1f}, {runs} runs)"
    )
    longest, slices = asyncio.run(loop_waits(scheduler, runs))
    print(
        f"writer passes on an event loop: the loop waited at most {longest:.1f} ms CPU "
        f"between two turns ({slices} turns given back over {runs} passes)"
    )
    # A full collection of the cyclic GC over the 40 000 queued pods lands in whatever runs
    # when it triggers; with the heap frozen, what is left is the passes' own slices.
    gc.collect()
    gc.freeze()
    longest, slices = asyncio.run(loop_waits(scheduler, runs))
    print(
        f"the same with the heap frozen (gc.freeze()): at most {longest:.1f} ms CPU "
        f"({slices} turns given back)"
    )


if __name__ == "__main__":
    main()
