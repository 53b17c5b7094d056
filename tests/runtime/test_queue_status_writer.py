"""The queue status writer (runtime/queue_status_writer.py): what it plans to write, that it
writes each API's fields, and that it writes nothing when nothing worth telling changed.
The patches go to a recording function here; tests/integration/test_queue_status_live.py
sends them to a real API server."""

from __future__ import annotations

from collections.abc import Mapping

from batchsched.clock import FakeClock
from batchsched.gang.podgroup import PodGroupView
from batchsched.model.gang_ref import GangApi
from batchsched.model.resources import Resources
from batchsched.runtime.queue_status import QUEUED, UNSCHEDULABLE, QueueStatus, message
from batchsched.runtime.queue_status_writer import (
    QUEUE_POSITION_ANNOTATION,
    QUEUE_STATUS_ANNOTATION,
    QUEUED_CONDITION,
    QueueStatusWriter,
    Write,
    plan_writes,
)

NOW = 1_700_000_000.0


def status(position: int, reason: str = QUEUED) -> QueueStatus:
    return QueueStatus(reason, position, 100, "", position, 100)


def never(key: str) -> float:
    return float("inf")


def test_a_new_gang_is_written_and_an_unchanged_one_is_not() -> None:
    plan = plan_writes(
        {"ns/new": status(1), "ns/same": status(50)},
        {"ns/same": status(50)},
        {},
        never,
        (15.0, 20),
        NOW,
    )
    assert plan == [Write("ns/new", status(1))]


def test_a_gang_the_last_pass_did_not_find_pending_is_not_written_yet() -> None:
    statuses = {"ns/new": status(1), "ns/older": status(2)}
    plan = plan_writes(statuses, {}, {}, never, (15.0, 20), NOW, fresh={"ns/new"})
    assert plan == [Write("ns/older", status(2))]


def test_a_fresh_gang_that_shows_a_line_is_still_compared_with_it() -> None:
    shown = {"ns/a": message(status(7, UNSCHEDULABLE), NOW)}
    statuses = {"ns/a": status(3, UNSCHEDULABLE)}
    plan = plan_writes(statuses, {}, shown, never, (15.0, 20), NOW, fresh={"ns/a"})
    assert plan == [Write("ns/a", status(3, UNSCHEDULABLE))]


def test_a_queued_gang_the_line_reaches_within_the_horizon_gets_no_line() -> None:
    statuses = {
        "ns/soon": status(30),
        "ns/later": status(60),
        "ns/refused": status(10, UNSCHEDULABLE),  # tried and refused: said at once
    }
    plan = plan_writes(statuses, {}, {}, never, (15.0, 20), NOW, near=50)
    assert plan == [Write("ns/refused", status(10, UNSCHEDULABLE)), Write("ns/later", status(60))]


def test_a_group_written_less_than_the_interval_ago_waits() -> None:
    plan = plan_writes(
        {"ns/a": status(2)}, {"ns/a": status(1)}, {}, lambda key: 5.0, (15.0, 20), NOW
    )
    assert plan == []


def test_the_cap_keeps_the_reason_changes_and_the_head_of_the_line() -> None:
    written = {f"ns/g{i}": status(i + 1) for i in range(10)}
    statuses = {f"ns/g{i}": status(i) for i in range(1, 10)}  # all moved up one place
    statuses["ns/g9"] = status(9, UNSCHEDULABLE)
    plan = plan_writes(statuses, written, {}, never, (15.0, 3), NOW)
    assert [w.key for w in plan] == ["ns/g9", "ns/g1", "ns/g2"]


def test_a_group_that_left_the_queue_has_its_line_removed() -> None:
    plan = plan_writes({}, {}, {"ns/started": "Queued: position 1 of 1"}, never, (15.0, 20), NOW)
    assert plan == [Write("ns/started", None)]


def test_a_new_leader_leaves_alone_what_the_object_already_shows() -> None:
    no = UNSCHEDULABLE
    shown = {"ns/a": message(status(7, no), NOW), "ns/b": message(status(8, no), NOW)}
    statuses = {"ns/a": status(7, no), "ns/b": status(3, no)}
    plan = plan_writes(statuses, {}, shown, never, (15.0, 20), NOW)
    assert plan == [Write("ns/b", status(3, no))]


def test_a_new_leader_keeps_the_last_line_until_it_has_tried_the_gang_itself() -> None:
    shown = {"ns/a": message(status(1, UNSCHEDULABLE), NOW)}
    assert plan_writes({"ns/a": status(1)}, {}, shown, never, (15.0, 20), NOW) == []


def group(name: str, api: GangApi = GangApi.SCHEDULER_PLUGINS, **notes: str) -> PodGroupView:
    return PodGroupView(
        "ns", name, f"uid-{name}", 2, Resources(), None, 0.0, {}, dict(notes), api=api
    )


class Recorder:
    def __init__(self, fail: bool = False) -> None:
        self.calls: list[tuple[str, Mapping[str, object], str]] = []
        self.fail = fail

    async def __call__(self, path: str, body: Mapping[str, object], kind: str) -> object:
        self.calls.append((path, body, kind))
        if self.fail:
            raise OSError("API server unavailable")
        return {}


