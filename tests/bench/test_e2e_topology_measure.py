"""topology-e2e's judgement of a run (bench/e2e_topology_measure.py) from what the bench's
watch saw, and the watch itself (bench/e2e_topology_phase.PlacementWatch)."""

from __future__ import annotations

import math
import time
from typing import cast

from kubernetes_asyncio.client import ApiClient

from batchsched.bench.e2e_topology_measure import Observed, gang_starts, judge
from batchsched.bench.e2e_topology_phase import PlacementWatch
from batchsched.bench.e2e_topology_workload import GPU, Cluster, Gang
from batchsched.gang.topology import CLIQUE_LABEL, DEFAULT_LEVELS, RACK_LABEL, TopologyRequest
from batchsched.model.resources import Resources

NO_API = cast(ApiClient, None)  # the watch's API is only read by run()
CLUSTER = Cluster(racks=2)  # r000, r001: 8 nodes each, cliques of 2
NODES = CLUSTER.nodes()
EIGHT = Resources.parse({"cpu": "64", "memory": "512Gi", GPU: "8"}, "r")


def gang(name: str, members: int, request: TopologyRequest | None = None) -> Gang:
    return Gang(name, members, EIGHT, request, at=0.0)


# a: one clique (2 whole nodes) -> tightest. b: required rack, split over two racks -> broken.
# c: preferred clique, two nodes of one rack but two cliques, while a clique was free -> loose.
# d: one member of two bound -> split, replayed but not judged. e: nothing bound.
WORKLOAD = (
    gang("a", 2),
    gang("b", 2, TopologyRequest(RACK_LABEL, required=True)),
    gang("c", 2, TopologyRequest(CLIQUE_LABEL, required=False)),
    gang("d", 2),
    gang("e", 2),
)
PLACED = {
    "a-0": ("r000-n00", 1.0, 3.0),
    "a-1": ("r000-n01", 2.0, 4.0),
    "b-0": ("r000-n02", 1.5, 5.0),
    "b-1": ("r001-n00", 1.5, 4.5),
    "c-0": ("r001-n02", 6.0, 6.5),
    "c-1": ("r001-n04", 6.0, 7.0),
    "d-0": ("r001-n06", 2.0, 2.5),
}
SEEN = Observed(
    appeared={**{pod: at for pod, (_, at, _) in PLACED.items()}, "d-1": 2.0, "e-0": 2.0},
    bound={pod: at for pod, (_, _, at) in PLACED.items()},
    nodes={pod: node for pod, (node, _, _) in PLACED.items()},
)


def test_a_gang_starts_at_its_last_bind_and_starts_are_in_that_order() -> None:
    starts, partial = gang_starts(WORKLOAD, SEEN)
    assert [(s.key, s.at, s.arrival) for s in starts] == [
        ("d", 2.5, 2.0),
        ("a", 4.0, 2.0),
        ("b", 5.0, 1.5),
        ("c", 7.0, 6.0),
    ]
    assert partial == {"d"}
    assert starts[1].placed == (("r000-n00", EIGHT), ("r000-n01", EIGHT))


def test_the_outcome_counts_whole_split_and_unstarted_gangs() -> None:
    outcome = judge(NODES, WORKLOAD, SEEN, DEFAULT_LEVELS)
    assert (outcome.complete, outcome.partial, outcome.unstarted) == (3, 1, 1)
    assert dict(outcome.left_by_gpus) == {16: 2}  # d and e


def test_tightness_is_judged_for_whole_gangs_only() -> None:
    summary = judge(NODES, WORKLOAD, SEEN, DEFAULT_LEVELS).summary
    assert summary.started == 3 and summary.unstarted == 2
    assert summary.in_tightest == 1  # a
    assert (summary.required, summary.honoured) == (1, 0)  # b split over two racks
    assert summary.preferred == 2 and summary.preferred_in_tightest == 1  # a yes, c no
    # a within a clique, c within a rack, b only within the block
    assert summary.placed_by_level == (1, 1, 1, 0, 0)


def test_latency_is_last_member_bound_minus_last_member_appeared() -> None:
    outcome = judge(NODES, WORKLOAD, SEEN, DEFAULT_LEVELS)
    assert sorted(outcome.latencies) == [1.0, 2.0, 3.5]
    assert outcome.p50_ms == 2000.0 and outcome.p99_ms == 3500.0


def test_gpu_allocation_counts_every_bound_pod_split_gangs_too() -> None:
    outcome = judge(NODES, WORKLOAD, SEEN, DEFAULT_LEVELS)
    assert (outcome.bound_gpus, outcome.total_gpus) == (56, 128)
    assert outcome.gpu_allocation == 56 / 128


def test_nothing_bound_is_judged_empty() -> None:
    outcome = judge(NODES, WORKLOAD, Observed({}, {}, {}), DEFAULT_LEVELS)
    assert (outcome.complete, outcome.unstarted, outcome.bound_gpus) == (0, 5, 0)
    assert math.isnan(outcome.p99_ms)


def pod(name: str, node: str = "") -> dict[str, object]:
    return {"metadata": {"name": name, "resourceVersion": "1"}, "spec": {"nodeName": node}}


def test_the_watch_keeps_each_bound_pods_node() -> None:
    watch = PlacementWatch(NO_API, "bench", 2)
    watch._apply({"type": "ADDED", "object": pod("a-0")})
    watch._apply({"type": "MODIFIED", "object": pod("a-0", "r000-n00")})
    watch._apply({"type": "MODIFIED", "object": pod("a-0", "r000-n00")})
    seen = watch.observed()
    assert set(seen.appeared) == {"a-0"} and seen.nodes == {"a-0": "r000-n00"}
    assert seen.bound["a-0"] == watch.last_bind


async def test_binding_is_settled_when_all_are_bound() -> None:
    watch = PlacementWatch(NO_API, "bench", 1)
    watch._apply({"type": "ADDED", "object": pod("a-0", "r000-n00")})
    assert await watch.wait_settled(time.perf_counter(), time.perf_counter() + 60, idle=60)


async def test_binding_is_settled_when_no_bind_came_for_the_idle_time() -> None:
    watch = PlacementWatch(NO_API, "bench", 2)
    watch._apply({"type": "ADDED", "object": pod("a-0", "r000-n00")})
    earlier = time.perf_counter() - 10
    watch.last_bind = earlier
    assert not await watch.wait_settled(earlier, time.perf_counter() + 60, idle=5)
