"""Pods and nodes are read once from API dicts into frozen views; bad input names the field."""

from __future__ import annotations

from typing import Any

import pytest

from batchsched.model.errors import InvalidObject
from batchsched.model.node import parse_node
from batchsched.model.pod import parse_pod
from tests.builders import make_node, make_pod


def test_requests_sum_over_containers_and_default_to_limits() -> None:
    obj = make_pod("p").cpu("500m").container("side", cpu="250m", memory="1Gi").obj()
    obj["spec"]["containers"].append(
        {
            "name": "limited",
            "image": "x",
            "resources": {"limits": {"cpu": "1", "nvidia.com/gpu": 2}},
        }
    )
    pod = parse_pod(obj)
    assert pod.requests.milli_cpu == 1750
    assert pod.requests.memory == 1024**3
    assert pod.requests.get("nvidia.com/gpu") == 2


@pytest.mark.parametrize(
    ("init", "expected_cpu"),
    [
        ([{"cpu": "3"}], 3000),
        ([{"cpu": "100m"}], 1000),
        ([{"cpu": "200m", "restart": True}, {"cpu": "1"}], 1200),
        ([{"cpu": "500m", "restart": True}], 1500),
    ],
    ids=[
        "an init container larger than the app containers sets the request",
        "a small init container changes nothing",
        "an init container after a sidecar runs beside it",
        "a sidecar adds to the steady-state request",
    ],
)
def test_effective_request_follows_init_and_sidecar_rules(
    init: list[dict[str, Any]], expected_cpu: int
) -> None:
    obj = make_pod("p").cpu("1").obj()
    obj["spec"]["initContainers"] = [
        {
            "name": f"init{i}",
            "image": "x",
            "resources": {"requests": {"cpu": c["cpu"]}},
            **({"restartPolicy": "Always"} if c.get("restart") else {}),
        }
        for i, c in enumerate(init)
    ]
    assert parse_pod(obj).requests.milli_cpu == expected_cpu


def test_pod_overhead_is_added() -> None:
    pod = make_pod("p").cpu("1").set("spec.overhead", {"cpu": "250m", "memory": "120Mi"}).view()
    assert pod.requests.milli_cpu == 1250 and pod.requests.memory == 120 * 1024**2


def test_missing_cpu_and_memory_requests_score_as_kube_defaults() -> None:
    pod = make_pod("p").view()
    assert (pod.non_zero_milli_cpu, pod.non_zero_memory) == (100, 200 * 1024**2)
    assert pod.requests.milli_cpu == 0


def test_priority_comes_from_spec_or_the_named_class_or_the_global_default() -> None:
    assert make_pod("p").priority(7).view().priority == 7
    named = make_pod("p").set("spec.priorityClassName", "high").obj()
    assert parse_pod(named, {"high": 1000}).priority == 1000
    assert parse_pod(make_pod("p").obj(), {"": 5}).priority == 5


def test_an_unknown_priority_class_is_an_error_naming_the_field() -> None:
    with pytest.raises(InvalidObject, match=r"Pod default/p: spec.priorityClassName"):
        parse_pod(make_pod("p").set("spec.priorityClassName", "nope").obj(), {})


