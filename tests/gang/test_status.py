"""A gang's status in the terms of the API that described it."""

from __future__ import annotations

import dataclasses

import pytest

from batchsched.gang.podgroup import PodGroupView
from batchsched.gang.status import NotStarted, StatusWrite, shows, status_write
from batchsched.model.gang_ref import GangApi
from batchsched.model.resources import Resources

NOW = "2026-11-26T17:00:00Z"


def _group(api: GangApi, scheduled: str = "") -> PodGroupView:
    return PodGroupView(
        namespace="ml",
        name="g",
        uid="u",
        min_member=4,
        min_resources=Resources(),
        schedule_timeout_seconds=None,
        creation_time=0.0,
        labels={},
        annotations={},
        api=api,
        scheduled=scheduled,
    )


def _only_condition(write: StatusWrite | None) -> dict[str, object]:
    assert write is not None
    conditions = write.status["conditions"]
    assert isinstance(conditions, list) and len(conditions) == 1
    condition = conditions[0]
    assert isinstance(condition, dict)
    return condition


def _status(phase: str) -> dict[str, object]:
    return {"phase": phase, "scheduled": 4, "running": 2, "succeeded": 1, "failed": 0}


def test_scheduler_plugins_status_is_written_as_computed() -> None:
    write = status_write(_group(GangApi.SCHEDULER_PLUGINS), _status("Running"), None, NOW)
    assert write == StatusWrite(_status("Running"))


@pytest.mark.parametrize("phase", ["Scheduled", "Running", "Finished", "Failed"])
def test_an_upstream_group_that_started_is_podgroupscheduled_true(phase: str) -> None:
    write = status_write(_group(GangApi.KUBERNETES), _status(phase), None, NOW)
    assert write is not None and write.merge_conditions
    condition = _only_condition(write)
    assert condition["type"] == "PodGroupScheduled"
    assert (condition["status"], condition["reason"]) == ("True", "Scheduled")


def test_an_upstream_group_that_cannot_be_placed_says_why() -> None:
    write = status_write(
        _group(GangApi.KUBERNETES), _status("Pending"), NotStarted("0/8 nodes fit"), NOW
    )
    assert write is not None
    condition = _only_condition(write)
    assert (condition["status"], condition["reason"]) == ("False", "Unschedulable")
    assert condition["message"] == "0/8 nodes fit"


def test_an_upstream_group_scheduled_once_never_goes_back_to_false() -> None:
    group = _group(GangApi.KUBERNETES, scheduled="True")
    assert (
        status_write(group, _status("Pending"), NotStarted("no room for the new pods"), NOW) is None
    )


def test_an_upstream_group_already_scheduled_is_not_written_again() -> None:
    group = _group(GangApi.KUBERNETES, scheduled="True")
    assert status_write(group, _status("Running"), None, NOW) is None


def test_an_upstream_group_with_nothing_to_say_is_not_written() -> None:
    assert status_write(_group(GangApi.KUBERNETES), _status("Scheduling"), None, NOW) is None


@pytest.mark.parametrize(
    ("phase", "volcano"),
    [
        ("Pending", "Inqueue"),
        ("Scheduling", "Inqueue"),
        ("Scheduled", "Inqueue"),
        ("Running", "Running"),
        ("Finished", "Completed"),
        ("Failed", "Unknown"),
    ],
)
def test_volcano_phases(phase: str, volcano: str) -> None:
    write = status_write(_group(GangApi.VOLCANO), _status(phase), None, NOW)
    assert write is not None and not write.merge_conditions
    assert write.status["phase"] == volcano
    assert (write.status["running"], write.status["succeeded"]) == (2, 1)


@pytest.mark.parametrize(
    ("held", "reason"),
    [
        (NotStarted("gang ml/g needs 4 more pod(s) placed together"), "NotEnoughResources"),
        (NotStarted("gang ml/g waits for members: 2 of 4 exist", True), "NotEnoughTasks"),
    ],
    ids=["no room", "members missing"],
)
def test_a_volcano_group_that_cannot_start_is_unschedulable(held: NotStarted, reason: str) -> None:
    write = status_write(_group(GangApi.VOLCANO), _status("Pending"), held, NOW)
    assert write is not None
    condition = _only_condition(write)
    assert (condition["type"], condition["status"], condition["reason"]) == (
        "Unschedulable",
        "True",
        reason,
    )


def test_a_kueue_group_has_no_object_to_write() -> None:
    assert status_write(_group(GangApi.KUEUE), _status("Running"), None, NOW) is None


def test_a_repeat_at_a_later_time_has_the_same_fingerprint() -> None:
    group = _group(GangApi.KUBERNETES)
    first = status_write(group, _status("Running"), None, NOW)
    later = status_write(group, _status("Running"), None, "2026-11-26T18:00:00Z")
    assert first is not None and later is not None
    assert first.status != later.status
    assert first.fingerprint() == later.fingerprint()
    changed = status_write(dataclasses.replace(group), _status("Pending"), NotStarted("full"), NOW)
    assert changed is not None and changed.fingerprint() != first.fingerprint()


PENDING_ZERO = {"phase": "Pending", "scheduled": 0, "running": 0, "succeeded": 0, "failed": 0}


def test_a_group_without_status_already_shows_pending_with_nothing_counted() -> None:
    assert shows(_group(GangApi.SCHEDULER_PLUGINS), StatusWrite(PENDING_ZERO))


@pytest.mark.parametrize(
    ("recorded", "status"),
    [
        pytest.param({}, {**PENDING_ZERO, "scheduled": 1}, id="a member counted"),
        pytest.param({}, {**PENDING_ZERO, "phase": "Scheduled"}, id="a new phase"),
        pytest.param(
            {"recorded_phase": "Scheduled", "recorded_scheduled": 4},
            PENDING_ZERO,
            id="back to Pending from Scheduled",
        ),
        pytest.param(
            {"recorded_phase": "Scheduled", "recorded_scheduled": 4},
            {**PENDING_ZERO, "phase": "Scheduled", "scheduled": 4, "scheduleStartTime": "T"},
            id="a start time the object lacks",
        ),
    ],
)
def test_a_status_the_group_does_not_show_is_written(
    recorded: dict[str, object], status: dict[str, object]
) -> None:
    group = dataclasses.replace(_group(GangApi.SCHEDULER_PLUGINS), **recorded)  # type: ignore[arg-type]
    assert not shows(group, StatusWrite(status))


def test_the_status_a_leader_wrote_is_shown_to_the_next_one() -> None:
    written = {"phase": "Running", "scheduled": 4, "running": 4, "succeeded": 0, "failed": 0}
    group = dataclasses.replace(
        _group(GangApi.SCHEDULER_PLUGINS),
        recorded_phase="Running",
        recorded_scheduled=4,
        recorded_running=4,
        recorded_start=NOW,
    )
    assert shows(group, StatusWrite({**written, "scheduleStartTime": NOW}))


def test_only_scheduler_plugins_status_is_compared() -> None:
    volcano = dataclasses.replace(_group(GangApi.VOLCANO), recorded_phase="Pending")
    assert not shows(volcano, StatusWrite(PENDING_ZERO))
