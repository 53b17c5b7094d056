"""parse_pod remembers a container's requests and a pod's tolerations by value (issue #17):
whatever was read before, each pod gets what a fresh parse gives it, and bad input is
refused as without the memory."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from batchsched.model import pod as pod_module
from batchsched.model import pod_spec
from batchsched.model.errors import InvalidObject
from batchsched.model.pod import PodView, parse_pod


def raw_pod(containers: list[object], tolerations: object = None) -> dict[str, Any]:
    spec: dict[str, object] = {"containers": containers}
    if tolerations is not None:
        spec["tolerations"] = tolerations
    return {"metadata": {"name": "p", "namespace": "d", "uid": "u"}, "spec": spec}


def container(image: str = "img:1", **requests: object) -> dict[str, object]:
    return {"name": "c", "image": image, "resources": {"requests": dict(requests)}}


def forgetting(raw: dict[str, Any]) -> PodView | str:
    """A fresh parse, or its error, with nothing remembered."""
    pod_module._CONTAINERS.clear()
    pod_spec._TOLERATIONS.clear()
    return remembering(raw)


def remembering(raw: dict[str, Any]) -> PodView | str:
    try:
        return parse_pod(raw)
    except InvalidObject as err:
        return str(err)


def facts(pod: PodView | str) -> object:
    if isinstance(pod, str):
        return pod
    return (pod.requests, pod.non_zero_milli_cpu, pod.non_zero_memory, pod.images, pod.tolerations)


def test_containers_that_differ_in_requests_limits_or_image_each_get_their_own() -> None:
    first = parse_pod(raw_pod([container(cpu="100m")]))
    more = parse_pod(raw_pod([container(cpu="200m")]))
    other_image = parse_pod(raw_pod([container("img:2", cpu="100m")]))
    unrequested = parse_pod(raw_pod([container()]))
    limited = {"name": "c", "image": "img:1", "resources": {"limits": {"cpu": "300m"}}}
    by_limit = parse_pod(raw_pod([limited]))
    assert (first.requests.milli_cpu, more.requests.milli_cpu) == (100, 200)
    assert other_image.images == ("img:2",)
    assert (unrequested.requests.milli_cpu, by_limit.requests.milli_cpu) == (0, 300)


def test_a_toleration_value_that_is_not_text_is_refused_after_an_equal_integer_was_read() -> None:
    item = {"key": "k", "operator": "Equal", "effect": "NoSchedule"}
    read = parse_pod(raw_pod([container()], [item | {"value": 1}]))
    assert read.tolerations[0].value == "1"
    with pytest.raises(InvalidObject, match="tolerations"):
        parse_pod(raw_pod([container()], [item | {"value": True}]))


def test_a_bad_quantity_is_refused_every_time() -> None:
    for _ in range(2):
        with pytest.raises(InvalidObject, match="cpu"):
            parse_pod(raw_pod([container(cpu="lots")]))


texts = st.sampled_from(["", "1", "100m", "2Gi", "x", "img", "Exists", "Equal", "NoSchedule"])
values = st.one_of(texts, st.integers(-1, 2), st.booleans(), st.none(), st.just(1.0))
names = st.sampled_from(["cpu", "memory", "nvidia.com/gpu", "key", "operator", "value", "effect"])
maps = st.dictionaries(names, values, max_size=3)
containers = st.fixed_dictionaries(
    {"name": st.just("c")},
    optional={
        "image": values,
        "resources": st.fixed_dictionaries({}, optional={"requests": maps, "limits": maps}),
    },
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.lists(containers, min_size=1, max_size=2),
            st.one_of(st.none(), st.lists(maps, max_size=2)),
        ),
        min_size=1,
        max_size=4,
    )
)
def test_what_is_remembered_is_what_a_fresh_parse_gives(
    pods: list[tuple[list[object], object]],
) -> None:
    for containers_, tolerations in pods:
        raw = raw_pod(containers_, tolerations)
        assert facts(remembering(raw)) == facts(forgetting(raw))
