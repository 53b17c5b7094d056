"""The tenant quota file: shapes, units, every validation rule, and errors that name their path."""

from __future__ import annotations

import re
import textwrap
from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from queues.config import (
    QuotaConfigError,
    capacity_warnings,
    load_quota_file,
    parse_quota_config,
)
from queues.model import QuotaPolicy, flavor_key

HEADER = "apiVersion: batchsched.io/v1alpha1\nkind: QuotaConfig\n"
H100 = "NVIDIA-H100-80GB-HBM3"
DOC = Path(__file__).parents[2] / "docs" / "configuration.md"

# The issue's example, as the brief shaped it (with the organisation's namespace moved to a
# team: pods map to leaves).
ISSUE_EXAMPLE = """\
apiVersion: batchsched.io/v1alpha1
kind: QuotaConfig
queueLabel: batchsched.io/queue
defaultTenant: shared
fairShare: {halfLife: 24h}
backfill: {reservations: 4, starvationAfter: 1h}
gpuModels:
  h100: NVIDIA-H100-80GB-HBM3
tenants:
- name: shared
- name: research
  weight: 2
  guaranteed: {nvidia.com/gpu: 16, cpu: "200"}
  max: {nvidia.com/gpu: 64, nvidia.com/gpu@h100: 16}
  lendIdle: true
  priority: {min: 0, max: 1000}
  teams:
  - name: vision
    namespaces: [vision]
    queues: [vision]
    weight: 1
    max: {nvidia.com/gpu: 32}
  - name: common
    namespaces: [research-shared]
"""


def parse(body: str) -> QuotaPolicy:
    return parse_quota_config(HEADER + textwrap.dedent(body))


def issues_of(body: str) -> list[tuple[str, str]]:
    with pytest.raises(QuotaConfigError) as caught:
        parse(body)
    return [(issue.path, issue.message) for issue in caught.value.issues]


def test_the_issue_example_loads_as_a_two_level_tree() -> None:
    policy = parse_quota_config(ISSUE_EXAMPLE)
    assert list(policy.tenants) == ["shared", "research", "research/vision", "research/common"]
    research = policy.tenants["research"]
    assert research.weight == 2.0
    assert research.guaranteed == {"nvidia.com/gpu": 16_000, "cpu": 200_000}
    assert research.max == {"nvidia.com/gpu": 64_000, flavor_key(H100): 16_000}
    assert (research.min_priority, research.max_priority) == (0, 1000)
    vision = policy.tenants["research/vision"]
    assert vision.parent == "research"
    assert vision.max == {"nvidia.com/gpu": 32_000}
    assert vision.namespaces == {"vision"} and vision.queues == {"vision"}
    assert policy.default_tenant == "shared"
    assert (policy.half_life_s, policy.reservations, policy.starvation_s) == (86400.0, 4, 3600.0)
    assert policy.tenant_of("vision", {}) == "research/vision"
    assert policy.tenant_of("elsewhere", {"batchsched.io/queue": "vision"}) == "research/vision"
    assert policy.tenant_of("research-shared", {}) == "research/common"
    assert policy.tenant_of("elsewhere", {}) == "shared"


def test_a_flat_list_is_a_tree_of_roots() -> None:
    policy = parse(
        """\
        tenants:
        - {name: a, namespaces: [a], max: {nvidia.com/gpu: 8}}
        - {name: b, namespaces: [b], weight: 0.5}
        """
    )
    assert [t.parent for t in policy.tenants.values()] == [None, None]
    assert policy.is_leaf("a") and policy.is_leaf("b")
    assert policy.default_tenant is None
    assert policy.tenant_of("c", {}) is None


def test_defaults_when_only_tenants_are_given() -> None:
    policy = parse("tenants: [{name: a}]\n")
    tenant = policy.tenants["a"]
    assert (tenant.weight, tenant.lend_idle, tenant.guaranteed, tenant.max) == (1.0, True, {}, {})
    assert policy.queue_label == "batchsched.io/queue"
    assert (policy.half_life_s, policy.reservations, policy.starvation_s) == (86400.0, 4, 3600.0)


