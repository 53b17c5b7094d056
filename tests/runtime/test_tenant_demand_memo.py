"""A pod's quota demand is computed once and remembered (issue #17: it was computed again
when the watch confirmed each bind), yet follows every change that alters it: an in-place
resize of the pod's requests, a new GPU-share annotation, another node's GPU model."""

from __future__ import annotations

import pytest

import batchsched.tenants as tenants_module
from batchsched.model.pod import PodView
from gpu.requests import GPU_MILLI_ANNOTATION
from queues.demand import PRODUCT_LABEL, pod_demand
from queues.model import flavor_key
from tests.builders import make_node, make_pod
from tests.runtime.test_tenants import TEAM_A, harness


@pytest.fixture
def computed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the pods whose demand was computed, in order."""
    seen: list[str] = []
    real = pod_demand

    def counting(pod: PodView, *args: object) -> dict[str, int]:
        seen.append(pod.name)
        return real(pod, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(tenants_module, "pod_demand", counting)
    return seen


def test_the_watch_s_confirmation_of_a_bind_reuses_the_demand_counted_at_assume(
    computed: list[str],
) -> None:
    h = harness()
    pending = make_pod("a", "ns-a").gpus(2).annotation("team", "x")
    h.cache.assume(pending.view(), "n1")
    h.cache.add_pod(pending.node("n1").view())  # a fresh parse: equal, not the same objects
    assert computed == ["a"]
    assert h.gpus(TEAM_A) == 2000


def test_an_in_place_resize_is_counted_at_its_new_size() -> None:
    h = harness()
    pod = make_pod("a", "ns-a").gpus(2)
    h.cache.assume(pod.view(), "n1")
    h.cache.add_pod(pod.node("n1").view())
    h.cache.add_pod(pod.gpus(1).cpu("3").node("n1").view())  # requests resized in place
    assert h.gpus(TEAM_A) == 1000
    assert h.layer.ledger.current(TEAM_A).get("cpu") == 3000


def test_a_new_gpu_share_annotation_is_counted_anew() -> None:
    h = harness()
    pod = make_pod("a", "ns-a").annotation(GPU_MILLI_ANNOTATION, "250")
    h.cache.add_pod(pod.node("n1").view())
    h.cache.add_pod(pod.annotation(GPU_MILLI_ANNOTATION, "500").node("n1").view())
    assert h.gpus(TEAM_A) == 500


def test_the_same_pod_on_a_node_of_another_gpu_model_counts_that_model() -> None:
    h = harness()
    h.cache.add_node(make_node("n2").gpus(8).label(PRODUCT_LABEL, "A100").view())
    pod = make_pod("a", "ns-a").gpus(1)
    h.cache.assume(pod.view(), "n1")
    h.cache.forget(pod.view())
    h.cache.assume(pod.view(), "n2")
    current = h.layer.ledger.current(TEAM_A)
    assert (current.get(flavor_key("A100")), current.get(flavor_key("H100"), 0)) == (1000, 0)
