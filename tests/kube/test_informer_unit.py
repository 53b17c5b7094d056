"""The adapters' pure parts: reconnect backoff, watch lines, list diffing, events, config."""

from __future__ import annotations

import logging
import random
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from batchsched.kube.client import (
    DEFAULT_MAX_CONNECTIONS,
    ApiError,
    Backoff,
    KubeConfigError,
    api_client,
)
from batchsched.kube.informer import (
    Expired,
    ObjectStore,
    WatchLines,
    decode_event,
)
from batchsched.model.errors import InvalidObject
from batchsched.model.pod import PodView, parse_pod
from batchsched.model.priority_class import PriorityClassView, parse_priority_class
from tests.builders import make_pod


class FixedRandom(random.Random):
    """random() always returns `value`: jitter becomes a known number."""

    def __init__(self, value: float) -> None:
        super().__init__()
        self.value = value

    def random(self) -> float:
        return self.value


# -- Backoff ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("jitter_draw", "expected"),
    [
        (0.0, [0.2, 0.4, 0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0, 30.0]),
        (1.0, [0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 6.4, 12.8, 15.0, 15.0]),
    ],
    ids=[
        "without jitter the delay doubles from 0.2 s and stops at 30 s",
        "full jitter halves every delay, never more",
    ],
)
def test_backoff_doubles_up_to_the_cap(jitter_draw: float, expected: list[float]) -> None:
    backoff = Backoff(FixedRandom(jitter_draw))
    assert [round(backoff.next_delay(), 6) for _ in expected] == expected


def test_backoff_starts_over_after_a_reset() -> None:
    backoff = Backoff(FixedRandom(0.0))
    for _ in range(5):
        backoff.next_delay()
    backoff.reset()
    assert backoff.next_delay() == pytest.approx(0.2)


def test_seeded_jitter_stays_in_range_and_replays() -> None:
    first = [Backoff(random.Random(7)).next_delay() for _ in range(3)]
    backoff = Backoff(random.Random(7))
    delays = [backoff.next_delay() for _ in range(40)]
    assert all(0.1 <= d <= 30.0 for d in delays)
    assert max(delays) >= 15.0
    assert first == [Backoff(random.Random(7)).next_delay() for _ in range(3)]


def test_backoff_survives_many_failures() -> None:
    backoff = Backoff(FixedRandom(0.0))
    for _ in range(5000):
        delay = backoff.next_delay()
    assert delay == 30.0


# -- Watch stream lines ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("chunks", "lines", "pending"),
    [
        ([b'{"a":1}\n{"b":2}\n'], [b'{"a":1}', b'{"b":2}'], b""),
        ([b'{"a"', b":1}\n"], [b'{"a":1}'], b""),
        ([b'{"a":1}\n{"b"'], [b'{"a":1}'], b'{"b"'),
        ([b"\n\n", b'{"a":1}\n', b"\n"], [b'{"a":1}'], b""),
        ([b"x" * 3_000_000 + b"\n"], [b"x" * 3_000_000], b""),
    ],
    ids=[
        "two events in one chunk are two lines",
        "an event split across chunks is joined",
        "a cut-off last event stays pending",
        "blank keep-alive lines are dropped",
        "an event larger than aiohttp's line buffer still arrives whole",
    ],
)
def test_watch_lines(chunks: list[bytes], lines: list[bytes], pending: bytes) -> None:
    splitter = WatchLines()
    got = [line for chunk in chunks for line in splitter.feed(chunk)]
    assert got == lines
    assert splitter.pending() == pending


@pytest.mark.parametrize(
    "line",
    [b"not json", b"[1, 2]", b'{"type": "ADDED"}', b'{"object": {}}'],
    ids=[
        "a line that is not JSON is refused",
        "a JSON list is not an event",
        "an event without an object is refused",
        "an event without a type is refused",
    ],
)
def test_decode_event_refuses_what_is_not_a_watch_event(line: bytes) -> None:
    with pytest.raises(ValueError):
        decode_event(line)


def test_decode_event_reads_a_watch_event() -> None:
    event = decode_event(b'{"type":"ADDED","object":{"metadata":{"name":"n"}}}')
    assert event == {"type": "ADDED", "object": {"metadata": {"name": "n"}}}


# -- ObjectStore: lists and events ----------------------------------------------------------


class Seen:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []
        self.views: list[PodView] = []

    def on_add(self, obj: PodView) -> None:
        self.calls.append(("add", obj.name))
        self.views.append(obj)

    def on_update(self, old: PodView, new: PodView) -> None:
        self.calls.append(("update", f"{old.name}@{old.uid}->{new.uid}"))
        self.views.append(new)

    def on_delete(self, obj: PodView) -> None:
        self.calls.append(("delete", obj.name))
        self.views.append(obj)


