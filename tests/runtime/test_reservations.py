"""LiveBackfill on a Snapshot and a fake clock: blocked gangs get reservations at the expected end
of running pods; a placement that would delay one is refused, one that ends in time or runs
elsewhere is not; only the first K and starving gangs are reserved; the plan is rebuilt after
`refresh_s`."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from batchsched.backfill import Running, vector
from batchsched.clock import FakeClock
from batchsched.model.pod import PodView
from batchsched.runtime.reservations import LiveBackfill
from batchsched.snapshot import Snapshot
from tests.builders import make_node, make_pod, snapshot_of

START = 1000.0  # FakeClock's start
HOUR = 3600.0


class Cluster:
    """gpu-0 busy with "long" for an hour, half of gpu-1 with "short" for ten minutes; gpu-2 is
    idle but the reserved gangs may not use it (selectors, say)."""

    def __init__(self, gpu1: int = 8, short_gpus: int = 4) -> None:
        self.clock = FakeClock(START)
        self.ends: dict[str, float | None] = {"long": START + HOUR, "short": START + 600}
        self.snapshot: Snapshot = snapshot_of(
            [make_node("gpu-0").gpus(8), make_node("gpu-1").gpus(gpu1), make_node("gpu-2").gpus(8)],
            [
                make_pod("long").gpus(8).node("gpu-0"),
                make_pod("short").gpus(short_gpus).node("gpu-1"),
            ],
        )

    def ends_at(self, pod: PodView) -> float | None:
        return self.ends.get(pod.name)

    def eligible(self, pod: PodView) -> tuple[str, ...]:
        return ("gpu-0", "gpu-1", "gpu-2") if pod.labels.get("anywhere") else ("gpu-0", "gpu-1")

    def backfill(self, reservations: int = 4, starvation_s: float = HOUR) -> LiveBackfill:
        return LiveBackfill(self.clock, reservations, starvation_s, refresh_s=5.0)

    def estimates(self, backfill: LiveBackfill) -> Mapping[str, float]:
        return backfill.estimates(self.snapshot, self.ends_at, self.eligible)

    def protected(self, backfill: LiveBackfill) -> frozenset[str]:
        return backfill.protected(self.snapshot, self.ends_at, self.eligible)

    def conflict(
        self,
        backfill: LiveBackfill,
        key: str,
        node: str,
        gpus: int,
        ends: float | None,
        prio: int = 0,
    ) -> str | None:
        starting = [Running(node, vector(make_pod().gpus(gpus).view().requests), ends)]
        found = backfill.conflict(key, prio, starting, self.snapshot, self.ends_at, self.eligible)
        return None if found is None else found.key


def gang(name: str, members: int, gpus: int, priority: int = 0) -> list[PodView]:
    return [make_pod(f"{name}-{i}").gpus(gpus).priority(priority).view() for i in range(members)]


def test_a_blocked_gang_is_reserved_where_and_when_running_pods_end() -> None:
    cluster = Cluster()
    backfill = cluster.backfill()
    backfill.block("big", gang("big", 2, 8), 1800.0)
    assert cluster.estimates(backfill) == {"big": START + HOUR}
    assert backfill.blocked_keys() == ["big"]


def test_a_gang_that_fits_once_the_short_pod_ends_is_reserved_then() -> None:
    cluster = Cluster()
    backfill = cluster.backfill()
    backfill.block("half", gang("half", 1, 8), 600.0)
    assert cluster.estimates(backfill) == {"half": START + 600}


@pytest.mark.parametrize(
    ("node", "gpus", "ends", "delays"),
    [
        ("gpu-1", 4, START + 2 * HOUR, True),
        ("gpu-1", 4, None, True),
        ("gpu-1", 4, START + 300, False),
        ("gpu-1", 4, START + HOUR, False),
        ("gpu-2", 8, None, False),
    ],
    ids=[
        "a pod on the reserved node running past the start delays it",
        "a pod of unknown runtime on the reserved node delays it",
        "a pod that ends before the reservation begins backfills",
        "a pod that ends right when the reservation begins backfills",
        "a pod of unknown runtime on a node the gang does not use backfills",
    ],
)
def test_conflict_refuses_only_what_would_delay_the_reservation(
    node: str, gpus: int, ends: float | None, delays: bool
) -> None:
    cluster = Cluster()
    backfill = cluster.backfill()
    backfill.block("big", gang("big", 2, 8), 1800.0)
    found = cluster.conflict(backfill, "pod:default/new", node, gpus, ends)
    assert found == ("big" if delays else None)


@pytest.mark.parametrize(
    ("priority", "held"),
    [(5, True), (6, False), (0, True)],
    ids=[
        "a gang of the reservation's priority is held back",
        "a gang of higher priority is not held back",
        "a gang of lower priority is held back",
    ],
)
def test_only_gangs_not_above_the_reservations_priority_are_held_back(
    priority: int, held: bool
) -> None:
    cluster = Cluster()
    backfill = cluster.backfill()
    backfill.block("big", gang("big", 2, 8, priority=5), 1800.0)
    found = cluster.conflict(backfill, "other", "gpu-1", 4, None, prio=priority)
    assert (found == "big") == held


def test_a_gang_is_not_held_back_by_its_own_reservation() -> None:
    cluster = Cluster()
    backfill = cluster.backfill()
    backfill.block("big", gang("big", 2, 8), 1800.0)
    assert cluster.conflict(backfill, "big", "gpu-1", 8, None) is None
    assert cluster.conflict(backfill, "other", "gpu-1", 8, None) == "big"


def test_an_unblocked_gang_loses_its_reservation_and_holds_nobody_back() -> None:
    cluster = Cluster()
    backfill = cluster.backfill()
    backfill.block("big", gang("big", 2, 8), 1800.0)
    assert cluster.conflict(backfill, "x", "gpu-1", 4, None) == "big"
    backfill.unblock("big")
    assert cluster.estimates(backfill) == {}
    assert cluster.conflict(backfill, "x", "gpu-1", 4, None) is None
    assert backfill.blocked_keys() == []


def test_a_pod_started_between_rebuilds_counts_against_later_placements() -> None:
    # gpu-1 has 16 GPUs, 12 busy for ten minutes; "big" then takes 8: 8 stay free beside it.
    cluster = Cluster(gpu1=16, short_gpus=12)
    backfill = cluster.backfill()
    backfill.block("big", gang("big", 1, 8), None)
    first = [Running("gpu-1", vector(make_pod().gpus(4).view().requests), None)]
    assert cluster.conflict(backfill, "first", "gpu-1", 4, None) is None
    backfill.started("first", first)
    assert cluster.conflict(backfill, "second", "gpu-1", 4, None) is None
    assert cluster.conflict(backfill, "third", "gpu-1", 6, None) == "big"


def test_unblocking_one_gang_replans_the_others_at_once() -> None:
    cluster = Cluster()
    backfill = cluster.backfill()
    backfill.block("big", gang("big", 2, 8, priority=9), 1800.0)
    backfill.block("next", gang("next", 1, 8), 60.0)
    assert cluster.estimates(backfill) == {"big": START + HOUR, "next": START + 600}
    backfill.unblock("next")
    assert cluster.estimates(backfill) == {"big": START + HOUR}


def test_only_the_first_k_gangs_by_priority_then_wait_are_reserved() -> None:
    cluster = Cluster()
    backfill = cluster.backfill(reservations=2)
    backfill.block("low", gang("low", 1, 1, priority=1), 60.0)
    cluster.clock.advance(10)
    backfill.block("high", gang("high", 1, 1, priority=9), 60.0)
    backfill.block("mid-old", gang("mid-old", 1, 1, priority=5), 60.0)
    cluster.clock.advance(10)
    backfill.block("mid-new", gang("mid-new", 1, 1, priority=5), 60.0)
    assert cluster.protected(backfill) == {"high", "mid-old"}
    # The others in line get an estimated start all the same; nothing is held back for them.
    assert set(cluster.estimates(backfill)) == {"high", "mid-old", "mid-new", "low"}


def test_a_gang_waiting_past_the_starvation_limit_is_reserved_beyond_k() -> None:
    cluster = Cluster()
    backfill = cluster.backfill(reservations=1, starvation_s=HOUR)
    backfill.block("starving", gang("starving", 1, 1, priority=0), 60.0)
    cluster.clock.advance(100)
    backfill.block("head", gang("head", 1, 1, priority=9), 60.0)
    backfill.block("later", gang("later", 1, 1, priority=0), 60.0)
    assert cluster.protected(backfill) == {"head"}
    cluster.clock.advance(HOUR - 100)  # "starving" waited an hour, "later" not quite
    assert cluster.protected(backfill) == {"head", "starving"}


def test_blocking_again_keeps_the_time_the_gang_started_waiting() -> None:
    cluster = Cluster()
    backfill = cluster.backfill(reservations=1, starvation_s=HOUR)
    backfill.block("head", gang("head", 1, 1, priority=9), 60.0)
    backfill.block("old", gang("old", 1, 1), 60.0)
    cluster.clock.advance(HOUR - 1)
    backfill.block("old", gang("old", 1, 1), 60.0)  # its next failed cycle
    cluster.clock.advance(1)
    assert cluster.protected(backfill) == {"head", "old"}


def test_the_plan_is_kept_until_refresh_s_then_rebuilt_from_the_snapshot() -> None:
    cluster = Cluster()
    backfill = cluster.backfill()
    backfill.block("big", gang("big", 2, 8), 1800.0)
    assert cluster.estimates(backfill) == {"big": START + HOUR}
    cluster.ends["long"] = START + 1200  # it will end sooner than thought
    cluster.clock.advance(4.9)
    assert cluster.estimates(backfill) == {"big": START + HOUR}
    cluster.clock.advance(0.1)
    assert cluster.estimates(backfill) == {"big": START + 1200}


def test_a_newly_blocked_gang_goes_on_top_of_the_plan_and_the_refresh_redoes_it() -> None:
    # Blocking and unblocking must not rebuild the plan each time (a preemption storm blocks
    # and unblocks hundreds of pods): the newcomer is planned on the current plan at once,
    # and the refresh after refresh_s picks up what changed meanwhile.
    cluster = Cluster()
    backfill = cluster.backfill()
    backfill.block("big", gang("big", 2, 8), 1800.0)
    assert cluster.estimates(backfill) == {"big": START + HOUR}
    cluster.ends["long"] = START + 1200  # known only to a rebuilt plan
    backfill.block("small", gang("small", 1, 1), 60.0)
    assert cluster.estimates(backfill) == {"big": START + HOUR, "small": START}
    cluster.clock.advance(5.0)
    assert cluster.estimates(backfill) == {"big": START + 5 + 1195, "small": START + 5}


def test_new_limits_take_effect_at_the_next_plan() -> None:
    cluster = Cluster()
    backfill = cluster.backfill(reservations=4)
    backfill.block("a", gang("a", 1, 1, priority=2), 60.0)
    backfill.block("b", gang("b", 1, 1, priority=1), 60.0)
    assert cluster.protected(backfill) == {"a", "b"}
    backfill.set_limits(1, HOUR)
    assert cluster.protected(backfill) == {"a"}


def test_a_plan_rebuilt_in_a_placements_own_check_leaves_that_placement_out() -> None:
    # The runner has already reserved "slow" in the snapshot when its cycle asks.
    cluster = Cluster()
    backfill = cluster.backfill()
    backfill.block("big", gang("big", 2, 8), 1800.0)
    slow = make_pod("slow").gpus(4).view()
    cluster.snapshot.assume(slow, "gpu-1")
    cluster.ends["slow"] = START + 2 * HOUR
    starting = [Running("gpu-1", vector(slow.requests), START + 2 * HOUR)]
    found = backfill.conflict(
        "pod:default/slow",
        0,
        starting,
        cluster.snapshot,
        cluster.ends_at,
        cluster.eligible,
        placing={slow.uid},
    )
    assert found is not None and found.key == "big" and found.start == START + HOUR
