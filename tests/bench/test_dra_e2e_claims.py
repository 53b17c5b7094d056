"""The dra-e2e claims' bookkeeping must be able to fail: synthetic claim watch events
(resource.k8s.io/v1 ResourceClaims allocated on one node's pool of the GPU driver) replayed
through ClaimLedger give each placement's island, the free GPUs of each island just before
the write, another node with one free, and every device in two claims at once."""

from __future__ import annotations

from typing import Any, cast

import pytest
from kubernetes_asyncio.client import ApiClient

from batchsched.bench.dra_e2e import ISLANDS
from batchsched.bench.dra_e2e_claims import ClaimLedger, ClaimWatch, Placement
from batchsched.dra.nvidia import DRIVER, GPU_CLASS, RESOURCE_API

BENCH_NS = "bench"
NODES = ("dgx-0", "dgx-1", "dgx-2")

Event = tuple[str, dict[str, Any]]


def claim(
    name: str,
    node: str = "dgx-0",
    gpus: tuple[int, ...] = (),
    *,
    namespace: str = BENCH_NS,
    driver: str = DRIVER,
) -> dict[str, Any]:
    """A claim of `gpus` (indexes: gpu-N) on `node`'s pool; unallocated when `gpus` is empty."""
    exactly = {"deviceClassName": GPU_CLASS, "allocationMode": "ExactCount", "count": len(gpus)}
    body: dict[str, Any] = {
        "apiVersion": RESOURCE_API,
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{namespace}-{name}"},
        "spec": {"devices": {"requests": [{"name": "gpus", "exactly": exactly}]}},
        "status": {},
    }
    if gpus:
        results = [
            {"request": "gpus", "driver": driver, "pool": node, "device": f"gpu-{i}"} for i in gpus
        ]
        match = {"key": "metadata.name", "operator": "In", "values": [node]}
        body["status"] = {
            "allocation": {
                "devices": {"results": results},
                "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [match]}]},
            },
            "reservedFor": [{"resource": "pods", "name": name, "uid": f"pod-{name}"}],
        }
    return body


def other(name: str, node: str, gpus: tuple[int, ...]) -> dict[str, Any]:
    """A claim of another namespace: it holds devices but is not the bench's to judge."""
    return claim(name, node, gpus, namespace="elsewhere")


def ledger_after(events: list[Event]) -> ClaimLedger:
    """A ledger fed `events` in order, the i-th at time i."""
    ledger = ClaimLedger(ISLANDS, NODES, BENCH_NS)
    for at, (kind, obj) in enumerate(events):
        ledger.see(kind, obj, float(at))
    return ledger


def placed(ledger: ClaimLedger, name: str) -> Placement:
    (found,) = [p for p in ledger.placements if p.claim == f"{BENCH_NS}/{name}"]
    return found


def test_the_bench_nodes_have_islands_gpu_0_to_3_and_gpu_4_to_7() -> None:
    assert sorted(sorted(island) for island in ISLANDS) == [
        ["gpu-0", "gpu-1", "gpu-2", "gpu-3"],
        ["gpu-4", "gpu-5", "gpu-6", "gpu-7"],
    ]


@pytest.mark.parametrize(
    ("gpus", "one_island"),
    [
        pytest.param((4, 5, 6, 7), True, id="a 4-GPU claim on gpu-4..7 is one island"),
        pytest.param((0, 1, 2, 3), True, id="a 4-GPU claim on gpu-0..3 is one island"),
        pytest.param((3, 4), False, id="gpu-3 and gpu-4 are split across islands"),
        pytest.param((0, 1, 2, 7), False, id="three in one island and one in the other is split"),
        pytest.param((1, 2), True, id="gpu-1 and gpu-2 are one island"),
        pytest.param((0, 1, 2, 3, 4, 5, 6, 7), False, id="eight GPUs cannot be one island"),
    ],
)
def test_one_island(gpus: tuple[int, ...], one_island: bool) -> None:
    ledger = ledger_after([("ADDED", claim("c", "dgx-0", gpus))])
    p = placed(ledger, "c")
    assert p.devices == tuple(sorted(f"gpu-{i}" for i in gpus))
    assert p.size == len(gpus)
    assert p.one_island(ISLANDS) is one_island


