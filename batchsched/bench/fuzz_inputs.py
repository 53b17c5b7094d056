"""Hostile inputs for the parsers at the edge: nasty scalars, random JSON, and mutations of a
valid object at a random path. Purely computational, driven by one `random.Random`.

Every generator takes the `Random` it draws from, so the same code serves the seeded bench
(`python -m batchsched.bench fuzz`) and the Hypothesis tests, which hand in
`st.randoms(use_true_random=False)` and so can shrink a failing case.

Integers stay below Python's 4300-digit `int`/`str` limit: neither the API server's JSON nor
YAML can deliver a bigger one (both decoders refuse it before any parser runs; the YAML
loader's refusal is itself tested through the config texts).
"""

from __future__ import annotations

import random
import string
from collections.abc import Callable, Mapping, Sequence
from typing import Final

Json = object  # None | bool | int | float | str | list[Json] | dict[str, Json]

# Strings that have broken number, quantity, duration, time and annotation readers somewhere.
NASTY_STRINGS: Final[tuple[str, ...]] = (
    "",
    " ",
    "\t\n",
    "\x00",
    "NaN",
    "nan",
    "inf",
    "-inf",
    "Infinity",
    "1e999",
    "1e-999",
    "1e1000",
    "1e1001",
    "-1e1001",
    "1E",
    "1e",
    "e3",
    "0.0000000001Ki",
    "0.1n",
    "--1",
    "+-1",
    "-0",
    "+1",
    "1Ei",
    "16Ei",
    "8Ei",
    "1Ki1",
    "1.5Gi",
    "500m",
    "100m",
    "-1",
    "-100m",
    "1n",
    ".5",
    "5.",
    ".",
    "0x10",
    "1_000",
    " 1",
    "1 ",
    "1\n",
    "²",
    "٣",
    "１",
    "𝟗",
    "9" * 30,
    "9" * 400,
    "9" * 4400,
    "1e" + "9" * 4400,
    "0." + "0" * 4400 + "1",
    "💥",
    "a" * 1000,
    "null",
    "true",
    "[]",
    "{}",
    "90m",
    "2h30m",
    "0s",
    "-5m",
    "1.5h",
    "500ms",
    "1e400h",
    "9" * 400 + "h",
    "4.5e15m",
    "1µs",
    "NVLink",
    "nvlink",
    "PCIeSwitch",
    "Socket",
    "V100M16|V100M32",
    "|",
    "||",
    "0,1,2",
    "2,²,5",
    "0-3,7",
    "0-99999999999",
    "3-1",
    "-",
    "2025-01-01T00:00:00Z",
    "2025-13-45T99:99:99Z",
    "0001-01-01T00:00:00Z",
    "0001-01-01T00:00:00+01:00",
    "9999-12-31T23:59:59-01:00",
    "0000-01-01T00:00:00Z",
    "2025-01-01",
    "Pending",
    "Running",
    "NoSchedule",
    "Exists",
    "In",
    "Gt",
    "default",
    "gpu-scheduler",
    "nvidia.com/gpu",
    "cpu",
    "memory",
)

NASTY_NUMBERS: Final[tuple[object, ...]] = (
    0,
    1,
    -1,
    2,
    7,
    999,
    1000,
    2**31 - 1,
    2**31,
    -(2**31) - 1,
    2**63 - 1,
    2**63,
    2**64,
    -(2**63) - 1,
    10**100,
    -(10**100),
    10**4000,
    0.0,
    -0.0,
    0.5,
    1.5,
    -1.5,
    1e-9,
    1e-300,
    5e-324,
    1e16,
    1e300,
    1.7976931348623157e308,
    float("inf"),
    float("-inf"),
    float("nan"),
    True,
    False,
)

# Keys the parsers read, so that random JSON lands on real fields now and then.
FIELD_NAMES: Final[tuple[str, ...]] = (
    "metadata",
    "name",
    "namespace",
    "uid",
    "labels",
    "annotations",
    "spec",
    "status",
    "containers",
    "initContainers",
    "resources",
    "requests",
    "limits",
    "cpu",
    "memory",
    "nvidia.com/gpu",
    "allocatable",
    "capacity",
    "taints",
    "tolerations",
    "affinity",
    "nodeAffinity",
    "minMember",
    "minResources",
    "scheduleTimeoutSeconds",
    "selector",
    "matchLabels",
    "matchExpressions",
    "disruptionsAllowed",
    "value",
    "globalDefault",
    "apiVersion",
    "kind",
    "profiles",
    "plugins",
    "pluginConfig",
    "tenants",
    "guaranteed",
    "max",
    "teams",
)

_TEXT_ALPHABET: Final = string.ascii_letters + string.digits + "-_./:@|,µ²٣💥 \t"


