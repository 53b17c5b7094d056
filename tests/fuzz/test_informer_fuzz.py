"""Bad objects through the real edge: the informer's store, fed raw watch events and lists as the
API server sends them, with the app's parsers and keys and no server.

Property: for any sequence of good and bad versions of a few objects (watch ADDED, MODIFIED,
DELETED, and relists), the store never raises, every unreadable object reaches `on_invalid`
(which the app turns into a metric, a log line and an Event) with the parser's documented
error, and the store (and so its handler) keeps the last good version of each object.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from batchsched.bench import fuzz_objects
from batchsched.bench.fuzz_inputs import mutate_fields, random_json
from batchsched.gang.podgroup import parse_pod_group
from batchsched.kube.informer import ObjectStore, decode_event
from batchsched.model.errors import InvalidObject
from batchsched.model.node import parse_node
from batchsched.model.pod import parse_pod
from batchsched.model.priority_class import parse_priority_class
from gpu.nrt import parse_nrt
from tests.fuzz.strategies import rngs


@dataclass(frozen=True)
class Kind:
    name: str
    parse: Callable[[Mapping[str, object]], Any]
    key: Callable[[Any], str]  # as the app keys its informer (runtime/app.py)
    valid: Callable[[random.Random], dict[str, Any]]
    namespaced: bool


KINDS = {
    "Pod": Kind("Pod", parse_pod, lambda p: p.uid, fuzz_objects.valid_pod, True),
    "Node": Kind("Node", parse_node, lambda n: n.name, fuzz_objects.valid_node, False),
    "PodGroup": Kind(
        "PodGroup", parse_pod_group, lambda g: g.key, fuzz_objects.valid_pod_group, True
    ),
    "PriorityClass": Kind(
        "PriorityClass",
        parse_priority_class,
        lambda c: c.name,
        fuzz_objects.valid_priority_class,
        False,
    ),
    "NodeResourceTopology": Kind(
        "NodeResourceTopology", parse_nrt, lambda m: m.node, fuzz_objects.valid_nrt, False
    ),
}
NAMES = ("a", "b", "c")


class Mirror:
    """The handler: what a cache would hold, built only from the calls it gets."""

    def __init__(self, key: Callable[[Any], str]) -> None:
        self.key = key
        self.views: dict[str, Any] = {}

    def on_add(self, obj: Any) -> None:
        assert self.key(obj) not in self.views, "added twice"
        self.views[self.key(obj)] = obj

    def on_update(self, old: Any, new: Any) -> None:
        assert self.views.get(self.key(old)) is old, "updated from a view it was not given"
        self.views[self.key(new)] = new

    def on_delete(self, obj: Any) -> None:
        assert self.views.pop(self.key(obj)) is obj, "deleted a view it was not given"


def version_of(kind: Kind, name: str, rv: int, rng: random.Random, bad: bool) -> dict[str, Any]:
    """One version of object `name`: valid, or (when `bad`) mutated or random, with the same
    identity (name, namespace, uid) and a new resourceVersion either way."""
    raw: dict[str, Any] = kind.valid(rng)
    if bad and rng.random() < 0.8:
        mutated = mutate_fields(rng, raw)
        assert isinstance(mutated, dict)  # the top level stays a mapping
        raw = mutated
    elif bad:
        raw = {"spec": random_json(rng)}
    meta = raw.get("metadata")
    meta = dict(meta) if isinstance(meta, Mapping) else {}
    meta.update(name=name, uid=f"uid-{name}", resourceVersion=str(rv))
    if kind.namespaced:
        meta["namespace"] = "default"
    else:
        meta.pop("namespace", None)
    raw["metadata"] = meta
    return raw


steps = st.lists(
    st.tuples(
        st.sampled_from(("ADDED", "MODIFIED", "DELETED", "RELIST")),
        st.sampled_from(NAMES),
        st.booleans(),  # a bad version
        rngs,
    ),
    max_size=25,
)


@pytest.mark.parametrize("kind_name", list(KINDS))
def test_bad_objects_never_stop_the_informer_and_the_last_good_version_stays(
    kind_name: str,
) -> None:
    kind = KINDS[kind_name]

    @settings(
        max_examples=40,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(steps=steps)
    def property_(steps: list[tuple[str, str, bool, random.Random]]) -> None:
        run_steps(kind, steps)

    property_()


def run_steps(kind: Kind, steps: list[tuple[str, str, bool, random.Random]]) -> None:
    parsed: list[Any] = []  # the view each successful parse returned, to compare by identity

    def parse(raw: Mapping[str, object]) -> Any:
        view = kind.parse(raw)
        parsed.append(view)
        return view

    invalid: list[Exception] = []
    mirror = Mirror(kind.key)
    store: ObjectStore[Any] = ObjectStore(
        kind.name, parse, mirror, kind.key, lambda raw, err: invalid.append(err)
    )
    expected: dict[str, Any] = {}  # name -> the last good view
    for rv, (event, name, bad, rng) in enumerate(steps, start=1):
        raw = version_of(kind, name, rv, rng, bad)
        before, reported = len(parsed), len(invalid)
        if event == "RELIST":
            unreadable = relist(kind, store, expected, rng, rv, parsed)
            assert len(invalid) == reported + unreadable, "an unreadable object was not reported"
        else:
            store.apply({"type": event, "object": raw})  # never raises
        if event in ("ADDED", "MODIFIED"):
            if len(parsed) > before:
                expected[name] = parsed[-1]
            else:
                assert len(invalid) == reported + 1, "an unreadable object was not reported"
        elif event == "DELETED":
            expected.pop(name, None)
        check_store(kind, store, mirror, expected)
    for err in invalid:
        assert isinstance(err, InvalidObject) and str(err).strip() and err.field


def relist(
    kind: Kind,
    store: ObjectStore[Any],
    expected: dict[str, Any],
    rng: random.Random,
    rv: int,
    parsed: list[Any],
) -> int:
    """A full list of a random subset of the names, each version good or bad: what is not
    listed is gone, what is listed but unreadable keeps its last good version."""
    listed = [n for n in NAMES if rng.random() < 0.6]
    items, readable = [], []
    for name in listed:
        raw = version_of(kind, name, rv, rng, rng.random() < 0.5)
        items.append(raw)
        if parses(kind, raw):
            readable.append(name)
    before = len(parsed)
    store.replace(store.parse_items(items), str(rv))
    views = parsed[before:]  # parse_items parses in order
    assert len(views) == len(readable)
    for name in NAMES:
        if name not in listed:
            expected.pop(name, None)
    expected.update(zip(readable, views, strict=True))
    return len(listed) - len(readable)


def parses(kind: Kind, raw: Mapping[str, object]) -> bool:
    try:
        kind.parse(raw)
    except InvalidObject:
        return False
    return True


def check_store(
    kind: Kind, store: ObjectStore[Any], mirror: Mirror, expected: dict[str, Any]
) -> None:
    assert len(store) == len(expected)
    for view in expected.values():
        assert store.get(kind.key(view)) is view
    assert mirror.views == {kind.key(v): v for v in expected.values()}


# Two gaps fuzzing found in the informer, closed: a parser failure of any type, and a watch
# line nested too deeply for json.loads.


def test_a_parser_bug_of_any_type_does_not_stop_the_stream() -> None:
    def buggy(raw: Mapping[str, object]) -> Any:
        name = str(raw["metadata"]["name"])  # type: ignore[index]
        if name == "boom":
            raise ArithmeticError("a parser bug")  # e.g. decimal.InvalidOperation
        return parse_pod(raw)

    invalid: list[Exception] = []
    mirror = Mirror(lambda p: p.uid)
    store: ObjectStore[Any] = ObjectStore(
        "Pod", buggy, mirror, lambda p: p.uid, lambda raw, err: invalid.append(err)
    )
    boom = version_of(KINDS["Pod"], "boom", 1, random.Random(0), bad=False)
    fine = version_of(KINDS["Pod"], "fine", 2, random.Random(0), bad=False)
    store.apply({"type": "ADDED", "object": boom})
    store.apply({"type": "ADDED", "object": fine})
    assert [type(err) for err in invalid] == [ArithmeticError]
    assert list(mirror.views) == ["uid-fine"]


def test_a_deeply_nested_watch_line_is_a_garbled_stream() -> None:
    line = b'{"type":"ADDED","object":{"spec":' + b"[" * 100_000 + b"]" * 100_000 + b"}}"
    with pytest.raises(ValueError):
        decode_event(line)