A_FREED = ("MODIFIED", other("a", "dgx-0", ()))  # its allocation cleared
SPLIT_2 = ("ADDED", claim("c", "dgx-0", (3, 7)))


@pytest.mark.parametrize(
    ("events", "free_by_island", "island_free"),
    [
        pytest.param([SPLIT_2], (4, 4), True, id="an empty node has both islands free"),
        pytest.param(
            [
                ("ADDED", other("a", "dgx-0", (0, 1, 2))),
                ("ADDED", other("b", "dgx-0", (4, 5, 6))),
                SPLIT_2,
            ],
            (1, 1),
            False,
            id="one GPU free in each island is no island free for two",
        ),
        pytest.param(
            [
                ("ADDED", other("a", "dgx-0", (0, 1, 2))),
                ("ADDED", other("b", "dgx-0", (4, 5, 6))),
                A_FREED,
                SPLIT_2,
            ],
            (4, 1),
            True,
            id="a claim deallocated earlier frees its devices",
        ),
        pytest.param(
            [
                ("ADDED", other("a", "dgx-0", (0, 1, 2))),
                ("ADDED", other("b", "dgx-0", (4, 5, 6))),
                SPLIT_2,
                A_FREED,
            ],
            (1, 1),
            False,
            id="a claim deallocated later does not free them before the write",
        ),
        pytest.param(
            [
                ("ADDED", other("a", "dgx-0", (0, 1, 2))),
                ("ADDED", other("b", "dgx-0", (4, 5, 6))),
                ("DELETED", other("a", "dgx-0", (0, 1, 2))),
                SPLIT_2,
            ],
            (4, 1),
            True,
            id="a claim deleted while allocated frees its devices",
        ),
        pytest.param(
            [
                ("ADDED", other("a", "dgx-1", (0, 1, 2))),
                ("ADDED", other("b", "dgx-1", (4, 5, 6))),
                SPLIT_2,
            ],
            (4, 4),
            True,
            id="claims on another node do not take this node's GPUs",
        ),
        pytest.param(
            [
                ("ADDED", claim("c", "dgx-0", ())),
                ("ADDED", other("a", "dgx-0", (0, 1, 2))),
                ("MODIFIED", claim("c", "dgx-0", (3, 7))),
            ],
            (1, 4),
            True,
            id="the claim's own devices are not counted as taken before its write",
        ),
    ],
)
def test_island_free_is_judged_just_before_the_write(
    events: list[Event], free_by_island: tuple[int, ...], island_free: bool
) -> None:
    p = placed(ledger_after(events), "c")
    assert p.free_by_island == free_by_island
    assert p.island_free is island_free


@pytest.mark.parametrize(
    ("size", "free_by_island", "island_free"),
    [
        pytest.param(4, (3, 3), False, id="three free in each island hold no 4-GPU claim"),
        pytest.param(4, (4, 0), True, id="four free in one island hold a 4-GPU claim"),
        pytest.param(2, (0, 2), True, id="two free in the second island hold a 2-GPU claim"),
        pytest.param(3, (2, 2), False, id="two free in each hold no 3-GPU claim"),
    ],
)
def test_island_free_needs_one_island_with_as_many_free(
    size: int, free_by_island: tuple[int, ...], island_free: bool
) -> None:
    devices = tuple(f"gpu-{i}" for i in range(size))
    p = Placement("bench/c", "dgx-0", devices, free_by_island, 0.0)
    assert p.island_free is island_free
    assert p.island_free_anywhere is island_free


