"""Domain tightness (sim/tightness.py) on small hand-built clusters: the level a gang was placed
at against the tightest level with room for it just before, replayed from starts and ends."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import pytest

from batchsched.gang.topology import CLIQUE_LABEL, DEFAULT_LEVELS, RACK_LABEL, TopologyRequest
from batchsched.model.resources import NVIDIA_GPU, Resources
from batchsched.sim.tightness import (
    Ended,
    GangTightness,
    Started,
    level_name,
    measure,
    percentile,
    summarise,
)
from batchsched.sim.topology_cluster import topology_cluster

CLIQUE, RACK, BLOCK, ZONE, CLUSTER = range(5)
GI = 1024**3


def req(gpus: int, cpu: int | None = None) -> Resources:
    """What batch_workloads' members ask: 8 cpus and 64 Gi per GPU unless told."""
    cores = 8 * gpus if cpu is None else cpu
    return Resources(milli_cpu=cores * 1000, memory=64 * gpus * GI, scalar={NVIDIA_GPU: gpus})


def start(
    key: str, *placed: tuple[str, Resources], request: TopologyRequest | None = None
) -> Started:
    return Started(key, at=10.0, arrival=4.0, request=request, placed=placed)


def on(nodes: str, requests: Resources) -> tuple[tuple[str, Resources], ...]:
    """One member on each node named, e.g. on("r000-n00 r000-n01", req(8))."""
    return tuple((node, requests) for node in nodes.split())


def last(events: list[Started | Ended], racks_per_block: int = 2) -> GangTightness:
    """The last gang measured on 2 racks x 4 nodes x 8 GPUs, cliques of 2 nodes (r000-c0 is
    r000-n00 and n01), one zone."""
    nodes = topology_cluster(2, 4, clique_nodes=2, racks_per_block=racks_per_block)
    return measure(nodes, events)[-1]


@dataclass(frozen=True, slots=True)
class Case:
    id: str
    events: list[Started | Ended]
    placed: int
    feasible: int
    racks_per_block: int = 2