@pytest.mark.parametrize(
    ("key", "written", "expected_key", "expected"),
    [
        ("cpu", '"200"', "cpu", 200_000),
        ("cpu", "500m", "cpu", 500),
        ("cpu", "1.5", "cpu", 1_500),
        ("memory", "64Gi", "memory", 64 * 2**30),
        ("memory", "1G", "memory", 10**9),
        ("nvidia.com/gpu", "2", "nvidia.com/gpu", 2_000),
        ("nvidia.com/gpu", '"0.5"', "nvidia.com/gpu", 500),
        ("nvidia.com/gpu", "250m", "nvidia.com/gpu", 250),
        ("nvidia.com/gpu@h100", "4", flavor_key(H100), 4_000),
        ("nvidia.com/gpu@NVIDIA-A100-SXM4-80GB", "1", flavor_key("NVIDIA-A100-SXM4-80GB"), 1_000),
        ("example.com/foo", "3", "example.com/foo", 3),
        ("pods", "10", "pods", 10),
        ("hugepages-2Mi", "1Gi", "hugepages-2Mi", 2**30),
        ("ephemeral-storage", "100Gi", "ephemeral-storage", 100 * 2**30),
        ("nvidia.com/gpu", "0", "nvidia.com/gpu", 0),
    ],
    ids=[
        "cpu in cores becomes millicores",
        "cpu in millicores stays millicores",
        "fractional cpu becomes millicores",
        "memory with a binary suffix becomes bytes",
        "memory with a decimal suffix becomes bytes",
        "whole GPUs become milli-GPUs",
        "half a GPU is 500 milli-GPUs",
        "a GPU share written in milli is milli-GPUs",
        "a per-model key with an alias resolves to the product",
        "a per-model key with a product name is kept",
        "another extended resource counts whole units",
        "pods count whole units",
        "hugepages count bytes",
        "ephemeral storage counts bytes",
        "zero is allowed",
    ],
)
def test_quantities_in_queue_units(
    key: str, written: str, expected_key: str, expected: int
) -> None:
    policy = parse(
        f"""\
        gpuModels: {{h100: {H100}}}
        tenants:
        - name: a
          max: {{"{key}": {written}}}
        """
    )
    assert policy.tenants["a"].max == {expected_key: expected}


@given(st.integers(min_value=0, max_value=10**7))
def test_any_milli_gpu_amount_written_as_a_decimal_reads_back_exactly(milli: int) -> None:
    written = str(Decimal(milli) / 1000)
    policy = parse(f'tenants: [{{name: a, max: {{nvidia.com/gpu: "{written}"}}}}]\n')
    assert policy.tenants["a"].max == {"nvidia.com/gpu": milli}


@pytest.mark.parametrize(
    ("written", "seconds"),
    [("90m", 5400.0), ("24h", 86400.0), ("1h30m", 5400.0), ("3600s", 3600.0)],
    ids=["minutes", "hours", "hours and minutes", "seconds"],
)
def test_durations(written: str, seconds: float) -> None:
    policy = parse(
        f"fairShare: {{halfLife: {written}}}\nbackfill: {{starvationAfter: {written}}}\n"
        "tenants: [{name: a}]\n"
    )
    assert policy.half_life_s == seconds and policy.starvation_s == seconds


def test_a_team_inherits_the_organisations_priority_range_and_lending() -> None:
    policy = parse(
        """\
        tenants:
        - name: org
          lendIdle: false
          priority: {min: 10, max: 100}
          teams:
          - {name: a, namespaces: [a]}
          - {name: b, namespaces: [b], lendIdle: true, priority: {max: 50}}
        """
    )
    a, b = policy.tenants["org/a"], policy.tenants["org/b"]
    assert (a.lend_idle, a.min_priority, a.max_priority) == (False, 10, 100)
    assert (b.lend_idle, b.min_priority, b.max_priority) == (True, 10, 50)