def test_an_unallocated_claim_is_no_placement_and_holds_nothing() -> None:
    ledger = ledger_after([("ADDED", claim("c", "dgx-0", ()))])
    assert ledger.placements == []
    assert ledger.held == {}


def test_another_namespaces_claims_hold_devices_but_are_not_placements() -> None:
    ledger = ledger_after([("ADDED", other("a", "dgx-0", (0, 1)))])
    assert ledger.placements == []
    assert ledger.held == {"uid-elsewhere-a": ("dgx-0", frozenset({"gpu-0", "gpu-1"}))}


def test_a_claim_seen_again_while_allocated_is_placed_once() -> None:
    """reservedFor changes (a MODIFIED event) leave the allocation and its placement alone."""
    changed = claim("c", "dgx-0", (0, 1))
    changed["status"]["reservedFor"] = []
    ledger = ledger_after([("ADDED", claim("c", "dgx-0", (0, 1))), ("MODIFIED", changed)])
    assert [p.claim for p in ledger.placements] == ["bench/c"]
    assert ledger.placements[0].at == 0.0
    assert ledger.double_allocations == []


@pytest.mark.parametrize(
    ("events", "doubles"),
    [
        pytest.param(
            [("ADDED", other("a", "dgx-0", (0, 1))), ("ADDED", claim("c", "dgx-0", (1, 2)))],
            ["dgx-0/gpu-1: elsewhere/a, bench/c"],
            id="a device in two allocated claims at once is detected, naming both",
        ),
        pytest.param(
            [("ADDED", claim("c", "dgx-0", (0, 1))), ("ADDED", other("a", "dgx-0", (0, 1, 5)))],
            ["dgx-0/gpu-0: bench/c, elsewhere/a", "dgx-0/gpu-1: bench/c, elsewhere/a"],
            id="another namespace's claim on the bench's devices is detected, device by device",
        ),
        pytest.param(
            [
                ("ADDED", other("a", "dgx-0", (0, 1))),
                ("DELETED", other("a", "dgx-0", (0, 1))),
                ("ADDED", claim("c", "dgx-0", (1, 2))),
            ],
            [],
            id="a device freed before the next claim's write is no double allocation",
        ),
        pytest.param(
            [("ADDED", other("a", "dgx-0", (0, 1))), ("ADDED", claim("c", "dgx-1", (0, 1)))],
            [],
            id="the same device name on another node is no double allocation",
        ),
    ],
)
def test_double_allocations(events: list[Event], doubles: list[str]) -> None:
    assert ledger_after(events).double_allocations == doubles


def test_a_double_allocation_names_both_claims() -> None:
    events = [("ADDED", other("a", "dgx-0", (0, 1))), ("ADDED", claim("c", "dgx-0", (1, 2)))]
    (entry,) = ledger_after(events).double_allocations
    assert "elsewhere/a" in entry
    assert "bench/c" in entry


FULL_0 = ("ADDED", other("f0", "dgx-0", (0, 1, 2, 4, 5, 6)))  # one GPU free per island
FULL_1 = ("ADDED", other("f1", "dgx-1", (0, 1, 2, 4, 5, 6)))
FULL_2 = ("ADDED", other("f2", "dgx-2", (0, 1, 2, 4, 5, 6)))


