"""The Extenders plugin: fetched extender verdicts applied by the framework as kube applies
an extender's filter and prioritize answers."""

from __future__ import annotations

from batchsched.config import default_config
from batchsched.framework.runner import ProfileRunner
from batchsched.framework.status import Code
from batchsched.model.pod import PodView
from batchsched.plugins.extenders import (
    FILTERED_OUT,
    ExtenderVerdict,
    verdict_source,
    with_extenders,
)
from tests.builders import make_node, make_pod, snapshot_of


class Fixed:
    def __init__(self, verdict: ExtenderVerdict | None) -> None:
        self.given = verdict

    def verdict(self, pod: PodView) -> ExtenderVerdict | None:
        return self.given


def _runner(verdict: ExtenderVerdict | None, weight: int = 1) -> ProfileRunner:
    profiles = with_extenders(default_config().build_profiles(), Fixed(verdict), weight)
    return ProfileRunner(next(iter(profiles.values())))


def _nodes() -> list[object]:
    return [make_node(n).cpu("8").memory("16Gi").pods(10) for n in ("a", "b", "c")]


def test_a_pod_lands_only_on_a_node_the_extenders_allowed() -> None:
    snapshot = snapshot_of(_nodes(), [])  # type: ignore[arg-type]
    verdict = ExtenderVerdict(allowed=frozenset({"c"}), failed={"a": "no GPU quota"})
    result = _runner(verdict).schedule_one(make_pod().cpu("1").view(), snapshot)
    assert result.node_name == "c"


def test_when_no_node_is_allowed_the_message_says_why_per_node() -> None:
    snapshot = snapshot_of(_nodes(), [])  # type: ignore[arg-type]
    verdict = ExtenderVerdict(
        allowed=frozenset(), failed={"a": "no GPU quota"}, unresolvable={"b": "wrong zone"}
    )
    result = _runner(verdict).schedule_one(make_pod().cpu("1").view(), snapshot)
    assert not result.placed
    message = result.message()
    assert "no GPU quota" in message and "wrong zone" in message and FILTERED_OUT in message
    assert result.failure is not None
    codes = {s.code for s in result.failure.node_statuses.values()}
    assert Code.UNSCHEDULABLE_AND_UNRESOLVABLE in codes


def test_extender_scores_decide_between_nodes_the_plugins_rate_alike() -> None:
    snapshot = snapshot_of(_nodes(), [])  # type: ignore[arg-type]
    verdict = ExtenderVerdict(scores={"a": 0, "b": 500, "c": 100}, weight=5)
    result = _runner(verdict, weight=5).schedule_one(make_pod().cpu("1").view(), snapshot)
    assert result.node_name == "b"


def test_a_non_ignorable_extender_error_fails_the_cycle_with_its_message() -> None:
    snapshot = snapshot_of(_nodes(), [])  # type: ignore[arg-type]
    verdict = ExtenderVerdict(error="extender http://e filter failed: refused")
    result = _runner(verdict).schedule_one(make_pod().cpu("1").view(), snapshot)
    assert result.status.code is Code.ERROR
    assert "filter failed: refused" in result.message()


def test_a_pod_no_extender_is_interested_in_is_scheduled_as_without_extenders() -> None:
    snapshot = snapshot_of(_nodes(), [])  # type: ignore[arg-type]
    result = _runner(None).schedule_one(make_pod().cpu("1").view(), snapshot)
    assert result.placed


def test_the_profiles_name_the_source_they_read() -> None:
    source = Fixed(None)
    profiles = with_extenders(default_config().build_profiles(), source, 1)
    assert verdict_source(profiles) is source
    assert verdict_source(default_config().build_profiles()) is None