def test_an_organisation_without_its_own_guarantee_guarantees_its_teams_sum() -> None:
    policy = parse(
        """\
        tenants:
        - name: org
          guaranteed: {cpu: 10}
          teams:
          - {name: a, guaranteed: {nvidia.com/gpu: 2, cpu: 4}}
          - {name: b, guaranteed: {nvidia.com/gpu: "1.5"}}
        """
    )
    assert policy.tenants["org"].guaranteed == {"cpu": 10_000, "nvidia.com/gpu": 3_500}


ERRORS: list[tuple[str, str, list[tuple[str, str]]]] = [
    (
        "an unknown field suggests the known one",
        "tenants: [{name: a, wieght: 2}]\n",
        [("tenants[0].wieght", 'unknown field "wieght"; did you mean "weight"?')],
    ),
    (
        "a quantity that does not parse names its key",
        """\
        tenants:
        - {name: a}
        - name: b
          teams:
          - {name: c, max: {nvidia.com/gpu: abc}}
        """,
        [("tenants[1].teams[0].max.nvidia.com/gpu", "not a quantity: expected a number")],
    ),
    (
        "a negative amount is refused",
        "tenants: [{name: a, guaranteed: {cpu: -1}}]\n",
        [("tenants[0].guaranteed.cpu", "must not be negative")],
    ),
    (
        "a boolean is not a quantity",
        "tenants: [{name: a, max: {nvidia.com/gpu: true}}]\n",
        [("tenants[0].max.nvidia.com/gpu", "not a quantity")],
    ),
    (
        "a GPU amount finer than a thousandth is refused",
        'tenants: [{name: a, max: {nvidia.com/gpu: "0.0005"}}]\n',
        [("tenants[0].max.nvidia.com/gpu", "0.0005 is finer than nvidia.com/gpu can count")],
    ),
    (
        "a cpu amount finer than a millicore is refused",
        "tenants: [{name: a, max: {cpu: 100u}}]\n",
        [("tenants[0].max.cpu", "0.0001 is finer than cpu can count")],
    ),
    (
        "a fraction of a byte is refused",
        'tenants: [{name: a, max: {memory: "1.5"}}]\n',
        [("tenants[0].max.memory", "1.5 is finer than memory can count")],
    ),
    (
        "a resource without a domain is refused",
        "tenants: [{name: a, max: {gpu: 2}}]\n",
        [("tenants[0].max.gpu", "not a resource name")],
    ),
    (
        "a per-model key of another resource is refused",
        "tenants: [{name: a, max: {amd.com/gpu@mi300: 2}}]\n",
        [("tenants[0].max.amd.com/gpu@mi300", "a per-model key is nvidia.com/gpu@<model>")],
    ),
    (
        "an alias and its product in one mapping are the same resource",
        f"gpuModels: {{h100: {H100}}}\n"
        f"tenants: [{{name: a, max: {{nvidia.com/gpu@h100: 2, nvidia.com/gpu@{H100}: 3}}}}]\n",
        [(f"tenants[0].max.nvidia.com/gpu@{H100}", 'the same resource as "nvidia.com/gpu@h100"')],
    ),
    (
        "two aliases for one model are refused",
        f"gpuModels: {{h100: {H100}, hopper: {H100}}}\ntenants: [{{name: a}}]\n",
        [("gpuModels.hopper", 'the same model as alias "h100"')],
    ),
    (
        "two tenants with one name are refused",
        "tenants: [{name: a}, {name: a}]\n",
        [("tenants[1].name", 'tenant "a" is defined twice')],
    ),
    (
        "two teams with one name in an organisation are refused",
        "tenants: [{name: o, teams: [{name: t}, {name: t}]}]\n",
        [("tenants[0].teams[1].name", 'team "t" is defined twice in "o"')],
    ),
    (
        "a namespace in two tenants is ambiguous",
        "tenants: [{name: a, namespaces: [ml]}, {name: b, namespaces: [x, ml]}]\n",
        [
            (
                "tenants[1].namespaces[1]",
                'namespace "ml" is already mapped by tenants[0].namespaces[0]',
            )
        ],
    ),
    (
        "a queue value in two tenants is ambiguous",
        "tenants: [{name: o, teams: [{name: a, queues: [q]}, {name: b, queues: [q]}]}]\n",
        [("tenants[0].teams[1].queues[0]", 'queue "q" is already mapped by tenants[0].teams[0]')],
    ),
    (
        "teams nest two levels at most",
        "tenants: [{name: o, teams: [{name: t, teams: [{name: u}]}]}]\n",
        [("tenants[0].teams[0].teams", "tenants nest two levels at most")],
    ),
    (
        "a weight of zero is refused",
        "tenants: [{name: a, weight: 0}]\n",
        [("tenants[0].weight", "input should be greater than 0, got 0")],
    ),
    (
        "a negative weight is refused",
        "tenants: [{name: a, weight: -1.5}]\n",
        [("tenants[0].weight", "input should be greater than 0")],
    ),
    (
        "a weight written as a string is refused",
        'tenants: [{name: a, weight: "2"}]\n',
        [("tenants[0].weight", "input should be a valid number")],
    ),
    (
        "guaranteed above max is refused",
        "tenants: [{name: a, guaranteed: {nvidia.com/gpu: 16}, max: {nvidia.com/gpu: 8}}]\n",
        [("tenants[0].guaranteed.nvidia.com/gpu", "guaranteed 16 nvidia.com/gpu exceeds max 8")],
    ),
    (
        "a per-model max above the max for all models is refused",
        f"gpuModels: {{h100: {H100}}}\n"
        "tenants: [{name: a, max: {nvidia.com/gpu: 8, nvidia.com/gpu@h100: 16}}]\n",
        [
            (
                "tenants[0].max.nvidia.com/gpu@h100",
                "exceeds the max for all models, 8 nvidia.com/gpu",
            )
        ],
    ),
    (
        "a priority range with min above max is refused",
        "tenants: [{name: a, priority: {min: 10, max: 1}}]\n",
        [("tenants[0].priority", "min 10 is greater than max 1")],
    ),
    (
        "a team's priority range outside its organisation's is refused",
        "tenants: [{name: o, priority: {max: 100}, teams: [{name: t, priority: {max: 500}}]}]\n",
        [("tenants[0].teams[0].priority", "outside the organisation's range [None, 100]")],
    ),
    (
        "a priority beyond int32 is refused",
        "tenants: [{name: a, priority: {max: 3000000000}}]\n",
        [("tenants[0].priority.max", "input should be less than or equal to 2147483647")],
    ),
    (
        "a default tenant that does not exist is refused",
        "defaultTenant: nobody\ntenants: [{name: a}, {name: b}]\n",
        [("defaultTenant", '"nobody" is not a tenant; tenants: a, b')],
    ),
    (
        "a default tenant with teams is refused",
        "defaultTenant: o\ntenants: [{name: o, teams: [{name: t}]}]\n",
        [("defaultTenant", '"o" has teams; name one of its teams')],
    ),
    (
        "teams guaranteeing more than their organisation is refused",
        """\
        tenants:
        - name: o
          guaranteed: {nvidia.com/gpu: 8}
          teams:
          - {name: a, guaranteed: {nvidia.com/gpu: 6}}
          - {name: b, guaranteed: {nvidia.com/gpu: 4}}
        """,
        [
            (
                "tenants[0].teams",
                "the teams' guaranteed 10 nvidia.com/gpu exceed the organisation's 8",
            )
        ],
    ),
    (
        "teams guaranteeing more than their organisation's max is refused",
        """\
        tenants:
        - name: o
          max: {nvidia.com/gpu: 8}
          teams:
          - {name: a, guaranteed: {nvidia.com/gpu: 6}}
          - {name: b, guaranteed: {nvidia.com/gpu: 4}}
        """,
        [("tenants[0].teams", "exceed the organisation's max 8 nvidia.com/gpu")],
    ),
    (
        "an organisation with teams maps no pods itself",
        "tenants: [{name: o, namespaces: [ml], teams: [{name: t}]}]\n",
        [("tenants[0].namespaces", "an organisation with teams maps no pods")],
    ),
    (
        "a tenant name must be a DNS label",
        "tenants: [{name: Research}]\n",
        [("tenants[0].name", "not a valid name: lower-case letters, digits and")],
    ),
    (
        "a namespace must be a DNS label",
        "tenants: [{name: a, namespaces: [ml_team]}]\n",
        [("tenants[0].namespaces[0]", "not a valid name")],
    ),
    (
        "a queue value must be a label value",
        'tenants: [{name: a, queues: ["has space"]}]\n',
        [("tenants[0].queues[0]", 'not a valid label value, got "has space"')],
    ),
    (
        "the queue label must be a label key",
        'queueLabel: "bad key!"\ntenants: [{name: a}]\n',
        [("queueLabel", "not a valid label key")],
    ),
    (
        "a duration without a unit is refused",
        "fairShare: {halfLife: 3600}\ntenants: [{name: a}]\n",
        [("fairShare.halfLife", 'expected a duration such as "90m"')],
    ),
    (
        "a duration in words is refused",
        'backfill: {starvationAfter: "1 day"}\ntenants: [{name: a}]\n',
        [("backfill.starvationAfter", 'expected a duration such as "15s"')],
    ),
    (
        "a negative number of reservations is refused",
        "backfill: {reservations: -1}\ntenants: [{name: a}]\n",
        [("backfill.reservations", "input should be greater than or equal to 0")],
    ),
    (
        "a file without tenants is refused",
        "tenants: []\n",
        [("tenants", "should have at least 1 item")],
    ),
    (
        "a file that names no tenants is refused",
        "defaultTenant: a\n",
        [("tenants", "required field is missing")],
    ),
]