def raw_pod(name: str, version: str, uid: str = "", cpu: str = "1") -> dict[str, Any]:
    body = make_pod(name).cpu(cpu).obj()
    body["metadata"]["uid"] = uid or f"uid-{name}"
    body["metadata"]["resourceVersion"] = version
    return body


def store(key_by_uid: bool = False) -> tuple[ObjectStore[PodView], Seen, list[str]]:
    seen = Seen()
    invalid: list[str] = []

    def on_invalid(raw: Mapping[str, object], err: Exception) -> None:
        invalid.append(type(err).__name__)

    key = (lambda p: p.uid) if key_by_uid else (lambda p: p.key)
    pods: ObjectStore[PodView] = ObjectStore("Pod", parse_pod, seen, key, on_invalid)
    return pods, seen, invalid


def listed(pods: ObjectStore[PodView], *items: dict[str, Any], version: str = "100") -> None:
    pods.replace(pods.parse_items(list(items)), version)


def test_first_list_adds_everything_and_takes_the_list_version() -> None:
    pods, seen, _ = store()
    listed(pods, raw_pod("a", "1"), raw_pod("b", "2"), version="7")
    assert seen.calls == [("add", "a"), ("add", "b")]
    assert pods.resource_version == "7"
    assert len(pods) == 2


def test_relist_delivers_only_the_difference() -> None:
    pods, seen, _ = store()
    listed(pods, raw_pod("a", "1"), raw_pod("b", "2"), raw_pod("c", "3"))
    seen.calls.clear()

    listed(pods, raw_pod("a", "1"), raw_pod("c", "9"), raw_pod("d", "10"), version="200")

    assert seen.calls == [
        ("delete", "b"),
        ("update", "c@uid-c->uid-c"),
        ("add", "d"),
    ]
    assert pods.resource_version == "200"


def test_relist_keeps_an_object_it_cannot_read_any_more() -> None:
    pods, seen, invalid = store()
    listed(pods, raw_pod("a", "1", cpu="2"))
    seen.calls.clear()

    listed(pods, raw_pod("a", "5", cpu="lots"))

    assert seen.calls == []
    assert invalid == ["InvalidObject"]
    kept = pods.get("default/a")
    assert kept is not None and kept.requests.milli_cpu == 2000


def test_a_same_named_object_with_a_new_identity_is_a_delete_and_an_add() -> None:
    pods, seen, _ = store(key_by_uid=True)
    listed(pods, raw_pod("a", "1", uid="old"))
    seen.calls.clear()

    listed(pods, raw_pod("a", "5", uid="new"))

    assert seen.calls == [("delete", "a"), ("add", "a")]
    assert pods.get("old") is None and pods.get("new") is not None


def event(kind: str, obj: dict[str, Any]) -> dict[str, object]:
    return {"type": kind, "object": obj}


def test_watch_events_are_delivered_in_order_and_move_the_version() -> None:
    pods, seen, _ = store()
    listed(pods, raw_pod("a", "1"))
    seen.calls.clear()

    pods.apply(event("ADDED", raw_pod("b", "101")))
    pods.apply(event("MODIFIED", raw_pod("a", "102", cpu="3")))
    pods.apply(event("DELETED", raw_pod("b", "103")))
    pods.apply(event("MODIFIED", raw_pod("c", "104")))  # never seen: an add

    assert seen.calls == [
        ("add", "b"),
        ("update", "a@uid-a->uid-a"),
        ("delete", "b"),
        ("add", "c"),
    ]
    assert pods.resource_version == "104"


def test_a_delete_hands_back_the_view_the_handler_was_given() -> None:
    pods, seen, _ = store()
    listed(pods, raw_pod("a", "1", cpu="2"))

    pods.apply(event("DELETED", raw_pod("a", "5", cpu="garbage")))

    assert seen.calls[-1] == ("delete", "a")
    assert seen.views[-1].requests.milli_cpu == 2000
    assert len(pods) == 0


def test_a_bookmark_moves_only_the_version() -> None:
    pods, seen, _ = store()
    listed(pods, raw_pod("a", "1"))
    seen.calls.clear()

    pods.apply(event("BOOKMARK", {"kind": "Pod", "metadata": {"resourceVersion": "555"}}))

    assert seen.calls == []
    assert pods.resource_version == "555"


@pytest.mark.parametrize(
    ("status", "error"),
    [
        ({"code": 410, "reason": "Expired", "message": "too old resource version"}, Expired),
        ({"code": 500, "reason": "InternalError", "message": "boom"}, ApiError),
    ],
    ids=[
        "an ERROR event with 410 Gone asks for a relist",
        "any other ERROR event is an API error to back off from",
    ],
)
def test_error_events(status: dict[str, object], error: type[Exception]) -> None:
    pods, _, _ = store()
    with pytest.raises(error):
        pods.apply(event("ERROR", {"kind": "Status", **status}))