CASES = [
    Case(
        "two whole nodes of one clique on an empty cluster: clique, and clique was feasible",
        [start("g", *on("r000-n00 r000-n01", req(8)))],
        CLIQUE,
        CLIQUE,
    ),
    Case(
        "split over two cliques of a rack while a clique was free: rack, clique was feasible",
        [start("g", *on("r000-n01 r000-n02", req(8)))],
        RACK,
        CLIQUE,
    ),
    Case(
        "every clique half taken: the rack is the tightest feasible domain",
        [
            start("a", *on("r000-n00 r000-n02 r001-n00 r001-n02", req(8))),
            start("g", *on("r000-n01 r000-n03", req(8))),
        ],
        RACK,
        RACK,
    ),
    Case(
        "across racks of one block while a rack had room: block, clique was feasible",
        [start("g", *on("r000-n00 r001-n00", req(8)))],
        BLOCK,
        CLIQUE,
    ),
    Case(
        "across racks when racks are blocks of their own: zone",
        [start("g", *on("r000-n00 r001-n00", req(8)))],
        ZONE,
        CLIQUE,
        racks_per_block=1,
    ),
    Case(
        "a gang bigger than any rack could only ever fit the block",
        [start("g", *on("r000-n00 r000-n01 r000-n02 r000-n03 r001-n00", req(8)))],
        BLOCK,
        BLOCK,
    ),
    Case(
        "free GPUs without free cpu hold no member: only r000-n00 and r001-n00 have cpu left",
        [
            start("cpu", *on("r000-n01 r000-n02 r000-n03 r001-n01 r001-n02 r001-n03", req(0, 70))),
            start("g", *on("r000-n00 r001-n00", req(8))),
        ],
        BLOCK,
        BLOCK,
    ),
    Case(
        "a gang that ended frees its nodes: the clique it held is feasible again",
        [
            start("a", *on("r000-n00 r000-n01 r000-n02 r000-n03", req(8))),
            start("b", *on("r001-n00 r001-n01 r001-n02 r001-n03", req(8))),
            Ended("a"),
            start("g", *on("r000-n00 r000-n01", req(8))),
        ],
        CLIQUE,
        CLIQUE,
    ),
    Case(
        "members of different sizes: the largest stands in for each, so the clique that held "
        "4+2+2 GPUs on nodes with 4 free counts as too small (placed tighter than feasible)",
        [
            start("a", *on("r000-n00 r000-n01 r000-n02 r000-n03", req(4))),
            start("b", *on("r001-n00 r001-n01 r001-n02 r001-n03", req(4))),
            start("g", ("r000-n00", req(4)), ("r000-n01", req(2)), ("r000-n01", req(2))),
        ],
        CLIQUE,
        RACK,
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_placed_and_tightest_feasible_levels(case: Case) -> None:
    gang = last(case.events, case.racks_per_block)
    assert (gang.placed_level, gang.feasible_level) == (case.placed, case.feasible)
    assert gang.in_tightest == (case.placed <= case.feasible)


@pytest.mark.parametrize(
    ("request_", "nodes", "honoured"),
    [
        (TopologyRequest(RACK_LABEL, True), "r000-n00 r000-n03", True),
        (TopologyRequest(RACK_LABEL, True), "r000-n00 r001-n00", False),
        (TopologyRequest(CLIQUE_LABEL, True), "r000-n02 r000-n03", True),
        (TopologyRequest("", True, tier=1), "r000-n01 r000-n02", False),
        (TopologyRequest(CLIQUE_LABEL, False), "r000-n00 r001-n00", None),
        (None, "r000-n00 r001-n00", None),
    ],
    ids=[
        "a required rack on two nodes of one rack is honoured",
        "a required rack on two racks is not",
        "a required clique on both nodes of one clique is honoured",
        "a required tier 1 (the clique) split over two cliques is not",
        "a preferred request is never judged honoured or not",
        "no request: nothing to honour",
    ],
)
def test_required_requests_are_judged_on_their_own_level(
    request_: TopologyRequest | None, nodes: str, honoured: bool | None
) -> None:
    gang = last([start("g", *on(nodes, req(8)), request=request_)])
    assert gang.honoured is honoured


def test_a_node_without_a_level_label_shares_no_domain_of_it() -> None:
    nodes = topology_cluster(1, 2)
    bare = [nodes[0], dataclasses.replace(nodes[1], labels={})]
    (gang,) = measure(bare, [start("g", *on("r000-n00 r000-n01", req(8)))])
    assert (gang.placed_level, gang.feasible_level) == (CLUSTER, CLUSTER)


def test_the_summary_counts_shares_levels_and_waits() -> None:
    def gang(placed: int, feasible: int, honoured: bool | None, wait: float) -> GangTightness:
        return GangTightness("g", None, 2, placed, feasible, honoured, wait)

    gangs = [
        gang(CLIQUE, CLIQUE, None, 0.0),
        gang(RACK, CLIQUE, None, 10.0),
        gang(RACK, RACK, True, 20.0),
        gang(ZONE, CLIQUE, False, 100.0),
    ]
    summary = summarise(gangs, DEFAULT_LEVELS, unstarted=1, gpu_allocation=0.5)
    assert (summary.started, summary.unstarted, summary.in_tightest) == (4, 1, 2)
    assert (summary.required, summary.honoured, summary.honoured_share) == (2, 1, 0.5)
    assert (summary.preferred, summary.preferred_in_tightest) == (2, 1)
    assert summary.tightest_share == 0.5
    assert summary.placed_by_level == (1, 2, 0, 1, 0)
    assert summary.feasible_by_level == (3, 1, 0, 0, 0)
    assert (summary.wait_p50, summary.wait_p99) == (10.0, 100.0)


@pytest.mark.parametrize(
    ("values", "q", "expected"),
    [([], 50, 0.0), ([3.0], 99, 3.0), ([4.0, 1.0, 3.0, 2.0], 50, 2.0), ([1.0, 2.0], 99, 2.0)],
    ids=["no values", "one value", "the median rank of four", "p99 of two is the larger"],
)
def test_percentile_by_nearest_rank(values: list[float], q: float, expected: float) -> None:
    assert percentile(values, q) == expected


def test_level_names_are_the_label_key_s_last_segment_and_then_cluster() -> None:
    names = [level_name(DEFAULT_LEVELS, i) for i in range(len(DEFAULT_LEVELS) + 1)]
    assert names == ["gpu.clique", "rack", "block", "zone", "cluster"]
