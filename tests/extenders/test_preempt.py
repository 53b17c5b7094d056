"""preemptVerb: ExtenderPreemptionArgs/Result on the wire, and kube's callExtenders semantics
against real loopback extenders (order, interest, ignorable, narrowing, nodes left out)."""

from __future__ import annotations

import pytest

from batchsched.extenders.client import ExtenderClient
from batchsched.extenders.preempt import Candidate, ExtenderPreemption
from batchsched.extenders.protocol import (
    ProtocolError,
    parse_preemption_result,
    preemption_args,
)
from batchsched.extenders.settings import ExtenderSettings
from batchsched.model.pod import PodView
from tests.builders import make_pod
from tests.extenders.fake_extender import Verdicts, keeping, meta_victims, serving

PREEMPTOR = make_pod("p").gpus(8).priority(1000).view()
V1 = make_pod("v1").gpus(4).node("n1").view()
V2 = make_pod("v2").gpus(4).node("n1").view()
V3 = make_pod("v3").gpus(8).node("n2").view()


def test_a_node_cache_capable_extender_is_sent_the_victims_uids() -> None:
    args = preemption_args(PREEMPTOR, {"n1": ((V1, V2), 1)}, node_cache_capable=True)
    assert args["NodeNameToVictims"] is None
    assert args["NodeNameToMetaVictims"] == {
        "n1": {"Pods": [{"UID": V1.uid}, {"UID": V2.uid}], "NumPDBViolations": 1}
    }
    assert args["Pod"]["metadata"]["name"] == "p"  # type: ignore[index]


def test_another_extender_is_sent_the_victims_whole() -> None:
    args = preemption_args(PREEMPTOR, {"n1": ((V1,), 0)}, node_cache_capable=False)
    assert args["NodeNameToMetaVictims"] is None
    sent = args["NodeNameToVictims"]["n1"]  # type: ignore[index]
    assert sent["NumPDBViolations"] == 0
    assert [p["metadata"]["uid"] for p in sent["Pods"]] == [V1.uid]


def test_a_preemption_result_is_read_as_victim_uids_by_node() -> None:
    body = {"NodeNameToMetaVictims": {"n1": {"Pods": [{"UID": "a"}], "NumPDBViolations": 0}}}
    assert parse_preemption_result(body) == {"n1": frozenset({"a"})}
    assert parse_preemption_result({"NodeNameToMetaVictims": None}) == {}


@pytest.mark.parametrize(
    "body",
    [
        pytest.param([], id="not an object"),
        pytest.param({"NodeNameToMetaVictims": {"n1": {"Pods": [{"UID": 3}]}}}, id="uid not text"),
        pytest.param({"NodeNameToMetaVictims": {"n1": {"Pods": {}}}}, id="pods not a list"),
    ],
)
def test_a_malformed_preemption_result_is_a_protocol_error(body: object) -> None:
    with pytest.raises(ProtocolError):
        parse_preemption_result(body)


def settings(url: str, **fields: object) -> ExtenderSettings:
    return ExtenderSettings.model_validate(
        {"urlPrefix": url, "preemptVerb": "preempt", "nodeCacheCapable": True, **fields}
    )


def candidates() -> dict[str, Candidate]:
    return {"n1": Candidate((V1, V2)), "n2": Candidate((V3,))}


def uids(answer: object) -> dict[str, list[str]]:
    assert isinstance(answer, dict)
    return {node: sorted(v.name for v in c.victims) for node, c in answer.items()}


async def ask(*entries: ExtenderSettings, pod: PodView = PREEMPTOR) -> object:
    preemption = ExtenderPreemption([ExtenderClient(e) for e in entries])
    try:
        return await preemption.process(pod, candidates())
    finally:
        await preemption.close()


async def test_victims_the_extender_leaves_out_are_no_victims_any_more() -> None:
    verdicts = Verdicts(preempt=lambda args: keeping({"n1": [V2.uid], "n2": [V3.uid]}))
    async with serving(verdicts) as url:
        answer = await ask(settings(url))
    assert uids(answer) == {"n1": ["v2"], "n2": ["v3"]}


async def test_nodes_the_extender_leaves_out_are_no_candidates_and_the_next_sees_the_rest() -> None:
    first = Verdicts(preempt=lambda args: keeping({"n2": [V3.uid]}))
    second = Verdicts()
    async with serving(first) as a, serving(second) as b:
        answer = await ask(settings(a), settings(b))
    assert uids(answer) == {"n2": ["v3"]}
    assert [meta_victims(args) for _, args in second.calls] == [{"n2": [V3.uid]}]


async def test_victims_the_extender_adds_are_not_taken() -> None:
    verdicts = Verdicts(preempt=lambda args: keeping({"n1": [V1.uid, "someone-else"]}))
    async with serving(verdicts) as url:
        answer = await ask(settings(url))
    assert uids(answer) == {"n1": ["v1"]}


async def test_a_node_kept_without_victims_is_an_error_unless_the_extender_is_ignorable() -> None:
    verdicts = Verdicts(preempt=lambda args: keeping({"n1": [], "n2": [V3.uid]}))
    async with serving(verdicts) as url:
        strict = await ask(settings(url))
        lenient = await ask(settings(url, ignorable=True))
    assert isinstance(strict, str) and "expected a victim pod on node n1" in strict
    assert uids(lenient) == {"n2": ["v3"]}


async def test_an_extender_that_fails_stops_the_preemption_unless_it_is_ignorable() -> None:
    down = "http://127.0.0.1:9"
    strict = await ask(settings(down, httpTimeout="1s"))
    lenient = await ask(settings(down, httpTimeout="1s", ignorable=True))
    assert isinstance(strict, str) and f"extender {down} preempt failed" in strict
    assert uids(lenient) == {"n1": ["v1", "v2"], "n2": ["v3"]}


async def test_an_extender_not_interested_in_the_preemptor_is_not_asked() -> None:
    verdicts = Verdicts(preempt=lambda args: keeping({}))
    async with serving(verdicts) as url:
        answer = await ask(settings(url, managedResources=[{"name": "example.com/fpga"}]))
    assert verdicts.calls == []
    assert uids(answer) == {"n1": ["v1", "v2"], "n2": ["v3"]}


async def test_a_whole_pod_extender_gets_the_victims_and_answers_with_uids() -> None:
    verdicts = Verdicts()
    async with serving(verdicts) as url:
        answer = await ask(settings(url, nodeCacheCapable=False))
    assert uids(answer) == {"n1": ["v1", "v2"], "n2": ["v3"]}
    ((_, args),) = verdicts.calls
    assert args["NodeNameToMetaVictims"] is None
