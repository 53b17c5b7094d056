"""How long one plan takes in scheduler_perf's PreemptionBasic shape (a script, not a test).

500 nodes (4 cpu, 32Gi), 2000 low-priority pods (900m, 500Mi) filling them, then 500
high-priority pods (3 cpu, 500Mi) planned one after another; each plan is applied to the
snapshot (victims forgotten, preemptor assumed) before the next, as the scheduler would.

    python3 -m tests.preemption.measure_planner [nodes] [low pods] [high pods]
"""

from __future__ import annotations

import statistics
import sys
import time

from batchsched.preemption import PreemptionPlan, PreemptionRequest, plan_preemption
from batchsched.snapshot import Snapshot
from tests.builders import make_node, make_pod
from tests.preemption.scenario import runner


def main(nodes: int = 500, low: int = 2000, high: int = 500) -> None:
    node_views = [make_node(f"node-{i}").cpu("4").memory("32Gi").view() for i in range(nodes)]
    running = [
        make_pod(f"low-{i}", "bench")
        .cpu("900m")
        .memory("500Mi")
        .priority(0)
        .node(f"node-{i % nodes}")
        .view()
        for i in range(low)
    ]
    snapshot = Snapshot(node_views, running)
    started = {p.uid: 1000.0 + i for i, p in enumerate(running)}
    run = runner()
    times: list[float] = []
    victims = 0
    for i in range(high):
        preemptor = make_pod(f"high-{i}", "bench").cpu("3").memory("500Mi").priority(100).view()
        request = PreemptionRequest((preemptor,), None, 0, 5000.0, started, 0.0, (), {}, {})
        begin = time.perf_counter()
        plan = plan_preemption(request, snapshot, run)
        times.append(time.perf_counter() - begin)
        if isinstance(plan, PreemptionPlan):
            victims += len(plan.victim_pods())
            for pod in plan.victim_pods():
                snapshot.forget(pod)
            snapshot.assume(preemptor, plan.placements[preemptor.uid])
    ms = sorted(t * 1000 for t in times)
    print(
        f"{nodes} nodes, {low} low pods, {high} preemptors: victims={victims} "
        f"mean={statistics.mean(ms):.2f}ms p50={ms[len(ms) // 2]:.2f}ms "
        f"p99={ms[int(len(ms) * 0.99)]:.2f}ms max={ms[-1]:.2f}ms"
    )


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:]))
