"""Admission: priority range, max on every tenant of the path, protected idle guarantees,
and what a gang borrows. Every refusal's message is checked word for word."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from queues.model import GPU, Amounts, QuotaPolicy, Tenant, flavor_key
from queues.quota import Admission, check_admission
from queues.usage import UsageLedger

H100 = flavor_key("NVIDIA-H100-80GB-HBM3")
CAPACITY: Amounts = {GPU: 32_000, H100: 16_000, "cpu": 256_000}

POLICY = QuotaPolicy(
    {
        "research": Tenant(
            "research",
            guaranteed={GPU: 8000},
            max={GPU: 16_000, H100: 4000},
            min_priority=0,
            max_priority=1000,
        ),
        "research/vision": Tenant(
            "research/vision",
            parent="research",
            guaranteed={GPU: 4000},
            max={GPU: 12_000},
            min_priority=100,
        ),
        "research/nlp": Tenant("research/nlp", parent="research", guaranteed={GPU: 4000}),
        "prod": Tenant("prod", guaranteed={GPU: 8000}, lend_idle=False),
        "batch": Tenant("batch"),
    }
)


@dataclass
class Case:
    tenant: str
    demand: Amounts
    priority: int = 500
    usage: dict[str, Amounts] = field(default_factory=dict)  # leaf tenant -> running amounts
    admitted: bool = True
    reason: str = ""
    borrowed: Amounts = field(default_factory=dict)


def _admit(policy: QuotaPolicy, case: Case) -> Admission:
    ledger = UsageLedger(half_life_s=3600.0)
    in_use: dict[str, int] = {}
    for tenant, amounts in case.usage.items():
        ledger.add(policy, tenant, amounts, now=0.0)
        for name, amount in amounts.items():
            in_use[name] = in_use.get(name, 0) + amount
    return check_admission(
        policy, ledger, case.tenant, case.demand, case.priority, CAPACITY, in_use
    )


CASES = [
    pytest.param(
        Case("research/vision", {GPU: 2000}, borrowed={}),
        id="a gang inside its guarantee is admitted and borrows nothing",
    ),
    pytest.param(
        Case(
            "research/vision",
            {GPU: 2000},
            priority=50,
            admitted=False,
            reason="priority 50 is outside tenant research/vision's allowed range 100..",
        ),
        id="a priority below the team's minimum is refused",
    ),
    pytest.param(
        Case(
            "research/nlp",
            {GPU: 1000},
            priority=2000,
            admitted=False,
            reason="priority 2000 is outside tenant research's allowed range 0..1000",
        ),
        id="the organisation's priority range binds its teams",
    ),
    pytest.param(
        Case("batch", {GPU: 1000}, priority=-5, borrowed={GPU: 1000}),
        id="a tenant without a range takes any priority",
    ),
    pytest.param(
        Case(
            "research/vision",
            {GPU: 3000},
            usage={"research/vision": {GPU: 10_000}},
            admitted=False,
            reason="tenant research/vision would exceed its max 12 nvidia.com/gpu: "
            "10 nvidia.com/gpu in use + 3 nvidia.com/gpu requested",
        ),
        id="a team over its own max is refused",
    ),
    pytest.param(
        Case(
            "research/vision",
            {GPU: 2000},
            usage={"research/vision": {GPU: 10_000}},
            borrowed={GPU: 2000},
        ),
        id="a team exactly at its max is admitted",
    ),
    pytest.param(
        Case(
            "research/nlp",
            {GPU: 2500},
            usage={"research/vision": {GPU: 8000}, "research/nlp": {GPU: 6000}},
            admitted=False,
            reason="tenant research would exceed its max 16 nvidia.com/gpu: "
            "14 nvidia.com/gpu in use + 2.5 nvidia.com/gpu requested",
        ),
        id="a team inside its own max is refused when its organisation would exceed its max",
    ),
    pytest.param(
        Case(
            "research/nlp",
            {GPU: 1000, H100: 1000},
            usage={"research/vision": {H100: 4000}},
            admitted=False,
            reason="tenant research would exceed its max 4 nvidia.com/gpu@NVIDIA-H100-80GB-HBM3: "
            "4 nvidia.com/gpu@NVIDIA-H100-80GB-HBM3 in use + "
            "1 nvidia.com/gpu@NVIDIA-H100-80GB-HBM3 requested",
        ),
        id="a per-model max binds GPUs of that model",
    ),
    pytest.param(
        Case("research/nlp", {"cpu": 200_000}, borrowed={"cpu": 200_000}),
        id="a resource no max names has no limit",
    ),
    pytest.param(
        Case(
            "research/vision",
            {GPU: 3000},
            usage={"research/vision": {GPU: 2000}},
            borrowed={GPU: 1000},
        ),
        id="what lands above the team's guarantee is borrowed",
    ),
    pytest.param(
        Case("batch", {GPU: 16_000, "cpu": 8000}, borrowed={GPU: 16_000, "cpu": 8000}),
        id="a tenant with no guarantee borrows all it uses, up to the non-lending idle guarantee",
    ),
    pytest.param(
        Case(
            "batch",
            {GPU: 25_000},
            admitted=False,
            reason="borrowing 25 nvidia.com/gpu would take idle guaranteed quota that tenants "
            "not lending it keep (8 nvidia.com/gpu reserved, 32 nvidia.com/gpu free)",
        ),
        id="borrowing into a non-lending tenant's idle guarantee is refused",
    ),
    pytest.param(
        Case(
            "batch",
            {GPU: 25_000},
            usage={"prod": {GPU: 1000}},
            admitted=False,
            reason="borrowing 25 nvidia.com/gpu would take idle guaranteed quota that tenants "
            "not lending it keep (7 nvidia.com/gpu reserved, 31 nvidia.com/gpu free)",
        ),
        id="only the idle part of a non-lending guarantee is kept",
    ),
    pytest.param(
        Case("batch", {GPU: 24_000}, usage={"prod": {GPU: 1000}}, borrowed={GPU: 24_000}),
        id="borrowing up to the kept idle guarantee is admitted",
    ),
    pytest.param(
        Case(
            "batch",
            {GPU: 16_000},
            usage={"prod": {GPU: 8000}, "research/nlp": {GPU: 8000}},
            borrowed={GPU: 16_000},
        ),
        id="a non-lending tenant using all of its guarantee keeps nothing idle",
    ),
    pytest.param(
        Case("prod", {GPU: 8000}, usage={"batch": {GPU: 24_000}}),
        id="a non-lending tenant inside its own guarantee is never refused by it",
    ),
    pytest.param(
        Case("batch", {GPU: 8000}, usage={"research/nlp": {GPU: 16_000}}, borrowed={GPU: 8000}),
        id="a lending organisation's idle guarantee may be borrowed",
    ),
]


@pytest.mark.parametrize("case", CASES)
def test_check_admission(case: Case) -> None:
    admission = _admit(POLICY, case)
    assert (admission.admitted, admission.reason) == (case.admitted, case.reason)
    if case.admitted:
        assert admission.borrowed == case.borrowed
        assert admission.reclaimable is bool(case.borrowed)


def test_a_refused_gang_borrows_nothing_and_is_not_reclaimable() -> None:
    admission = _admit(POLICY, Case("batch", {GPU: 25_000}))
    assert not admission.admitted
    assert admission.borrowed == {}
    assert not admission.reclaimable


NESTED = QuotaPolicy(
    {
        "org": Tenant("org", guaranteed={GPU: 8000}, lend_idle=True),
        "org/keep": Tenant("org/keep", parent="org", guaranteed={GPU: 4000}, lend_idle=False),
        "org/give": Tenant("org/give", parent="org", guaranteed={GPU: 4000}),
        "locked": Tenant("locked", guaranteed={GPU: 8000}, lend_idle=False),
        "locked/a": Tenant("locked/a", parent="locked", guaranteed={GPU: 4000}, lend_idle=False),
        "locked/b": Tenant("locked/b", parent="locked", guaranteed={GPU: 4000}, lend_idle=False),
        "other": Tenant("other"),
    }
)


@pytest.mark.parametrize(
    ("case"),
    [
        pytest.param(
            Case(
                "other",
                {GPU: 21_000},
                admitted=False,
                reason="borrowing 21 nvidia.com/gpu would take idle guaranteed quota that "
                "tenants not lending it keep (12 nvidia.com/gpu reserved, "
                "32 nvidia.com/gpu free)",
            ),
            id="a non-lending team of a lending organisation keeps its idle guarantee",
        ),
        pytest.param(
            Case("other", {GPU: 20_000}, borrowed={GPU: 20_000}),
            id="a non-lending organisation's guarantee is counted once, not again per team",
        ),
        pytest.param(
            Case(
                "org/give",
                {GPU: 25_000},
                admitted=False,
                reason="borrowing 25 nvidia.com/gpu would take idle guaranteed quota that "
                "tenants not lending it keep (12 nvidia.com/gpu reserved, "
                "32 nvidia.com/gpu free)",
            ),
            id="a non-lending sibling team keeps its idle guarantee",
        ),
        pytest.param(
            Case(
                "locked/a", {GPU: 24_000}, usage={"org/keep": {GPU: 4000}}, borrowed={GPU: 20_000}
            ),
            id="a gang's own organisation's guarantee is not kept from it",
        ),
        pytest.param(
            Case(
                "locked/a",
                {GPU: 25_000},
                usage={"org/keep": {GPU: 4000}},
                admitted=False,
                reason="borrowing 25 nvidia.com/gpu would take idle guaranteed quota that "
                "tenants not lending it keep (4 nvidia.com/gpu reserved, "
                "28 nvidia.com/gpu free)",
            ),
            id="a non-lending sibling team's guarantee is kept inside a non-lending organisation",
        ),
        pytest.param(
            Case(
                "org/give",
                {GPU: 4000},
                usage={"org/keep": {GPU: 12_000}, "other": {GPU: 9000}},
                admitted=False,
                reason="borrowing 4 nvidia.com/gpu would take idle guaranteed quota that "
                "tenants not lending it keep (8 nvidia.com/gpu reserved, "
                "11 nvidia.com/gpu free)",
            ),
            id="a team inside its own guarantee borrows when its organisation is above its own",
        ),
    ],
)
def test_protected_guarantees_in_a_tree(case: Case) -> None:
    admission = _admit(NESTED, case)
    assert (admission.admitted, admission.reason) == (case.admitted, case.reason)
    if case.admitted:
        assert admission.borrowed == case.borrowed
