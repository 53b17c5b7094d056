"""The Extenders plugin: fetched extender verdicts applied by the framework as kube applies
an extender's filter and prioritize answers."""

from __future__ import annotations

from batchsched.config import default_config
from batchsched.framework.cycle_state import CycleState
from batchsched.framework.runner import ProfileRunner
from batchsched.framework.status import Code
from batchsched.model.pod import PodView
from batchsched.plugins.extenders import (
    FILTERED_OUT,
    ExtenderBinder,
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


class Binder:
    def __init__(self, interested: bool, fails: bool, ignorable: bool = False) -> None:
        self._interested, self._fails, self.ignorable = interested, fails, ignorable
        self.bound: list[tuple[str, str]] = []

    def interested(self, pod: PodView) -> bool:
        return self._interested

    async def bind(self, pod: PodView, node_name: str) -> None:
        if self._fails:
            raise RuntimeError("extender said no")
        self.bound.append((pod.name, node_name))


def test_the_binder_extender_comes_first_at_bind() -> None:
    profiles = with_extenders(default_config().build_profiles(), None, 0, Binder(True, False))
    bind = next(iter(profiles.values())).bind
    assert [p.name for p in bind] == ["ExtenderBinder", "DefaultBinder"]


async def test_the_binder_extender_binds_pods_it_wants_and_passes_the_others_on() -> None:
    wants, declines = Binder(True, False), Binder(False, False)
    pod = make_pod("p").view()
    assert (await ExtenderBinder(wants).bind(CycleState(), pod, "n1")).code is Code.SUCCESS
    assert wants.bound == [("p", "n1")]
    assert (await ExtenderBinder(declines).bind(CycleState(), pod, "n1")).code is Code.SKIP


async def test_a_failing_binder_extender_fails_the_binding_unless_ignorable() -> None:
    pod = make_pod("p").view()
    failed = await ExtenderBinder(Binder(True, True)).bind(CycleState(), pod, "n1")
    assert failed.code is Code.ERROR
    assert "through the extender: extender said no" in failed.message()
    ignored = await ExtenderBinder(Binder(True, True, ignorable=True)).bind(CycleState(), pod, "n1")
    assert ignored.code is Code.SKIP  # DefaultBinder binds it
