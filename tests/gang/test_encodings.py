"""Every gang encoding read into one PodGroupView: upstream scheduling.k8s.io/v1alpha2,
Volcano, Kueue plain-pod groups; a pod naming two gangs is refused."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from batchsched.gang.encodings import (
    kueue_group,
    parse_k8s_pod_group,
    parse_volcano_pod_group,
)
from batchsched.gang.podgroup import pod_group_of
from batchsched.gang.topology import TopologyRequest
from batchsched.model.errors import InvalidObject
from batchsched.model.gang_ref import GangApi
from batchsched.model.resources import Resources
from tests.builders import make_pod

K8S: dict[str, Any] = {
    "apiVersion": "scheduling.k8s.io/v1alpha2",
    "kind": "PodGroup",
    "metadata": {
        "name": "train-0",
        "namespace": "ml",
        "uid": "u1",
        "creationTimestamp": "2026-01-02T03:04:05Z",
    },
    "spec": {
        "podGroupTemplateRef": {"workload": {"workloadName": "train", "podGroupTemplateName": "w"}},
        "schedulingPolicy": {"gang": {"minCount": 4}},
        "schedulingConstraints": {"topology": [{"key": "topology.batchsched.io/rack"}]},
        "priorityClassName": "high",
    },
}

VOLCANO: dict[str, Any] = {
    "apiVersion": "scheduling.volcano.sh/v1beta1",
    "kind": "PodGroup",
    "metadata": {"name": "job-a", "namespace": "ml", "uid": "v1"},
    "spec": {
        "minMember": 3,
        "minResources": {"nvidia.com/gpu": "24"},
        "queue": "research",
        "priorityClassName": "low",
        "networkTopology": {"mode": "soft", "highestTierAllowed": 2},
    },
    "status": {"phase": "Running", "succeeded": 1},
}


def _with(base: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    obj = copy.deepcopy(base)
    target = obj
    *parents, last = path.split(".")
    for key in parents:
        target = target.setdefault(key, {})
    if value is None:
        target.pop(last, None)
    else:
        target[last] = value
    return obj


def test_an_upstream_pod_group_reads_its_gang_policy_topology_and_priority() -> None:
    group = parse_k8s_pod_group(K8S)
    assert group.api is GangApi.KUBERNETES
    assert group.key == "k8s:ml/train-0"
    assert group.min_member == 4
    assert group.topology == TopologyRequest("topology.batchsched.io/rack", required=True)
    assert group.priority_class_name == "high"
    assert group.scheduled == ""


def test_an_upstream_basic_policy_is_a_group_of_one() -> None:
    group = parse_k8s_pod_group(_with(K8S, "spec.schedulingPolicy", {"basic": {}}))
    assert group.min_member == 1


def test_the_upstream_scheduled_condition_is_remembered() -> None:
    obj = _with(K8S, "status", {"conditions": [{"type": "PodGroupScheduled", "status": "True"}]})
    assert parse_k8s_pod_group(obj).scheduled == "True"


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [
        ("spec.schedulingPolicy", {}, "spec.schedulingPolicy"),
        ("spec.schedulingPolicy", {"basic": {}, "gang": {"minCount": 2}}, "spec.schedulingPolicy"),
        ("spec.schedulingPolicy.gang.minCount", 0, "spec.schedulingPolicy.gang.minCount"),
        ("spec.schedulingPolicy.gang.minCount", "4", "spec.schedulingPolicy.gang.minCount"),
        (
            "spec.schedulingConstraints.topology",
            [{"key": "a"}, {"key": "b"}],
            "spec.schedulingConstraints.topology",
        ),
        ("spec.schedulingConstraints.topology", [{}], "spec.schedulingConstraints.topology[0].key"),
    ],
    ids=[
        "a policy with neither basic nor gang",
        "a policy with both",
        "a minCount of zero",
        "a minCount given as a string",
        "two topology constraints",
        "a topology constraint without a key",
    ],
)
def test_a_malformed_upstream_pod_group_names_the_field(path: str, value: Any, field: str) -> None:
    with pytest.raises(InvalidObject) as err:
        parse_k8s_pod_group(_with(K8S, path, value))
    assert err.value.field == field


def test_a_volcano_pod_group_reads_queue_resources_topology_and_recorded_counts() -> None:
    group = parse_volcano_pod_group(VOLCANO)
    assert group.api is GangApi.VOLCANO
    assert group.key == "volcano:ml/job-a"
    assert group.min_member == 3
    assert group.min_resources == Resources.parse({"nvidia.com/gpu": "24"}, "x")
    assert group.queue == "research"
    assert group.topology == TopologyRequest("", required=False, tier=2)
    assert group.recorded_succeeded == 1


def test_a_volcano_hard_topology_defaults_to_the_tightest_tier() -> None:
    group = parse_volcano_pod_group(_with(VOLCANO, "spec.networkTopology", {"mode": "hard"}))
    assert group.topology == TopologyRequest("", required=True, tier=1)
    assert group.topology.level_in(["clique", "rack"]) == "clique"


def test_a_volcano_tier_above_every_level_keeps_nothing_together() -> None:
    request = TopologyRequest("", required=True, tier=3)
    assert request.level_in(["clique", "rack"]) is None


def test_a_volcano_pod_group_without_min_member_is_a_group_of_one() -> None:
    assert parse_volcano_pod_group(_with(VOLCANO, "spec.minMember", None)).min_member == 1


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [
        ("spec.minMember", -1, "spec.minMember"),
        ("spec.networkTopology.mode", "strict", "spec.networkTopology.mode"),
        ("spec.networkTopology.highestTierAllowed", 0, "spec.networkTopology.highestTierAllowed"),
        ("spec.minResources", {"nvidia.com/gpu": "lots"}, "spec.minResources[nvidia.com/gpu]"),
    ],
    ids=["a negative minMember", "an unknown mode", "tier zero", "a bad quantity"],
)
def test_a_malformed_volcano_pod_group_names_the_field(path: str, value: Any, field: str) -> None:
    with pytest.raises(InvalidObject) as err:
        parse_volcano_pod_group(_with(VOLCANO, path, value))
    assert err.value.field.startswith(field.split("[")[0])


def _kueue_pod(**annotations: str) -> Any:
    pod = make_pod("w-0", "ml").label("kueue.x-k8s.io/pod-group-name", "g")
    pod = pod.label("kueue.x-k8s.io/queue-name", "team-a")
    for key, value in annotations.items():
        pod = pod.annotation(key.replace("__", "/").replace("_", "-"), value)
    return pod.view()


def test_a_kueue_group_is_described_by_its_pods() -> None:
    pod = _kueue_pod(**{"kueue.x-k8s.io__pod-group-total-count": "8"})
    group = kueue_group(pod, "g")
    assert pod_group_of(pod) == "kueue:ml/g" == group.key
    assert group.min_member == 8
    assert group.queue == "team-a"
    assert group.event_pod == "w-0"


def test_a_kueue_pod_with_a_required_topology_annotation() -> None:
    pod = (
        make_pod("w-0", "ml")
        .label("kueue.x-k8s.io/pod-group-name", "g")
        .annotation("kueue.x-k8s.io/pod-group-total-count", "2")
        .annotation("kueue.x-k8s.io/podset-required-topology", "topology.batchsched.io/rack")
        .view()
    )
    assert kueue_group(pod, "g").topology == TopologyRequest(
        "topology.batchsched.io/rack", required=True
    )


@pytest.mark.parametrize("count", [None, "0", "two", "-3"], ids=["missing", "zero", "words", "neg"])
def test_a_kueue_pod_without_a_usable_total_count_is_refused(count: str | None) -> None:
    pod = make_pod("w-0", "ml").label("kueue.x-k8s.io/pod-group-name", "g")
    if count is not None:
        pod = pod.annotation("kueue.x-k8s.io/pod-group-total-count", count)
    with pytest.raises(InvalidObject) as err:
        kueue_group(pod.view(), "g")
    assert "pod-group-total-count" in err.value.field


@pytest.mark.parametrize(
    ("builder", "key"),
    [
        (make_pod("p", "ml").label("scheduling.x-k8s.io/pod-group", "g"), "ml/g"),
        (make_pod("p", "ml").label("pod-group.scheduling.sigs.k8s.io", "g"), "ml/g"),
        (make_pod("p", "ml").set("spec.schedulingGroup", {"podGroupName": "g"}), "k8s:ml/g"),
        (make_pod("p", "ml").annotation("scheduling.k8s.io/group-name", "g"), "volcano:ml/g"),
        (make_pod("p", "ml").annotation("scheduling.volcano.sh/group-name", "g"), "volcano:ml/g"),
        (make_pod("p", "ml").label("kueue.x-k8s.io/pod-group-name", "g"), "kueue:ml/g"),
        (make_pod("p", "ml"), None),
    ],
    ids=[
        "scheduler-plugins label",
        "scheduler-plugins legacy label",
        "upstream schedulingGroup",
        "Volcano annotation",
        "Volcano's newer annotation",
        "Kueue label",
        "no gang",
    ],
)
def test_each_encoding_names_its_gang(builder: Any, key: str | None) -> None:
    assert pod_group_of(builder.view()) == key


def test_a_pod_naming_two_gangs_is_refused_naming_both() -> None:
    pod = (
        make_pod("p", "ml")
        .label("scheduling.x-k8s.io/pod-group", "a")
        .annotation("scheduling.k8s.io/group-name", "b")
    )
    with pytest.raises(InvalidObject) as err:
        pod.view()
    assert "scheduler-plugins PodGroup 'a'" in str(err.value)
    assert "Volcano PodGroup 'b'" in str(err.value)
