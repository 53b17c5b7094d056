"""PodGroup parsing and pod membership: the scheduler-plugins v1alpha1 API, read strictly."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from batchsched.gang.podgroup import (
    LEGACY_POD_GROUP_LABEL,
    POD_GROUP_LABEL,
    PodGroupView,
    parse_pod_group,
    pod_group_of,
)
from batchsched.model.errors import InvalidObject
from batchsched.model.resources import Resources
from tests.builders import make_pod

GOOD: dict[str, Any] = {
    "apiVersion": "scheduling.x-k8s.io/v1alpha1",
    "kind": "PodGroup",
    "metadata": {
        "name": "train-64",
        "namespace": "ml",
        "uid": "pg-uid-1",
        "creationTimestamp": "2025-01-02T03:04:05Z",
        "labels": {"team": "vision"},
        "annotations": {"note": "nightly"},
    },
    "spec": {
        "minMember": 64,
        "minResources": {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": 64},
        "scheduleTimeoutSeconds": 120,
    },
    "status": {"phase": "Pending", "running": 0},
}


def pod_group(**spec: object) -> dict[str, Any]:
    """GOOD with spec fields replaced; a value of None removes the field."""
    obj = copy.deepcopy(GOOD)
    for field, value in spec.items():
        if value is None:
            obj["spec"].pop(field, None)
        else:
            obj["spec"][field] = value
    return obj


def test_a_complete_pod_group_is_read_field_by_field() -> None:
    view = parse_pod_group(GOOD)

    assert view == PodGroupView(
        namespace="ml",
        name="train-64",
        uid="pg-uid-1",
        min_member=64,
        min_resources=Resources(
            milli_cpu=64_000, memory=512 * 2**30, scalar={"nvidia.com/gpu": 64}
        ),
        schedule_timeout_seconds=120,
        creation_time=1735787045.0,
        labels={"team": "vision"},
        annotations={"note": "nightly"},
        recorded_phase="Pending",  # the status as read: what it shows already is not rewritten
    )
    assert view.key == "ml/train-64"
    assert hash(view) == hash(parse_pod_group(GOOD))


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"minResources": None}, Resources()),
        ({"minResources": {}}, Resources()),
        ({"minResources": {"nvidia.com/gpu": "8"}}, Resources(scalar={"nvidia.com/gpu": 8})),
        ({"minResources": {"cpu": "1500m"}}, Resources(milli_cpu=1500)),
    ],
    ids=[
        "absent minResources asks for nothing",
        "empty minResources asks for nothing",
        "a quoted gpu count is a quantity",
        "cpu is read in millicores",
    ],
)
def test_min_resources_are_canonical_amounts(spec: dict[str, object], expected: Resources) -> None:
    assert parse_pod_group(pod_group(**spec)).min_resources == expected


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"scheduleTimeoutSeconds": None}, None),
        ({"scheduleTimeoutSeconds": 0}, 0),
        ({"scheduleTimeoutSeconds": 600}, 600),
    ],
    ids=[
        "absent timeout leaves the scheduler's default (None)",
        "zero timeout is kept as zero",
        "a given timeout is kept",
    ],
)
def test_schedule_timeout(spec: dict[str, object], expected: int | None) -> None:
    assert parse_pod_group(pod_group(**spec)).schedule_timeout_seconds == expected


def test_min_member_of_one_is_the_smallest_gang() -> None:
    assert parse_pod_group(pod_group(minMember=1)).min_member == 1


def test_metadata_defaults_for_objects_read_from_files() -> None:
    view = parse_pod_group({"metadata": {"name": "g"}, "spec": {"minMember": 2}})

    assert (view.namespace, view.uid, view.creation_time) == ("default", "default/g", 0.0)
    assert (view.labels, view.annotations) == ({}, {})


@pytest.mark.parametrize(
    ("obj", "field", "fragment"),
    [
        (pod_group(minMember=0), "spec.minMember", "must be at least 1, got 0"),
        (pod_group(minMember=-3), "spec.minMember", "must be at least 1, got -3"),
        (pod_group(minMember=None), "spec.minMember", "required"),
        (pod_group(minMember="3"), "spec.minMember", "expected an integer, got '3'"),
        (pod_group(minMember="three"), "spec.minMember", "expected an integer, got 'three'"),
        (pod_group(minMember=True), "spec.minMember", "expected an integer, got True"),
        (pod_group(minMember=2.5), "spec.minMember", "expected an integer, got 2.5"),
        (pod_group(minMember=2**31), "spec.minMember", "must be at most 2147483647"),
        (
            pod_group(minResources={"nvidia.com/gpu": "lots"}),
            "spec.minResources.nvidia.com/gpu",
            "invalid quantity 'lots'",
        ),
        (
            pod_group(minResources={"memory": "-1Gi"}),
            "spec.minResources.memory",
            "invalid quantity '-1Gi': must not be negative",
        ),
        (pod_group(minResources=["cpu"]), "spec.minResources", "expected a mapping"),
        (
            pod_group(scheduleTimeoutSeconds=-1),
            "spec.scheduleTimeoutSeconds",
            "must be at least 0, got -1",
        ),
        (
            pod_group(scheduleTimeoutSeconds="60s"),
            "spec.scheduleTimeoutSeconds",
            "expected an integer, got '60s'",
        ),
        ({**GOOD, "spec": "gang"}, "spec", "expected a mapping"),
        (
            {**GOOD, "metadata": {**GOOD["metadata"], "labels": {"a": ["b"]}}},
            "metadata.labels.a",
            "expected a string",
        ),
    ],
    ids=[
        "minMember 0 is refused",
        "negative minMember is refused",
        "missing minMember is refused (the API's zero value)",
        "minMember as a string is refused, as the API server's schema does",
        "minMember as a word is refused",
        "minMember as a boolean is refused",
        "fractional minMember is refused",
        "minMember beyond int32 is refused",
        "bad gpu quantity names the resource and the value",
        "negative memory quantity names the resource and the value",
        "minResources that is not a mapping is refused",
        "negative timeout is refused",
        "timeout with a unit is refused",
        "spec that is not a mapping is refused",
        "non-string label value is refused",
    ],
)
def test_bad_pod_groups_name_the_field(obj: dict[str, Any], field: str, fragment: str) -> None:
    with pytest.raises(InvalidObject) as caught:
        parse_pod_group(obj)

    err = caught.value
    assert (err.kind, err.name, err.field) == ("PodGroup", "ml/train-64", field)
    assert fragment in err.message
    assert str(err).startswith(f"PodGroup ml/train-64: {field}: ")


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        ({}, None),
        ({POD_GROUP_LABEL: "train"}, "ml/train"),
        ({LEGACY_POD_GROUP_LABEL: "old-train"}, "ml/old-train"),
        ({POD_GROUP_LABEL: "new", LEGACY_POD_GROUP_LABEL: "old"}, "ml/new"),
        ({POD_GROUP_LABEL: "", LEGACY_POD_GROUP_LABEL: "old"}, "ml/old"),
        ({POD_GROUP_LABEL: ""}, None),
        ({"app": "train"}, None),
    ],
    ids=[
        "a pod without labels joins no gang",
        "the scheduling.x-k8s.io label names the gang in the pod's namespace",
        "the older pod-group.scheduling.sigs.k8s.io label is accepted",
        "the new label wins over the old one",
        "an empty new label falls back to the old one",
        "an empty label joins no gang",
        "unrelated labels join no gang",
    ],
)
def test_pod_group_of(labels: dict[str, str], expected: str | None) -> None:
    builder = make_pod("worker-0", "ml")
    for key, value in labels.items():
        builder.label(key, value)

    assert pod_group_of(builder.view()) == expected


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        pytest.param({"succeeded": 2, "failed": 1}, (2, 1), id="the counts the leader wrote"),
        pytest.param({}, (0, 0), id="no counts yet"),
        pytest.param({"succeeded": "2", "failed": -1}, (0, 0), id="not counts: ignored"),
        pytest.param(None, (0, 0), id="no status at all"),
    ],
)
def test_the_finished_counts_in_the_status_are_read_and_never_refuse_the_object(
    status: dict[str, object] | None, expected: tuple[int, int]
) -> None:
    obj = copy.deepcopy(GOOD)
    obj["status"] = status
    group = parse_pod_group(obj)
    assert (group.recorded_succeeded, group.recorded_failed) == expected


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        pytest.param(
            {"phase": "Scheduled", "scheduled": 3, "running": 1, "scheduleStartTime": "T"},
            ("Scheduled", 3, 1, "T"),
            id="what the leader wrote",
        ),
        pytest.param(None, ("", 0, 0, ""), id="no status: nothing recorded"),
        pytest.param({"phase": 3, "scheduled": "3"}, ("", 0, 0, ""), id="not ours: ignored"),
    ],
)
def test_the_status_shown_is_read_so_that_it_is_not_written_again(
    status: dict[str, object] | None, expected: tuple[str, int, int, str]
) -> None:
    obj = copy.deepcopy(GOOD)
    obj["status"] = status
    group = parse_pod_group(obj)
    read = (group.recorded_phase, group.recorded_scheduled, group.recorded_running)
    assert (*read, group.recorded_start) == expected
