"""Hypothesis strategies for the fuzz tests: valid, mutated and random inputs for each parser.

The generators themselves live in the package (batchsched/bench/fuzz_*.py), shared with
`python -m batchsched.bench fuzz`; here they draw from a Hypothesis-controlled `Random`, so a
failing case shrinks. `json_values` is pure Hypothesis: random JSON that shrinks structurally.
"""

from __future__ import annotations

import random

from hypothesis import strategies as st

from batchsched.bench.fuzz_inputs import FIELD_NAMES, NASTY_NUMBERS, NASTY_STRINGS
from batchsched.bench.fuzz_targets import Target

rngs: st.SearchStrategy[random.Random] = st.randoms(use_true_random=False)


def valid(target: Target) -> st.SearchStrategy[object]:
    return rngs.map(target.valid)


def mutated(target: Target) -> st.SearchStrategy[object]:
    return rngs.map(lambda rng: target.mutated(rng, target.valid(rng)))


def generated(target: Target) -> st.SearchStrategy[object]:
    return rngs.map(target.random)


def inputs(target: Target) -> st.SearchStrategy[object]:
    """What the bench feeds a parser: valid, mutated and random, in one strategy."""
    return st.one_of(valid(target), mutated(target), generated(target))


scalars: st.SearchStrategy[object] = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.text(max_size=20),
    st.sampled_from(NASTY_STRINGS),
    st.sampled_from(NASTY_NUMBERS),
)

keys: st.SearchStrategy[str] = st.sampled_from(FIELD_NAMES) | st.text(max_size=10)

json_values: st.SearchStrategy[object] = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(keys, children, max_size=4),
    max_leaves=25,
)

json_objects: st.SearchStrategy[dict[str, object]] = st.dictionaries(keys, json_values, max_size=6)