def nasty_scalar(rng: random.Random) -> Json:
    roll = rng.random()
    if roll < 0.45:
        return rng.choice(NASTY_STRINGS)
    if roll < 0.75:
        return rng.choice(NASTY_NUMBERS)
    if roll < 0.85:
        return None
    if roll < 0.95:
        return quantity_text(rng)
    return random_text(rng)


def random_text(rng: random.Random, longest: int = 12) -> str:
    return "".join(rng.choice(_TEXT_ALPHABET) for _ in range(rng.randint(0, longest)))


def quantity_text(rng: random.Random) -> str:
    """Quantity-shaped text: sign, digits, point, suffix or exponent, each sometimes absurd."""
    sign = rng.choice(("", "", "", "-", "+", "--", "+-"))
    whole = str(rng.choice((0, 1, 5, 64, 1000, 10**18, 10 ** rng.randint(0, 60))))
    frac = rng.choice(("", "", ".", ".5", "." + "0" * rng.randint(0, 40) + "1"))
    suffix = rng.choice(
        (
            "",
            "",
            "m",
            "n",
            "u",
            "k",
            "M",
            "G",
            "T",
            "P",
            "E",
            "Ki",
            "Mi",
            "Gi",
            "Ti",
            "Pi",
            "Ei",
            "e3",
            "E-3",
            "e+2",
            f"e{rng.randint(-1100, 1100)}",
            f"e{'0' * rng.randint(1, 30)}3",
            "i",
            "mi",
            "KiB",
        )
    )
    return f"{sign}{whole}{frac}{suffix}"


def random_json(rng: random.Random, depth: int = 4) -> Json:
    """Any JSON value, keys mostly from the fields the parsers read."""
    roll = rng.random()
    if depth <= 0 or roll < 0.4:
        return nasty_scalar(rng)
    if roll < 0.7:
        return {_random_key(rng): random_json(rng, depth - 1) for _ in range(rng.randint(0, 5))}
    return [random_json(rng, depth - 1) for _ in range(rng.randint(0, 4))]


def _random_key(rng: random.Random) -> str:
    return rng.choice(FIELD_NAMES) if rng.random() < 0.7 else random_text(rng, 8)


def deep_nesting(rng: random.Random) -> Json:
    """A value nested far deeper than any real object: a recursive reader would overflow."""
    value: Json = nasty_scalar(rng)
    for _ in range(rng.choice((50, 200, 2000))):
        value = [value] if rng.random() < 0.5 else {"a": value}
    return value


def _replacement(rng: random.Random, current: Json) -> Json:
    roll = rng.random()
    if roll < 0.5:
        return nasty_scalar(rng)
    if roll < 0.6:
        return [current]  # a list where a single value belongs
    if roll < 0.7:
        return {} if isinstance(current, list) else []  # the other container
    if roll < 0.8:
        return {"value": current}
    if roll < 0.83:
        return deep_nesting(rng)
    if roll < 0.9 and isinstance(current, str):
        return current + rng.choice(("💥", "\x00", " ", "e999", "Ki", "-", "²"))
    if roll < 0.95 and isinstance(current, int | float) and not isinstance(current, bool):
        return -current if current else 2**63
    return random_json(rng, 2)


def mutate(rng: random.Random, value: Json, mutations: int = 0) -> Json:
    """A copy of `value` with 1..3 mutations (or `mutations`) at random paths; the original
    is never changed (only the path to each mutation is copied)."""
    for _ in range(mutations or rng.randint(1, 3)):
        value = _mutate_once(rng, value)
    return value


def mutate_fields(rng: random.Random, value: Json, mutations: int = 0) -> Json:
    """`mutate`, keeping the top level a mapping (what the informer hands its parsers)."""
    if not isinstance(value, Mapping) or not value:
        return mutate(rng, value, mutations)
    copy = dict(value)
    for _ in range(mutations or rng.randint(1, 3)):
        key = rng.choice(list(copy))
        copy[key] = _mutate_once(rng, copy[key])
    return copy


def _mutate_once(rng: random.Random, value: Json) -> Json:
    # Walk down a random path; stop at a leaf or, sometimes, at a container on the way.
    if isinstance(value, Mapping) and value and rng.random() < 0.8:
        copy = dict(value)
        key = rng.choice(list(copy))
        roll = rng.random()
        if roll < 0.08:
            del copy[key]
        elif roll < 0.12:
            copy[_random_key(rng)] = random_json(rng, 2)
        else:
            copy[key] = _mutate_once(rng, copy[key])
        return copy
    if isinstance(value, list) and value and rng.random() < 0.8:
        items = list(value)
        index = rng.randrange(len(items))
        roll = rng.random()
        if roll < 0.08:
            del items[index]
        elif roll < 0.12:
            items.append(items[index])  # a duplicate (two links for one pair, two tenants)
        else:
            items[index] = _mutate_once(rng, items[index])
        return items
    return _replacement(rng, value)


def one_of(rng: random.Random, makers: Sequence[Callable[[random.Random], Json]]) -> Json:
    return rng.choice(makers)(rng)