def test_an_invalid_object_is_logged_reported_and_skipped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    pods, seen, invalid = store()
    listed(pods, raw_pod("a", "1"))
    seen.calls.clear()

    pods.apply(event("ADDED", raw_pod("bad", "101", cpu="-1")))
    pods.apply(event("ADDED", raw_pod("good", "102")))

    assert seen.calls == [("add", "good")]
    assert invalid == ["InvalidObject"]
    assert "invalid object kind=Pod name=default/bad error=" in caplog.text
    assert pods.resource_version == "102"


def test_a_failing_handler_does_not_stop_the_stream(caplog: pytest.LogCaptureFixture) -> None:
    class Exploding(Seen):
        def on_add(self, obj: PodView) -> None:
            if obj.name == "boom":
                raise RuntimeError("handler bug")
            super().on_add(obj)

    seen = Exploding()
    pods: ObjectStore[PodView] = ObjectStore("Pod", parse_pod, seen, lambda p: p.key)

    pods.apply(event("ADDED", raw_pod("boom", "1")))
    pods.apply(event("ADDED", raw_pod("fine", "2")))

    assert seen.calls == [("add", "fine")]
    assert "informer handler failed kind=Pod" in caplog.text
    assert any(r.exc_info and r.levelno == logging.ERROR for r in caplog.records)


# -- PriorityClass view -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "view"),
    [
        (
            {"metadata": {"name": "high"}, "value": 1000, "globalDefault": True},
            PriorityClassView("high", 1000, True, "PreemptLowerPriority"),
        ),
        (
            {"metadata": {"name": "batch"}, "value": -5, "preemptionPolicy": "Never"},
            PriorityClassView("batch", -5, False, "Never"),
        ),
    ],
    ids=[
        "a global default class keeps its value and the default preemption policy",
        "a non-preempting class with a negative value",
    ],
)
def test_parse_priority_class(raw: dict[str, object], view: PriorityClassView) -> None:
    assert parse_priority_class(raw) == view


def test_a_priority_class_without_a_numeric_value_is_invalid() -> None:
    with pytest.raises(InvalidObject, match="PriorityClass odd: value"):
        parse_priority_class({"metadata": {"name": "odd"}, "value": "high"})


# -- api_client configuration (no server needed: only the credentials are read) ------------

KUBECONFIG_TEXT = """
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: abc}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
"""


@pytest.fixture
def no_ambient_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_PORT", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    return tmp_path


async def test_api_client_reads_the_given_kubeconfig(no_ambient_config: Path) -> None:
    path = no_ambient_config / "config.yaml"
    path.write_text(KUBECONFIG_TEXT)
    api = await api_client(str(path))
    try:
        assert api.configuration.host == "https://127.0.0.1:1"
        connector = api.rest_client.pool_manager.connector
        assert connector is not None and connector.limit == DEFAULT_MAX_CONNECTIONS
    finally:
        await api.close()


async def test_api_client_falls_back_to_the_kubeconfig_variable(
    no_ambient_config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = no_ambient_config / "from-env.yaml"
    path.write_text(KUBECONFIG_TEXT)
    monkeypatch.setenv("KUBECONFIG", f"{no_ambient_config / 'missing'}:{path}")
    api = await api_client(None)
    await api.close()
    assert api.configuration.host == "https://127.0.0.1:1"


@pytest.mark.parametrize(
    ("given", "env", "mentions"),
    [
        ("/nonexistent/kubeconfig", None, ["/nonexistent/kubeconfig"]),
        (None, None, ["in-cluster"]),
        (None, "garbage.yaml", ["garbage.yaml", "in-cluster"]),
    ],
    ids=[
        "a kubeconfig that was asked for but is missing is an error, with no fallback",
        "no kubeconfig and not in a cluster is an error naming in-cluster",
        "an unreadable $KUBECONFIG and no cluster names both attempts",
    ],
)
async def test_api_client_without_usable_credentials(
    no_ambient_config: Path,
    monkeypatch: pytest.MonkeyPatch,
    given: str | None,
    env: str | None,
    mentions: list[str],
) -> None:
    if env is not None:
        (no_ambient_config / env).write_text("{not: [valid")
        monkeypatch.setenv("KUBECONFIG", str(no_ambient_config / env))
    with pytest.raises(KubeConfigError) as caught:
        await api_client(given)
    for text in mentions:
        assert text in str(caught.value)
    if given:
        assert "in-cluster" not in str(caught.value)
