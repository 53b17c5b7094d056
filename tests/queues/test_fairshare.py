"""Fair-share order: below-guarantee tenants first, then weighted dominant share with history."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from queues.fairshare import dominant_share, gang_order, rank_key, within_guarantee
from queues.model import GPU, Amounts, QuotaPolicy, Tenant
from queues.usage import UsageLedger

HOUR = 3600.0
DAY = 24 * HOUR
CAPACITY: Amounts = {GPU: 64_000, "cpu": 512_000}
ONE_GPU: Amounts = {GPU: 1000, "cpu": 8000}


@pytest.mark.parametrize(
    ("guaranteed", "usage", "demand", "expected"),
    [
        pytest.param(
            {GPU: 4000}, {}, {GPU: 4000}, True, id="a demand exactly at the guarantee fits"
        ),
        pytest.param(
            {GPU: 4000}, {GPU: 3000}, {GPU: 2000}, False, id="usage plus demand over it borrows"
        ),
        pytest.param(
            {GPU: 4000}, {GPU: 3000}, {GPU: 1000}, True, id="usage plus demand at it fits"
        ),
        pytest.param({}, {}, {GPU: 1000}, False, id="no guarantee at all borrows"),
        pytest.param(
            {"cpu": 8000}, {}, {GPU: 1000}, False, id="a guarantee of another resource borrows"
        ),
        pytest.param(
            {GPU: 2000},
            {},
            {GPU: 1000, "cpu": 99_000},
            True,
            id="resources the guarantee does not name do not count",
        ),
        pytest.param(
            {GPU: 2000, "cpu": 8000},
            {},
            {GPU: 1000, "cpu": 9000},
            False,
            id="every named resource must stay inside",
        ),
    ],
)
def test_within_guarantee(
    guaranteed: Amounts, usage: Mapping[str, int], demand: Amounts, expected: bool
) -> None:
    assert within_guarantee(Tenant("t", guaranteed=guaranteed), usage, demand) is expected


@pytest.mark.parametrize(
    ("effective", "weight", "expected"),
    [
        pytest.param({GPU: 16_000.0}, 1.0, 0.25, id="gpus alone"),
        pytest.param({GPU: 16_000.0, "cpu": 256_000.0}, 1.0, 0.5, id="the largest share wins"),
        pytest.param({GPU: 16_000.0}, 2.0, 0.125, id="weight divides the share"),
        pytest.param(
            {"example.com/fpga": 4.0}, 1.0, 0.0, id="a resource the cluster lacks is left out"
        ),
        pytest.param({}, 1.0, 0.0, id="nothing used"),
    ],
)
def test_dominant_share(effective: dict[str, float], weight: float, expected: float) -> None:
    assert dominant_share(effective, CAPACITY, weight) == pytest.approx(expected)


def _flat(**tenants: Tenant) -> QuotaPolicy:
    return QuotaPolicy({name: tenant for name, tenant in tenants.items()})


def test_a_tenant_that_ran_yesterday_ranks_behind_one_that_did_not() -> None:
    policy = _flat(a=Tenant("a"), b=Tenant("b"))
    ledger = UsageLedger(half_life_s=DAY)
    ledger.add(policy, "a", {GPU: 32_000}, now=0.0)
    ledger.remove(policy, "a", {GPU: 32_000}, now=12 * HOUR)
    now = 30 * HOUR  # today, both idle
    a = rank_key(policy, ledger, "a", ONE_GPU, CAPACITY, now)
    b = rank_key(policy, ledger, "b", ONE_GPU, CAPACITY, now)
    assert ledger.current("a") == {}
    assert b < a


def test_yesterday_s_usage_fades_to_nothing_after_many_half_lives() -> None:
    policy = _flat(a=Tenant("a"), b=Tenant("b"))
    ledger = UsageLedger(half_life_s=HOUR)
    ledger.add(policy, "a", {GPU: 32_000}, now=0.0)
    ledger.remove(policy, "a", {GPU: 32_000}, now=HOUR)
    a = rank_key(policy, ledger, "a", ONE_GPU, CAPACITY, 100 * HOUR)
    assert a[0][1] == pytest.approx(0.0, abs=1e-9)


def test_a_tenant_below_its_guarantee_goes_first_even_with_the_larger_share() -> None:
    policy = _flat(a=Tenant("a", guaranteed={GPU: 32_000}), b=Tenant("b"))
    ledger = UsageLedger(half_life_s=DAY)
    ledger.add(policy, "a", {GPU: 16_000}, now=0.0)
    a = rank_key(policy, ledger, "a", ONE_GPU, CAPACITY, 0.0)
    b = rank_key(policy, ledger, "b", ONE_GPU, CAPACITY, 0.0)
    assert len(a) == 1 and a[0][0] == 0 and a[0][1] == pytest.approx(0.25)
    assert b == ((1, 0.0),)
    assert a < b


def test_a_gang_that_would_leave_the_guarantee_ranks_by_share_like_everyone_else() -> None:
    policy = _flat(a=Tenant("a", guaranteed={GPU: 4000}), b=Tenant("b"))
    ledger = UsageLedger(half_life_s=DAY)
    ledger.add(policy, "a", {GPU: 4000}, now=0.0)
    a = rank_key(policy, ledger, "a", ONE_GPU, CAPACITY, 0.0)
    b = rank_key(policy, ledger, "b", ONE_GPU, CAPACITY, 0.0)
    assert a[0][0] == 1
    assert b < a


@pytest.mark.parametrize(
    ("a_gpus", "b_gpus", "first"),
    [
        pytest.param(16_000, 8_000, "tie", id="twice the weight at twice the usage ties"),
        pytest.param(15_000, 8_000, "a", id="twice the weight a little under twice goes first"),
        pytest.param(17_000, 8_000, "b", id="twice the weight above twice yields"),
    ],
)
def test_weights_scale_the_share(a_gpus: int, b_gpus: int, first: str) -> None:
    policy = _flat(a=Tenant("a", weight=2.0), b=Tenant("b", weight=1.0))
    ledger = UsageLedger(half_life_s=DAY)
    ledger.add(policy, "a", {GPU: a_gpus}, now=0.0)
    ledger.add(policy, "b", {GPU: b_gpus}, now=0.0)
    a = rank_key(policy, ledger, "a", ONE_GPU, CAPACITY, 0.0)
    b = rank_key(policy, ledger, "b", ONE_GPU, CAPACITY, 0.0)
    outcome = "tie" if a == b else ("a" if a < b else "b")
    assert outcome == first


TREE = QuotaPolicy(
    {
        "research": Tenant("research", weight=1.0),
        "research/vision": Tenant("research/vision", parent="research", weight=1.0),
        "research/nlp": Tenant("research/nlp", parent="research", weight=3.0),
        "infra": Tenant("infra", weight=1.0),
    }
)


def test_a_team_s_key_has_its_organisation_s_level_first() -> None:
    ledger = UsageLedger(half_life_s=DAY)
    ledger.add(TREE, "research/vision", {GPU: 16_000}, now=0.0)
    key = rank_key(TREE, ledger, "research/vision", ONE_GPU, CAPACITY, 0.0)
    assert [borrows for borrows, _ in key] == [1, 1]
    assert [share for _, share in key] == pytest.approx([0.25, 0.25])


def test_teams_of_one_organisation_are_ordered_by_their_own_weighted_share() -> None:
    ledger = UsageLedger(half_life_s=DAY)
    ledger.add(TREE, "research/vision", {GPU: 8_000}, now=0.0)
    ledger.add(TREE, "research/nlp", {GPU: 16_000}, now=0.0)  # twice the usage, thrice the weight
    vision = rank_key(TREE, ledger, "research/vision", ONE_GPU, CAPACITY, 0.0)
    nlp = rank_key(TREE, ledger, "research/nlp", ONE_GPU, CAPACITY, 0.0)
    assert vision[0] == nlp[0]
    assert nlp < vision


def test_the_organisation_level_decides_before_the_team_level() -> None:
    ledger = UsageLedger(half_life_s=DAY)
    ledger.add(TREE, "research/nlp", {GPU: 32_000}, now=0.0)
    ledger.add(TREE, "infra", {GPU: 8_000}, now=0.0)
    vision = rank_key(TREE, ledger, "research/vision", ONE_GPU, CAPACITY, 0.0)  # idle team
    infra = rank_key(TREE, ledger, "infra", ONE_GPU, CAPACITY, 0.0)
    assert infra < vision


@pytest.mark.parametrize(
    ("earlier", "later"),
    [
        pytest.param((10, 500.0, "b"), (0, 100.0, "a"), id="higher priority first"),
        pytest.param((5, 100.0, "b"), (5, 200.0, "a"), id="then older first"),
        pytest.param((5, 100.0, "a"), (5, 100.0, "b"), id="then by name"),
    ],
)
def test_gang_order_within_a_tenant(
    earlier: tuple[int, float, str], later: tuple[int, float, str]
) -> None:
    assert gang_order(*earlier) < gang_order(*later)
