"""Asking real (loopback) extenders about a pod, with kube-scheduler's semantics."""

from __future__ import annotations

import socket

import pytest

from batchsched.extenders.binding import ExtenderBinding
from batchsched.extenders.client import Breaker, ExtenderClient, ExtenderUnavailable
from batchsched.extenders.fetch import MAX_ASKED_AT_ONCE, ExtenderSet
from batchsched.extenders.settings import ExtenderSettings
from tests.builders import make_node, make_pod
from tests.extenders.fake_extender import Verdicts, serving

NODES = [make_node(n).gpus(8).view() for n in ("a", "b", "c", "d")]


def _settings(url: str, **fields: object) -> ExtenderSettings:
    base = {"urlPrefix": url, "filterVerb": "filter", "prioritizeVerb": "prioritize", "weight": 1}
    return ExtenderSettings.model_validate({**base, **fields})


def _closed_port_url() -> str:
    with socket.socket() as s:  # bound then closed: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


async def test_extenders_filter_in_turn_and_their_scores_add_up_scaled() -> None:
    first = Verdicts(refuse={"a": "busy"}, scores={"b": 10, "c": 5})
    second = Verdicts(unresolvable={"b": "wrong rack"}, scores={"c": 2, "d": 10})
    async with serving(first) as url1, serving(second) as url2:
        extenders = ExtenderSet(
            [
                ExtenderClient(_settings(url1, weight=2)),
                ExtenderClient(_settings(url2, nodeCacheCapable=True)),
            ]
        )
        verdict = await extenders.ask(make_pod().view(), NODES)
        await extenders.close()
    assert verdict.allowed == frozenset({"c", "d"})
    assert verdict.failed == {"a": "busy"}
    assert verdict.unresolvable == {"b": "wrong rack"}
    # c: 5*2*10 + 2*1*10; d: 0 + 10*1*10 (prioritize sees only the nodes that passed)
    assert verdict.scores == {"c": 120, "d": 100}
    assert verdict.weight == 3
    # the second extender was asked only about what the first let through, by name
    assert second.calls[0][1]["NodeNames"] == ["b", "c", "d"]
    assert first.calls[0][1]["NodeNames"] is None


async def test_an_ignorable_extender_that_is_down_is_skipped() -> None:
    client = ExtenderClient(_settings(_closed_port_url(), ignorable=True))
    verdict = await ExtenderSet([client]).ask(make_pod().view(), NODES)
    await client.close()
    assert verdict.error == ""
    assert verdict.allowed is None  # no extender filtered: every node passes


async def test_a_non_ignorable_extender_that_is_down_fails_the_pod_with_its_error() -> None:
    url = _closed_port_url()
    client = ExtenderClient(_settings(url))
    verdict = await ExtenderSet([client]).ask(make_pod().view(), NODES)
    await client.close()
    assert verdict.error.startswith(f"extender {url} filter failed:")


async def test_an_extender_slower_than_its_http_timeout_counts_as_failed() -> None:
    slow = Verdicts(delay=2.0)
    async with serving(slow) as url:
        client = ExtenderClient(_settings(url, httpTimeout="100ms"))
        verdict = await ExtenderSet([client]).ask(make_pod().view(), NODES)
        await client.close()
    assert "no answer in 0.1s" in verdict.error


async def test_the_breaker_opens_after_failures_and_stops_calling() -> None:
    now = [0.0]
    url = _closed_port_url()
    breaker = Breaker(threshold=2, cooldown=30.0)
    client = ExtenderClient(_settings(url), now=lambda: now[0], breaker=breaker)
    extenders = ExtenderSet([client])
    for _ in range(2):
        await extenders.ask(make_pod().view(), NODES)
    verdict = await extenders.ask(make_pod().view(), NODES)
    assert "circuit open" in verdict.error
    now[0] = 31.0  # half open: one call goes through again (and fails: still down)
    verdict = await extenders.ask(make_pod().view(), NODES)
    assert "circuit open" not in verdict.error
    await client.close()


async def test_a_failing_prioritizer_is_skipped_even_when_not_ignorable() -> None:
    good = Verdicts(scores={"a": 4})
    async with serving(good) as url:
        broken = ExtenderClient(_settings(_closed_port_url(), filterVerb=""))
        ok = ExtenderClient(_settings(url))
        verdict = await ExtenderSet([broken, ok]).ask(make_pod().view(), NODES)
        await ExtenderSet([broken, ok]).close()
    assert verdict.error == ""
    assert verdict.scores == {"a": 40, "b": 0, "c": 0, "d": 0}


async def test_only_pods_asking_for_a_managed_resource_go_to_the_extender() -> None:
    seen = Verdicts()
    async with serving(seen) as url:
        client = ExtenderClient(_settings(url, managedResources=[{"name": "nvidia.com/gpu"}]))
        extenders = ExtenderSet([client])
        cpu_pod, gpu_pod = make_pod("cpu").cpu("1").view(), make_pod("gpu").gpus(1).view()
        await extenders.prefetch([cpu_pod, gpu_pod], NODES)
        await client.close()
    assert extenders.verdict(cpu_pod) is None
    assert extenders.verdict(gpu_pod) is not None
    assert [call[1]["Pod"]["metadata"]["name"] for call in seen.calls] == ["gpu", "gpu"]  # type: ignore[index]


async def test_the_binder_extender_binds_with_the_go_field_names_and_reports_its_error() -> None:
    answers = iter(["", "node n9 is gone"])

    async def bind(args: dict[str, object]) -> str:
        return next(answers)

    seen = Verdicts(bind=bind)
    async with serving(seen) as url:
        binding = ExtenderBinding(ExtenderClient(_settings(url, bindVerb="bind")))
        pod = make_pod("p", "team").view()
        await binding.bind(pod, "n1")
        with pytest.raises(ExtenderUnavailable, match="node n9 is gone"):
            await binding.bind(pod, "n9")
        await binding.close()
    assert seen.calls[0] == (
        "bind",
        {"PodName": "p", "PodNamespace": "team", "PodUID": pod.uid, "Node": "n1"},
    )


async def test_pods_of_distinct_signatures_are_asked_about_a_few_at_a_time() -> None:
    verdicts = Verdicts(refuse={"a": "no"}, delay=0.01)
    pods = [make_pod(f"p{i}").label("member", str(i)).view() for i in range(30)]
    async with serving(verdicts) as url:
        extenders = ExtenderSet([ExtenderClient(_settings(url))])
        await extenders.prefetch(pods, NODES)
        await extenders.close()
    assert MAX_ASKED_AT_ONCE == 8
    assert verdicts.most_in_flight <= 8
    assert len([c for c, _ in verdicts.calls if c == "filter"]) == 30
    assert all(extenders.verdict(p).allowed == frozenset("bcd") for p in pods)  # type: ignore[union-attr]
