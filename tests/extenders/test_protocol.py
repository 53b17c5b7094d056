"""The extender wire format, both directions, and kube-scheduler's score scaling."""

from __future__ import annotations

import pytest

from batchsched.config import SchedulerConfig, config_from_mapping
from batchsched.extenders.protocol import (
    FilterAnswer,
    ProtocolError,
    binding_args,
    extender_args,
    parse_binding_result,
    parse_filter_result,
    parse_priorities,
    scaled,
)
from batchsched.extenders.settings import ExtenderSettings, check_extenders
from batchsched.framework.runner import ProfileRunner
from tests.builders import make_node, make_pod, snapshot_of


def test_args_to_a_node_cache_capable_extender_carry_node_names_only() -> None:
    pod = make_pod("p", "team").gpus(2).view()
    nodes = [make_node("a").view(), make_node("b").view()]
    args = extender_args(pod, nodes, node_cache_capable=True)
    assert args["NodeNames"] == ["a", "b"]
    assert args["Nodes"] is None
    sent = args["Pod"]
    assert isinstance(sent, dict)
    assert sent["metadata"]["name"] == "p" and sent["metadata"]["namespace"] == "team"
    requests = sent["spec"]["containers"][0]["resources"]["requests"]
    assert requests["nvidia.com/gpu"] == "2"


def test_args_to_other_extenders_carry_whole_nodes() -> None:
    pod = make_pod("p").view()
    nodes = [make_node("a").gpus(8).label("rack", "r1").view()]
    args = extender_args(pod, nodes, node_cache_capable=False)
    assert args["NodeNames"] is None
    items = args["Nodes"]["items"]  # type: ignore[index]
    assert items[0]["metadata"]["name"] == "a"
    assert items[0]["metadata"]["labels"]["rack"] == "r1"
    assert items[0]["status"]["allocatable"]["nvidia.com/gpu"] == "8"


def test_binding_args_use_the_go_field_names() -> None:
    pod = make_pod("p", "team").view()
    assert binding_args(pod, "n1") == {
        "PodName": "p",
        "PodNamespace": "team",
        "PodUID": pod.uid,
        "Node": "n1",
    }


def _nodes(*names: str) -> dict[str, object]:
    return {"items": [{"metadata": {"name": n}} for n in names]}


FILTER_CASES = [
    (
        "node names from a node-cache-capable extender",
        {"NodeNames": ["a"], "FailedNodes": {"b": "no"}},
        True,
        FilterAnswer(frozenset({"a"}), {"b": "no"}, {}),
    ),
    (
        "whole nodes from the others",
        {"Nodes": _nodes("a", "c"), "FailedNodes": {}},
        False,
        FilterAnswer(frozenset({"a", "c"}), {}, {}),
    ),
    (
        "an unresolvable node is not also merely failed",
        {"NodeNames": [], "FailedNodes": {"b": "x"}, "FailedAndUnresolvableNodes": {"b": "y"}},
        True,
        FilterAnswer(frozenset(), {}, {"b": "y"}),
    ),
    (
        "null lists mean no node passed",
        {"Nodes": None, "NodeNames": None, "FailedNodes": None},
        False,
        FilterAnswer(frozenset(), {}, {}),
    ),
]


@pytest.mark.parametrize(
    ("body", "cache_capable", "want"),
    [case[1:] for case in FILTER_CASES],
    ids=[case[0] for case in FILTER_CASES],
)
def test_filter_results_decode_as_kube_scheduler_reads_them(
    body: dict[str, object], cache_capable: bool, want: FilterAnswer
) -> None:
    assert parse_filter_result(body, cache_capable) == want


BAD_FILTER_CASES = [
    ("an Error field", {"Error": "boom"}, "extender error: boom"),
    ("not an object", [], "want a JSON object"),
    ("failed nodes not strings", {"FailedNodes": {"a": 1}}, "FailedNodes"),
    ("a node without a name", {"Nodes": {"items": [{"metadata": {}}]}}, "metadata.name"),
]


