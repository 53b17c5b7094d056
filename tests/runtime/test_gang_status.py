"""PodGroup status as the scheduler writes it: counts of scheduled, running, succeeded and
failed members, the phase they add up to, and when scheduling started."""

from __future__ import annotations

import pytest

from batchsched.gang.podgroup import parse_pod_group
from batchsched.model.pod import PodView
from batchsched.runtime.gangs import GangTracker
from batchsched.snapshot import Snapshot
from tests.builders import make_node, make_pod

GROUP = "scheduling.x-k8s.io/pod-group"
KEY = "default/train"
WALL = 1_800_000_000.0


def tracker(min_member: int = 2) -> GangTracker:
    gangs = GangTracker()
    body = {
        "metadata": {"name": "train", "namespace": "default", "uid": "pg"},
        "spec": {"minMember": min_member},
    }
    gangs.on_add(parse_pod_group(body))
    return gangs


def member(i: int, phase: str, node: str | None = None) -> PodView:
    builder = make_pod(f"train-{i}").label(GROUP, "train")
    if node is not None:
        builder = builder.node(node)
    return builder.set("status.phase", phase).view()


def status(members: list[tuple[str, bool]]) -> dict[str, object]:
    """(pod phase, counted on a node?) per member; finished pods are not counted, as in the
    cache."""
    gangs = tracker()
    snapshot = Snapshot([make_node("n1").cpu("64").view()], [])
    for i, (phase, on_node) in enumerate(members):
        pod = member(i, phase, "n1" if on_node or phase != "Pending" else None)
        gangs.note_pod(pod)
        if on_node:
            snapshot.assume(pod, "n1")
    return gangs.status_of(KEY, snapshot, WALL)


PENDING, BOUND, RUNNING = ("Pending", False), ("Pending", True), ("Running", True)
SUCCEEDED, FAILED = ("Succeeded", False), ("Failed", False)


@pytest.mark.parametrize(
    ("case", "members", "phase", "counts"),
    [
        ("no member placed is Pending", [PENDING, PENDING], "Pending", (0, 0, 0, 0)),
        ("one of two placed is Scheduling", [BOUND, PENDING], "Scheduling", (1, 0, 0, 0)),
        ("all placed, none running yet, is Scheduled", [BOUND, BOUND], "Scheduled", (2, 0, 0, 0)),
        ("minMember running is Running", [RUNNING, RUNNING], "Running", (2, 2, 0, 0)),
        (
            "one done and one running is still Running",
            [SUCCEEDED, RUNNING],
            "Running",
            (2, 1, 1, 0),
        ),
        ("minMember succeeded is Finished", [SUCCEEDED, SUCCEEDED], "Finished", (2, 0, 2, 0)),
        ("a failure the gang cannot make up is Failed", [FAILED, RUNNING], "Failed", (2, 1, 0, 1)),
        (
            "a failure while a member still waits is not Failed yet",
            [FAILED, PENDING],
            "Scheduling",
            (1, 0, 0, 1),
        ),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_status_counts_and_phase(
    case: str, members: list[tuple[str, bool]], phase: str, counts: tuple[int, ...]
) -> None:
    got = status(members)
    assert got["phase"] == phase
    assert (got["scheduled"], got["running"], got["succeeded"], got["failed"]) == counts


def test_finished_stays_finished_when_the_pods_are_deleted() -> None:
    gangs = tracker()
    snapshot = Snapshot([make_node("n1").cpu("64").view()], [])
    pods = [member(i, "Succeeded", "n1") for i in range(2)]
    for pod in pods:
        gangs.note_pod(pod)
    assert gangs.status_of(KEY, snapshot, WALL)["phase"] == "Finished"
    for pod in pods:
        gangs.forget_pod(pod)
    assert gangs.status_of(KEY, snapshot, WALL)["phase"] == "Finished"


def test_schedule_start_time_is_the_first_time_a_member_was_scheduled() -> None:
    gangs = tracker()
    snapshot = Snapshot([make_node("n1").cpu("64").view()], [])
    assert "scheduleStartTime" not in gangs.status_of(KEY, snapshot, WALL)
    pod = member(0, "Pending", "n1")
    gangs.note_pod(pod)
    snapshot.assume(pod, "n1")
    first = gangs.status_of(KEY, snapshot, WALL)
    later = gangs.status_of(KEY, snapshot, WALL + 600)
    assert first["scheduleStartTime"] == later["scheduleStartTime"] == "2027-01-15T08:00:00Z"


def test_a_member_changing_phase_marks_the_gang_for_a_status_write() -> None:
    gangs = tracker()
    gangs.note_pod(member(0, "Pending"))
    gangs.dirty.clear()
    gangs.note_pod(member(0, "Pending"))
    assert gangs.dirty == set()
    gangs.note_pod(member(0, "Running", "n1"))
    assert gangs.dirty == {KEY}


def test_only_a_podgroup_spec_change_sends_waiting_pods_back() -> None:
    moves: list[int] = []
    gangs = GangTracker(on_group_added=lambda: moves.append(1))
    body = {
        "metadata": {"name": "train", "namespace": "default", "uid": "pg"},
        "spec": {"minMember": 2},
    }
    first = parse_pod_group(body)
    gangs.on_add(first)
    assert moves == [1]
    annotated = parse_pod_group(
        {**body, "metadata": {**body["metadata"], "annotations": {"batchsched.io/x": "y"}}}
    )
    gangs.on_update(first, annotated)  # e.g. our estimated-start write coming back
    assert moves == [1] and gangs.group(KEY) == annotated
    smaller = parse_pod_group({**body, "spec": {"minMember": 1}})
    gangs.on_update(annotated, smaller)
    assert moves == [1, 1]
