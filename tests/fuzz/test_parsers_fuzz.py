"""Bad input never crashes a parser at the edge: for any input, each parser returns its view or
raises its documented error type, whose message says what is wrong (and, for a Kubernetes
object, names the field).

The targets and their contracts are batchsched/bench/fuzz_targets.py, the same ones
`python -m batchsched.bench fuzz` runs at 10^5 cases; here Hypothesis drives them (and
shrinks), a few thousand cases in all.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from batchsched.bench.fuzz_targets import TARGETS, Outcome, Target, check
from tests.fuzz import strategies

# YAML is parsed in pure Python: the text targets get fewer, dearer cases.
_TEXT = ("QuotaConfig", "KubeSchedulerConfiguration", "KubeSchedulerConfiguration-mapping")
_EXAMPLES = {name: (60 if name in _TEXT else 250) for name in TARGETS}
# Parsers that take an API object (or a parsed config document): they also get pure
# Hypothesis JSON, which shrinks structurally.
_MAPPINGS = (
    "Pod",
    "Node",
    "PriorityClass",
    "PodGroup",
    "PodDisruptionBudget",
    "NodeResourceTopology",
    "QuotaConfig-mapping",
    "KubeSchedulerConfiguration-mapping",
)


def assert_contract(target: Target, value: object) -> None:
    outcome, err = check(target, value)
    assert outcome is not Outcome.ESCAPED, f"{target.name}: {type(err).__name__}: {err}"


def fuzz_settings(examples: int) -> settings:
    return settings(
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


@pytest.mark.parametrize("name", list(TARGETS))
def test_a_parser_returns_its_view_or_its_documented_error(name: str) -> None:
    target = TARGETS[name]

    @fuzz_settings(_EXAMPLES[name])
    @given(value=strategies.inputs(target))
    def property_(value: object) -> None:
        assert_contract(target, value)

    property_()


@pytest.mark.parametrize("name", _MAPPINGS)
def test_a_parser_survives_any_json_object(name: str) -> None:
    target = TARGETS[name]

    @fuzz_settings(40 if name in _TEXT else 75)
    @given(value=strategies.json_objects)
    def property_(value: dict[str, object]) -> None:
        assert_contract(target, value)

    property_()


@pytest.mark.parametrize("name", ["QuotaConfig", "KubeSchedulerConfiguration"])
@fuzz_settings(60)
@given(text=st.text(max_size=300))
def test_a_config_loader_survives_any_text(name: str, text: str) -> None:
    assert_contract(TARGETS[name], text)


@pytest.mark.parametrize("name", list(TARGETS))
@fuzz_settings(5)
@given(data=st.data())
def test_every_valid_input_is_accepted(name: str, data: st.DataObject) -> None:
    """The generators' valid inputs really are valid: the mutations start from a real object."""
    target = TARGETS[name]
    value = data.draw(strategies.valid(target))
    outcome, err = check(target, value)
    assert outcome is Outcome.ACCEPTED, f"{name}: {type(err).__name__}: {err}"