@pytest.mark.parametrize(
    ("body", "expected"), [(b, e) for _, b, e in ERRORS], ids=[i for i, _, _ in ERRORS]
)
def test_every_rule_reports_its_path(body: str, expected: list[tuple[str, str]]) -> None:
    found = issues_of(body)
    assert [path for path, _ in found] == [path for path, _ in expected]
    for (_, message), (_, part) in zip(found, expected, strict=True):
        assert part in message


def test_every_problem_of_a_pass_is_reported_at_once() -> None:
    first_pass = issues_of("tenants: [{name: A, weight: 0, max: {cpu: x}}]\n")
    assert [p for p, _ in first_pass] == [
        "tenants[0].name",
        "tenants[0].weight",
        "tenants[0].max.cpu",
    ]
    second_pass = issues_of(
        """\
        defaultTenant: nobody
        tenants:
        - {name: a, namespaces: [ml], guaranteed: {cpu: 2}, max: {cpu: 1}}
        - {name: b, namespaces: [ml], priority: {min: 5, max: 1}}
        """
    )
    assert [p for p, _ in second_pass] == [
        "tenants[0].guaranteed.cpu",
        "tenants[1].priority",
        "tenants[1].namespaces[0]",
        "defaultTenant",
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "apiVersion: v1\nkind: QuotaConfig\ntenants: [{name: a}]\n",
            "apiVersion: input should be",
        ),
        ("apiVersion: batchsched.io/v1alpha1\nkind: Quota\ntenants: [{name: a}]\n", "kind: input"),
        (HEADER + "tenants: [{name: a}]\ntenants: [{name: b}]\n", "duplicate key 'tenants'"),
        (HEADER + "tenants: [{name: a}\n", "invalid YAML"),
        ("", "no QuotaConfig found: the YAML is empty"),
        ("- a\n- b\n", "expected a QuotaConfig mapping"),
    ],
    ids=[
        "another apiVersion is refused",
        "another kind is refused",
        "a key given twice is refused",
        "broken YAML is refused",
        "an empty file is refused",
        "a list is refused",
    ],
)
def test_documents_that_are_not_a_quota_config(text: str, message: str) -> None:
    with pytest.raises(QuotaConfigError) as caught:
        parse_quota_config(text, "quotas.yaml")
    assert message in str(caught.value)
    assert str(caught.value).startswith("quotas.yaml: ")