@pytest.mark.parametrize(
    ("path", "value", "fragment"),
    [
        (
            "spec.containers",
            [{"name": "c", "resources": {"requests": {"cpu": "1x"}}}],
            "spec.containers[0].resources.requests.cpu",
        ),
        ("spec.tolerations", [{"key": "k", "operator": "Maybe"}], "spec.tolerations[0].operator"),
        (
            "spec.affinity",
            {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {"matchExpressions": [{"key": "k", "operator": "Near"}]}
                        ]
                    }
                }
            },
            "nodeSelectorTerms[0].matchExpressions[0].operator",
        ),
        (
            "spec.topologySpreadConstraints",
            [{"maxSkew": 0, "topologyKey": "z", "whenUnsatisfiable": "DoNotSchedule"}],
            "spec.topologySpreadConstraints[0].maxSkew",
        ),
        ("metadata.labels", ["not", "a", "map"], "metadata.labels"),
    ],
    ids=[
        "a bad cpu quantity names the container and resource",
        "an unknown toleration operator names the toleration",
        "an unknown node selector operator names the expression",
        "a zero maxSkew names the constraint",
        "labels that are not a mapping name the field",
    ],
)
def test_bad_pod_fields_are_reported_with_their_path(
    path: str, value: object, fragment: str
) -> None:
    with pytest.raises(InvalidObject) as err:
        parse_pod(make_pod("bad").set(path, value).obj())
    assert fragment in str(err.value) and "default/bad" in str(err.value)


def test_host_ports_and_images_are_read() -> None:
    pod = make_pod("p").host_port(8080, "UDP", "10.0.0.1").image("nginx").view()
    assert [(hp.ip, hp.protocol, hp.port) for hp in pod.host_ports] == [("10.0.0.1", "UDP", 8080)]
    assert pod.images == ("nginx:latest",)


def test_node_allocatable_falls_back_to_capacity_and_taints_are_read() -> None:
    obj = make_node("n").taint("gpu", "bad").obj()
    obj["status"] = {"capacity": {"cpu": "8", "memory": "16Gi", "pods": "10"}}
    node = parse_node(obj)
    assert node.allocatable.milli_cpu == 8000 and node.allocatable.pods == 10
    assert [str(t) for t in node.taints] == ["{gpu: bad}"]


def test_a_bad_taint_effect_names_the_node_and_field() -> None:
    with pytest.raises(InvalidObject, match=r"Node n: spec.taints\[0\].effect"):
        parse_node(make_node("n").taint("k", "v", "Sometimes").obj())


def test_creation_time_accepts_strings_and_yaml_datetimes() -> None:
    import datetime

    a = make_pod("a").created("2026-01-01T00:00:00Z").view()
    b_obj = make_pod("b").obj()
    b_obj["metadata"]["creationTimestamp"] = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    assert a.creation_time == parse_pod(b_obj).creation_time > 0


@pytest.mark.parametrize(
    ("image", "normalized"),
    [
        ("busybox", "busybox:latest"),
        ("busybox:1.36", "busybox:1.36"),
        ("reg:5000/busybox", "reg:5000/busybox:latest"),
        ("busybox@sha256:abc", "busybox@sha256:abc"),
    ],
    ids=[
        "a bare name means the latest tag",
        "an explicit tag is kept",
        "a registry port is not mistaken for a tag",
        "a digest is kept",
    ],
)
def test_image_names_are_normalized_the_same_way_on_pods_and_nodes(
    image: str, normalized: str
) -> None:
    from batchsched.model.pod import normalized_image

    assert normalized_image(image) == normalized
    node = make_node("n").image([image], 10).view()
    assert dict(node.image_sizes) == {normalized: 10}
    init = make_pod("p").obj()
    init["spec"]["initContainers"] = [{"name": "i", "image": image}]
    assert normalized in parse_pod(init).images


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        pytest.param(
            {"priorityClassName": 5, "containers": []},
            "Pod default/p: spec.priorityClassName: no PriorityClass named '5'",
            id="a field error",
        ),
        pytest.param(
            {"containers": [{"name": "c", "resources": {"requests": {"cpu": "abc"}}}]},
            "Pod default/p: spec.containers[0].resources.requests.cpu: invalid quantity 'abc': ",
            id="a quantity error",
        ),
    ],
)
def test_a_pod_error_names_the_field_once(spec: dict[str, object], expected: str) -> None:
    with pytest.raises(InvalidObject) as caught:
        parse_pod({"metadata": {"name": "p", "namespace": "default", "uid": "u"}, "spec": spec})
    assert str(caught.value).startswith(expected)