async def test_a_gang_placed_before_the_next_pass_costs_no_write() -> None:
    patch, clock = Recorder(), FakeClock()
    writer = QueueStatusWriter(patch, clock, pass_interval=5.0)
    groups = {"ns/a": group("a"), "ns/b": group("b")}
    no = UNSCHEDULABLE  # tried and refused: the horizon for Queued gangs plays no part
    assert await writer.publish(lambda: {"ns/a": status(1, no), "ns/b": status(2, no)}, groups) == 0
    clock.advance(5.0)
    # a was placed meanwhile: nothing to add, nothing to remove; b waits on
    assert await writer.publish(lambda: {"ns/b": status(1, no)}, groups) == 1
    assert [path.rsplit("/", 1)[1] for path, _, _ in patch.calls] == ["b"]


async def test_a_gang_that_left_the_queue_for_a_pass_waits_a_pass_again() -> None:
    patch, clock = Recorder(), FakeClock()
    writer = QueueStatusWriter(patch, clock, pass_interval=5.0)
    groups = {"ns/a": group("a")}
    waiting = {"ns/a": status(1, UNSCHEDULABLE)}
    await writer.publish(lambda: waiting, groups)
    await writer.publish(dict, groups)
    assert await writer.publish(lambda: waiting, groups) == 0
    assert await writer.publish(lambda: waiting, groups) == 1


async def test_a_backlog_that_drains_within_the_horizon_gets_no_lines() -> None:
    patch, clock = Recorder(), FakeClock()
    writer = QueueStatusWriter(patch, clock, pass_interval=5.0)
    groups = {f"ns/g{i}": group(f"g{i}") for i in range(100)}
    await writer.publish(lambda: {f"ns/g{i}": status(i + 1) for i in range(100)}, groups)
    clock.advance(5.0)
    # 40 gangs left in 5 s: 8 a second, the other 60 are reached within 8 s
    left = {f"ns/g{i}": status(i - 39) for i in range(40, 100)}
    assert await writer.publish(lambda: left, groups) == 0
    clock.advance(5.0)
    # the line stopped: whoever is still Queued now gets its place
    assert await writer.publish(lambda: left, groups) == 20
    assert patch.calls[0][0].endswith("/g40")


async def test_a_scheduler_plugins_group_gets_the_annotations_once() -> None:
    patch, clock = Recorder(), FakeClock()
    writer = QueueStatusWriter(patch, clock, min_interval=15.0)
    groups = {"ns/a": group("a")}
    assert await writer.publish(lambda: {"ns/a": status(3)}, groups) == 0  # seen once
    assert await writer.publish(lambda: {"ns/a": status(3)}, groups) == 1
    path, body, kind = patch.calls[0]
    assert path == "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/ns/podgroups/a"
    assert kind == "application/merge-patch+json"
    assert body == {
        "metadata": {
            "uid": "uid-a",
            "annotations": {
                QUEUE_STATUS_ANNOTATION: "Queued: position 3 of 100",
                QUEUE_POSITION_ANNOTATION: "3",
            },
        }
    }
    clock.advance(60)
    assert await writer.publish(lambda: {"ns/a": status(3)}, groups) == 0
    assert len(patch.calls) == 1  # nothing changed: no PATCH


async def test_an_upstream_group_also_gets_the_queued_condition_beside_its_own() -> None:
    patch = Recorder()
    writer = QueueStatusWriter(patch, FakeClock())
    for _ in range(2):  # the second pass that finds it pending writes it
        await writer.publish(
            lambda: {"k8s:ns/a": status(1)}, {"k8s:ns/a": group("a", GangApi.KUBERNETES)}
        )
    path, body, kind = patch.calls[1]
    assert path == "/apis/scheduling.k8s.io/v1alpha2/namespaces/ns/podgroups/a/status"
    assert kind == "application/strategic-merge-patch+json"  # merged by type: others stay
    (condition,) = body["status"]["conditions"]  # type: ignore[index]
    assert condition["type"] == QUEUED_CONDITION
    assert (condition["status"], condition["reason"]) == ("True", QUEUED)
    assert "lastTransitionTime" in condition


async def test_a_failed_write_is_tried_again_on_the_next_pass() -> None:
    patch, clock = Recorder(fail=True), FakeClock()
    writer = QueueStatusWriter(patch, clock)
    groups = {"ns/a": group("a")}
    await writer.publish(lambda: {"ns/a": status(1)}, groups)  # seen once: no write yet
    assert await writer.publish(lambda: {"ns/a": status(1)}, groups) == 0
    assert patch.calls  # tried, and failed
    patch.fail = False
    assert await writer.publish(lambda: {"ns/a": status(1)}, groups) == 1


async def test_a_pass_is_due_only_every_pass_interval() -> None:
    clock = FakeClock()
    writer = QueueStatusWriter(Recorder(), clock, pass_interval=5.0)
    assert writer.due()
    await writer.publish(dict, {})
    clock.advance(4.0)
    assert not writer.due()
    clock.advance(1.0)
    assert writer.due()


async def test_a_long_pass_pushes_the_next_one_back() -> None:
    clock = FakeClock()
    readings = iter([100.0, 100.2])  # a pass over a huge queue: 0.2 s at 2 %: one per 10 s
    writer = QueueStatusWriter(Recorder(), clock, pass_interval=5.0, timer=lambda: next(readings))
    await writer.publish(dict, {})
    clock.advance(5.0)
    assert not writer.due()
    clock.advance(5.5)
    assert writer.due()