@pytest.mark.parametrize(
    ("body", "message"), [c[1:] for c in BAD_FILTER_CASES], ids=[c[0] for c in BAD_FILTER_CASES]
)
def test_a_bad_filter_answer_is_a_protocol_error_saying_what(body: object, message: str) -> None:
    with pytest.raises(ProtocolError, match=message):
        parse_filter_result(body, node_cache_capable=False)


def test_priorities_decode_to_a_score_per_host() -> None:
    body = [{"Host": "a", "Score": 7}, {"Host": "b", "Score": 0}]
    assert parse_priorities(body) == {"a": 7, "b": 0}


@pytest.mark.parametrize("body", [{"Host": "a"}, [{"Host": "a", "Score": "7"}], [{"Score": 1}]])
def test_a_bad_priority_list_is_a_protocol_error(body: object) -> None:
    with pytest.raises(ProtocolError):
        parse_priorities(body)


@pytest.mark.parametrize(
    ("score", "weight", "want"),
    [(0, 5, 0), (10, 1, 100), (10, 5, 500), (3, 2, 60), (7, 1, 70)],
)
def test_scores_scale_by_weight_times_max_node_score_over_max_extender_priority(
    score: int, weight: int, want: int
) -> None:
    assert scaled(score, weight) == want


def test_a_binding_error_is_reported() -> None:
    parse_binding_result({"Error": ""})
    with pytest.raises(ProtocolError, match="bind error: taken"):
        parse_binding_result({"Error": "taken"})


def _settings(**fields: object) -> ExtenderSettings:
    return ExtenderSettings.model_validate({"urlPrefix": "http://e", **fields})


def test_an_extender_is_interested_in_every_pod_without_managed_resources() -> None:
    assert _settings().is_interested(make_pod().view())


def test_an_extender_with_managed_resources_sees_only_pods_asking_for_one() -> None:
    settings = _settings(managedResources=[{"name": "nvidia.com/gpu"}])
    assert settings.is_interested(make_pod().gpus(1).view())
    assert not settings.is_interested(make_pod().cpu("1").view())


@pytest.mark.parametrize(
    ("timeout", "seconds"), [("", 5.0), ("0s", 5.0), ("250ms", 0.25), ("1m", 60.0)]
)
def test_http_timeout_defaults_to_five_seconds_as_in_kube(timeout: str, seconds: float) -> None:
    assert _settings(httpTimeout=timeout).timeout == seconds


def test_two_binders_or_a_weightless_prioritizer_are_refused() -> None:
    binders = (_settings(bindVerb="bind"), _settings(bindVerb="bind"))
    assert check_extenders(binders) == (
        "extenders",
        "only one extender can implement bind, found extenders[0], extenders[1]",
    )
    assert check_extenders((_settings(prioritizeVerb="p"),)) == (
        "extenders[0].weight",
        "must be positive when prioritizeVerb is set",
    )
    assert check_extenders((_settings(prioritizeVerb="p", weight=1),)) is None


def test_a_resource_an_extender_manages_ignored_by_scheduler_is_not_checked_by_fit() -> None:
    def config(ignored: bool) -> SchedulerConfig:
        resource = {"name": "example.com/fpga", "ignoredByScheduler": ignored}
        return config_from_mapping(
            {
                "apiVersion": "kubescheduler.config.k8s.io/v1",
                "kind": "KubeSchedulerConfiguration",
                "profiles": [{"schedulerName": "gpu-scheduler"}],
                "extenders": [{"urlPrefix": "http://e", "managedResources": [resource]}],
            }
        )

    snapshot = snapshot_of([make_node("n")], [])
    pod = make_pod("p").req("example.com/fpga", 1).view()
    for ignored, node in ((True, "n"), (False, None)):
        profile = config(ignored).build_profiles()["gpu-scheduler"]
        assert ProfileRunner(profile).find_node(pod, snapshot).node_name == node
