"""The usage ledger: current usage along a tenant's path, and history that halves per half-life."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from queues.model import GPU, QuotaPolicy, Tenant
from queues.usage import UsageLedger

HOUR = 3600.0
FLAT = QuotaPolicy({"a": Tenant("a"), "b": Tenant("b")})
TREE = QuotaPolicy(
    {
        "research": Tenant("research"),
        "research/vision": Tenant("research/vision", parent="research"),
        "research/nlp": Tenant("research/nlp", parent="research"),
    }
)


def test_what_a_tenant_used_one_half_life_ago_weighs_half() -> None:
    ledger = UsageLedger(half_life_s=HOUR)
    ledger.add(FLAT, "a", {GPU: 8000}, now=0.0)
    ledger.remove(FLAT, "a", {GPU: 8000}, now=60.0)
    right_after = ledger.effective("a", 60.0)[GPU]
    one_half_life_later = ledger.effective("a", 60.0 + HOUR)[GPU]
    two_half_lives_later = ledger.effective("a", 60.0 + 2 * HOUR)[GPU]
    assert right_after > 0
    assert one_half_life_later == pytest.approx(right_after / 2, rel=1e-9)
    assert two_half_lives_later == pytest.approx(right_after / 4, rel=1e-9)


def test_a_tenant_that_just_started_counts_only_what_it_uses_now() -> None:
    ledger = UsageLedger(half_life_s=HOUR)
    ledger.add(FLAT, "a", {GPU: 2000, "cpu": 16000}, now=5.0)
    assert ledger.effective("a", 5.0) == {GPU: 2000, "cpu": 16000}
    assert ledger.current("a") == {GPU: 2000, "cpu": 16000}


def test_a_tenant_running_steadily_for_long_counts_twice_its_usage() -> None:
    ledger = UsageLedger(half_life_s=HOUR)
    ledger.add(FLAT, "a", {GPU: 1000}, now=0.0)
    assert ledger.effective("a", 40 * HOUR)[GPU] == pytest.approx(2000, rel=1e-6)


def test_history_after_a_short_run_is_the_run_s_gpu_seconds_per_tau() -> None:
    ledger = UsageLedger(half_life_s=HOUR)
    ledger.add(FLAT, "a", {GPU: 1000}, now=0.0)
    ledger.remove(FLAT, "a", {GPU: 1000}, now=10.0)
    tau = HOUR / math.log(2)
    expected = 1000 * tau * (1 - math.exp(-10.0 / tau)) / tau
    assert ledger.effective("a", 10.0)[GPU] == pytest.approx(expected, rel=1e-9)
    assert ledger.current("a") == {}


def test_a_team_s_usage_is_also_its_organisation_s_and_not_its_sibling_s() -> None:
    ledger = UsageLedger(half_life_s=HOUR)
    ledger.add(TREE, "research/vision", {GPU: 3000}, now=0.0)
    ledger.add(TREE, "research/nlp", {GPU: 1000}, now=1.0)
    assert ledger.current("research") == {GPU: 4000}
    assert ledger.current("research/vision") == {GPU: 3000}
    assert ledger.current("research/nlp") == {GPU: 1000}
    ledger.remove(TREE, "research/vision", {GPU: 3000}, now=2.0)
    assert ledger.current("research") == {GPU: 1000}
    assert ledger.current("research/vision") == {}
    assert ledger.tenants() == ["research", "research/nlp", "research/vision"]


def test_versions_move_on_the_changed_path_only() -> None:
    ledger = UsageLedger(half_life_s=HOUR)
    before_vision = ledger.versions(TREE, "research/vision")
    before_nlp = ledger.versions(TREE, "research/nlp")
    ledger.add(TREE, "research/vision", {GPU: 1000}, now=0.0)
    after_vision = ledger.versions(TREE, "research/vision")
    after_nlp = ledger.versions(TREE, "research/nlp")
    assert before_vision == (0, 0) and after_vision == (1, 1)
    # the organisation moved (the sibling's rank depends on it), the sibling itself did not
    assert before_nlp == (0, 0) and after_nlp == (1, 0)


def test_an_unknown_tenant_uses_nothing() -> None:
    ledger = UsageLedger(half_life_s=HOUR)
    assert ledger.current("nobody") == {}
    assert ledger.effective("nobody", 100.0) == {}


@pytest.mark.parametrize("half_life", [0.0, -1.0], ids=["zero", "negative"])
def test_a_half_life_that_is_not_positive_is_refused(half_life: float) -> None:
    with pytest.raises(ValueError, match="half_life_s must be positive"):
        UsageLedger(half_life_s=half_life)


@given(
    st.lists(st.floats(0.0, 10 * HOUR, allow_nan=False), min_size=1, max_size=6),
    st.integers(1, 8000),
)
def test_history_does_not_depend_on_how_often_the_ledger_is_touched(
    touches: list[float], gpus: int
) -> None:
    """Bringing history forward in several steps equals one step (the decay is exact)."""
    once, often = UsageLedger(HOUR), UsageLedger(HOUR)
    for ledger in (once, often):
        ledger.add(FLAT, "a", {GPU: gpus}, now=0.0)
    for at in sorted(touches):
        often.add(FLAT, "a", {GPU: 0}, now=at)  # a change of nothing: the history moves on
    end = 10 * HOUR
    assert often.effective("a", end)[GPU] == pytest.approx(once.effective("a", end)[GPU])