@pytest.mark.parametrize(
    ("events", "free_elsewhere", "freed_elsewhere_at"),
    [
        pytest.param([FULL_0, FULL_1, FULL_2, SPLIT_2], "", None, id="no node had an island free"),
        pytest.param(
            [FULL_0, FULL_2, SPLIT_2],
            "dgx-1",
            None,
            id="an empty other node had one free, none of its claims freed yet",
        ),
        pytest.param(
            [
                FULL_0,
                FULL_1,
                FULL_2,
                ("DELETED", other("f1", "dgx-1", (0, 1, 2, 4, 5, 6))),
                SPLIT_2,
            ],
            "dgx-1",
            3.0,
            id="another node freed before the write had one free since then",
        ),
        pytest.param(
            [
                FULL_0,
                FULL_1,
                FULL_2,
                SPLIT_2,
                ("DELETED", other("f1", "dgx-1", (0, 1, 2, 4, 5, 6))),
            ],
            "",
            None,
            id="another node freed after the write had none free at the write",
        ),
        pytest.param(
            [
                FULL_0,
                FULL_1,
                FULL_2,
                ("DELETED", other("f2", "dgx-2", (0, 1, 2, 4, 5, 6))),
                ("DELETED", other("f1", "dgx-1", (0, 1, 2, 4, 5, 6))),
                SPLIT_2,
            ],
            "dgx-2",
            3.0,
            id="of two nodes with one free the one freed longest ago is named",
        ),
        pytest.param(
            [
                FULL_0,
                ("ADDED", other("x", "dgx-1", (0,))),
                ("DELETED", other("x", "dgx-1", (0,))),
                SPLIT_2,
            ],
            "dgx-2",
            None,
            id="a node never freed is named before one freed since the start",
        ),
    ],
)
def test_another_node_with_an_island_free(
    events: list[Event], free_elsewhere: str, freed_elsewhere_at: float | None
) -> None:
    p = placed(ledger_after(events), "c")
    assert not p.island_free
    assert p.free_elsewhere == free_elsewhere
    assert p.freed_elsewhere_at == freed_elsewhere_at
    assert p.island_free_anywhere is bool(free_elsewhere)


def test_an_island_free_on_the_claims_own_node_is_not_named_as_elsewhere() -> None:
    p = placed(ledger_after([FULL_1, FULL_2, SPLIT_2]), "c")
    assert p.island_free
    assert p.free_elsewhere == ""
    assert p.island_free_anywhere


THREE_FREE_EACH_0 = ("ADDED", other("t0", "dgx-0", (0, 4)))
THREE_FREE_EACH_1 = ("ADDED", other("t1", "dgx-1", (0, 4)))


@pytest.mark.parametrize(
    ("events", "free_elsewhere"),
    [
        pytest.param(
            [FULL_0, THREE_FREE_EACH_1, FULL_2, SPLIT_2],
            "dgx-1",
            id="three free in an island of another node hold a 2-GPU claim",
        ),
        pytest.param(
            [
                THREE_FREE_EACH_0,
                THREE_FREE_EACH_1,
                FULL_2,
                ("ADDED", claim("c", "dgx-0", (1, 2, 5, 6))),
            ],
            "",
            id="three free in an island of another node hold no 4-GPU claim",
        ),
    ],
)
def test_another_node_needs_an_island_as_large_as_the_claim(
    events: list[Event], free_elsewhere: str
) -> None:
    assert placed(ledger_after(events), "c").free_elsewhere == free_elsewhere


def watch_of(ledger: ClaimLedger) -> ClaimWatch:
    return ClaimWatch(cast(ApiClient, None), ledger)  # its API is only read by run()


def test_the_watch_feeds_the_listing_then_each_event_to_the_ledger() -> None:
    ledger = ClaimLedger(ISLANDS, NODES, BENCH_NS)
    watch = watch_of(ledger)
    watch._listed({"items": [other("a", "dgx-0", (0, 1, 2)), "not a claim"]})
    watch._seen("ADDED", claim("c", "dgx-0", (3, 4)))
    assert placed(ledger, "c").free_by_island == (1, 4)
    assert watch.foreign_devices == 0


def test_the_watch_leaves_claims_of_another_driver_unjudged() -> None:
    ledger = ClaimLedger(ISLANDS, NODES, BENCH_NS)
    watch = watch_of(ledger)
    watch._seen("ADDED", claim("c", "dgx-0", (0, 1), driver="dra.example.com"))
    assert ledger.placements == []
    assert ledger.held == {}
    assert watch.foreign_devices == 1
