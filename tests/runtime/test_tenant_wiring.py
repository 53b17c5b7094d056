"""EstimatePublisher with a fake patch function and a fake clock: the estimated start is written
once as RFC 3339, rewritten only when it moves by more than a minute, removed when the
reservation goes, retried when the write fails. And the tenant queues' wiring."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from batchsched.clock import FakeClock
from batchsched.runtime.tenant_wiring import (
    ESTIMATED_START_ANNOTATION,
    EstimatePublisher,
    estimates_of,
)
from queues.model import QuotaPolicy, Tenant
from tests.builders import make_node, make_pod
from tests.runtime.test_backfill_waits import gpus, live, quota

START = 1000.0  # FakeClock: monotonic 1000.0 is wall 1_700_001_000 (2023-11-14T22:30:00Z)
GROUP = "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/team/podgroups/big"
POD = "/api/v1/namespaces/team/pods/solo"


class Patches:
    def __init__(self) -> None:
        self.sent: list[tuple[str, object]] = []
        self.failing = False

    async def __call__(self, path: str, body: Mapping[str, object]) -> object:
        if self.failing:
            raise RuntimeError("the API server is away")
        metadata = body["metadata"]
        assert isinstance(metadata, dict)
        self.sent.append((path, metadata["annotations"][ESTIMATED_START_ANNOTATION]))
        return {}


class Harness:
    def __init__(self) -> None:
        self.clock = FakeClock(START)
        self.planned: dict[str, float] = {}
        self.patches = Patches()
        self.publisher = EstimatePublisher(lambda: dict(self.planned), self.clock, self.patches)

    async def publish(self) -> list[tuple[str, object]]:
        """What this round wrote."""
        before = len(self.patches.sent)
        await self.publisher.publish()
        return self.patches.sent[before:]


async def test_a_new_estimate_is_written_once_in_rfc3339_utc() -> None:
    h = Harness()
    h.planned["team/big"] = START + 600
    assert await h.publisher.publish() == 1
    assert h.patches.sent == [(GROUP, "2023-11-14T22:40:00Z")]
    assert await h.publish() == []


async def test_a_single_pods_estimate_goes_to_the_pod() -> None:
    h = Harness()
    h.planned["pod:team/solo"] = START + 3600
    assert await h.publish() == [(POD, "2023-11-14T23:30:00Z")]


async def test_time_passing_with_the_same_planned_start_writes_nothing() -> None:
    h = Harness()
    h.planned["team/big"] = START + 600
    await h.publish()
    h.clock.advance(300)
    assert await h.publish() == []


@pytest.mark.parametrize(
    ("moved", "rewritten"),
    [(30.0, False), (60.0, False), (61.0, True), (-90.0, True)],
    ids=[
        "a 30 s move is not worth a write",
        "a move of exactly a minute is not worth a write",
        "a move of more than a minute is rewritten",
        "an earlier start is rewritten too",
    ],
)
async def test_an_estimate_is_rewritten_only_when_it_moves_more_than_a_minute(
    moved: float, rewritten: bool
) -> None:
    h = Harness()
    h.planned["team/big"] = START + 600
    await h.publish()
    h.planned["team/big"] += moved
    assert bool(await h.publish()) == rewritten


async def test_small_moves_are_measured_from_what_was_written_not_from_the_last_plan() -> None:
    h = Harness()
    h.planned["team/big"] = START + 600
    await h.publish()
    rounds = []
    for _ in range(3):  # 25 s, 50 s, 75 s later than written
        h.planned["team/big"] += 25
        rounds.append(await h.publish())
    assert rounds == [[], [], [(GROUP, "2023-11-14T22:41:15Z")]]


async def test_the_annotation_is_removed_when_the_reservation_goes_and_not_again() -> None:
    h = Harness()
    h.planned["team/big"] = START + 600
    await h.publish()
    del h.planned["team/big"]
    assert await h.publisher.publish() == 0
    assert h.patches.sent[-1] == (GROUP, None)
    assert await h.publish() == []


async def test_a_failed_write_is_tried_again_at_the_next_round() -> None:
    h = Harness()
    h.planned["team/big"] = START + 600
    h.patches.failing = True
    await h.publish()
    h.patches.failing = False
    assert await h.publish() == [(GROUP, "2023-11-14T22:40:00Z")]
    del h.planned["team/big"]
    h.patches.failing = True
    await h.publish()
    h.patches.failing = False
    assert await h.publish() == [(GROUP, None)]


# tenant_queues


async def test_estimates_of_a_scheduler_are_its_reserved_gangs_planned_starts() -> None:
    s = live(quota())
    s.nodes.on_add(make_node("gpu-0").gpus(8).cpu("64").view())
    s.run(gpus("long", 8, "1h").node("gpu-0"))
    assert estimates_of(s.scheduler)() == {}
    s.schedule(gpus("next", 4, "10m"))
    assert estimates_of(s.scheduler)() == {"pod:default/next": START + 3600}
    await s.scheduler.drain()
    s.scheduler.live.backfill = None
    assert estimates_of(s.scheduler)() == {}


def test_the_tenant_layer_is_fed_from_the_cache() -> None:
    s = live(quota())
    layer = s.scheduler.tenants
    assert layer is not None and layer in s.scheduler.cache.watchers
    s.nodes.on_add(make_node("gpu-0").gpus(8).cpu("64").view())
    s.run(gpus("a", 3).node("gpu-0"))
    assert layer.ledger.current("team-a").get("nvidia.com/gpu") == 3000
    assert layer.capacity().get("nvidia.com/gpu") == 8000


def test_with_several_tenants_the_queue_orders_by_fair_share() -> None:
    two = QuotaPolicy(
        {
            "a": Tenant("a", namespaces=frozenset({"ns-a"})),
            "b": Tenant("b", namespaces=frozenset({"ns-b"})),
        }
    )
    s = live(two)
    s.nodes.on_add(make_node("gpu-0").gpus(8).cpu("64").view())
    s.run(make_pod("busy", "ns-a").gpus(4).node("gpu-0"))
    for name, namespace in [("a1", "ns-a"), ("a2", "ns-a"), ("b1", "ns-b")]:
        s.pods.on_add(make_pod(name, namespace).gpus(1).view())
    queued = s.scheduler.queue.pop_ready()
    assert queued is not None and queued.pod.name == "b1"  # "a" already uses half the GPUs


def test_a_quota_change_recounts_usage_and_applies_the_new_backfill_limits() -> None:
    s = live(quota(reservations=4))
    s.nodes.on_add(make_node("gpu-0").gpus(8).cpu("64").view())
    s.run(gpus("a", 2).node("gpu-0"))
    moved = QuotaPolicy(
        {"team-b": Tenant("team-b", namespaces=frozenset({"default"}))}, reservations=1
    )
    s.on_quota_change(moved)
    layer, backfill = s.scheduler.tenants, s.scheduler.backfill
    assert layer is not None and backfill is not None
    assert layer.ledger.current("team-b").get("nvidia.com/gpu") == 2000
    assert backfill.limit == 1