def test_a_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(QuotaConfigError, match=r"missing\.yaml: cannot read the file"):
        load_quota_file(tmp_path / "missing.yaml")


def test_the_message_has_one_line_per_issue_each_with_the_file_and_path(tmp_path: Path) -> None:
    path = tmp_path / "quotas.yaml"
    path.write_text(HEADER + "tenants: [{name: a, weight: 0, max: {nvidia.com/gpu: abc}}]\n")
    with pytest.raises(QuotaConfigError) as caught:
        load_quota_file(path)
    lines = str(caught.value).splitlines()
    assert [line.split(": ")[1] for line in lines] == [
        "tenants[0].weight",
        "tenants[0].max.nvidia.com/gpu",
    ]
    assert all(line.startswith(f"{path}: ") for line in lines)


@pytest.mark.parametrize(
    ("capacity", "expected"),
    [
        ({"nvidia.com/gpu": 64_000, "cpu": 500_000}, []),
        (
            {"nvidia.com/gpu": 20_000, "cpu": 500_000},
            ["guaranteed quota sums to 24 nvidia.com/gpu but the cluster has 20 nvidia.com/gpu"],
        ),
        (
            {"nvidia.com/gpu": 64_000},
            ["guaranteed quota sums to 300 cpu but the cluster has 0 cpu"],
        ),
    ],
    ids=[
        "guarantees within capacity give no warning",
        "GPU guarantees above capacity give a warning",
        "a resource the cluster lacks gives a warning",
    ],
)
def test_capacity_warnings(capacity: dict[str, int], expected: list[str]) -> None:
    policy = parse(
        """\
        tenants:
        - {name: a, guaranteed: {nvidia.com/gpu: 16, cpu: 200}}
        - name: o
          guaranteed: {nvidia.com/gpu: 8, cpu: 100}
          teams: [{name: t, guaranteed: {nvidia.com/gpu: 8}}]
        """
    )
    warnings = capacity_warnings(policy, capacity)
    assert [w.split(":")[0] for w in warnings] == expected


def _doc_examples() -> list[tuple[str, bool, str]]:
    """(yaml, marked invalid, the text block after it) for each QuotaConfig in the doc."""
    text = DOC.read_text(encoding="utf-8")
    blocks = list(re.finditer(r"```(\w+)\n(.*?)```", text, re.DOTALL))
    found = []
    for i, block in enumerate(blocks):
        if block.group(1) == "yaml" and "kind: QuotaConfig" in block.group(2):
            invalid = text[: block.start()].rstrip().endswith("<!-- invalid -->")
            after = next((b.group(2) for b in blocks[i + 1 :] if b.group(1) == "text"), "")
            found.append((block.group(2), invalid, after))
    return found


DOC_EXAMPLES = _doc_examples()


def test_the_documentation_has_quota_examples_of_both_kinds() -> None:
    assert sorted(invalid for _, invalid, _ in DOC_EXAMPLES) == [False, True]


VALID_DOC_EXAMPLES = [body for body, invalid, _ in DOC_EXAMPLES if not invalid]


@pytest.mark.parametrize(
    "body",
    VALID_DOC_EXAMPLES,
    ids=[f"quota example {i} in the docs loads" for i in range(len(VALID_DOC_EXAMPLES))],
)
def test_the_documented_quota_example_loads(body: str) -> None:
    assert parse_quota_config(body).tenants


def test_the_documented_error_is_what_the_loader_reports() -> None:
    body, output = next((b, out) for b, invalid, out in DOC_EXAMPLES if invalid)
    with pytest.raises(QuotaConfigError) as caught:
        parse_quota_config(body, "bad-quotas.yaml")
    shown = [
        line.removeprefix("batchsched run: ")
        for line in output.splitlines()
        if line and not line.startswith("$")
    ]
    assert shown == str(caught.value).splitlines()
