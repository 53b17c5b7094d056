"""KubeBinder, PodStatusWriter and EventRecorder against the real API server."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest
from kubernetes_asyncio import client

from batchsched.clock import FakeClock
from batchsched.kube.binder import BindError, EventRecorder, KubeBinder, PodStatusWriter
from batchsched.kube.client import DEFAULT_MAX_CONNECTIONS, api_client, request_json
from batchsched.model.pod import PodView, parse_pod
from tests.builders import make_node, make_pod
from tests.integration.control_plane import ControlPlane
from tests.integration.helpers import create_node, create_pod, delete_pod_now

NS = "default"


async def read_pod(api: client.ApiClient, name: str) -> dict[str, object]:
    return await request_json(api, "GET", f"/api/v1/namespaces/{NS}/pods/{name}")


async def pending_pod(api: client.ApiClient, name: str) -> PodView:
    await create_pod(api, make_pod(name, NS).cpu("100m"))
    return parse_pod(await read_pod(api, name))


def pod_scheduled(raw: dict[str, object]) -> dict[str, object]:
    status = raw["status"]
    assert isinstance(status, dict)
    found = [c for c in status.get("conditions", []) if c["type"] == "PodScheduled"]
    assert len(found) == 1, status
    return found[0]  # type: ignore[no-any-return]


async def events_about(api: client.ApiClient, pod: PodView) -> list[dict[str, object]]:
    listing = await request_json(api, "GET", f"/apis/events.k8s.io/v1/namespaces/{NS}/events")
    items = listing["items"]
    assert isinstance(items, list)
    return [e for e in items if e["regarding"]["uid"] == pod.uid]


async def test_bind_sets_the_pods_node(api: client.ApiClient) -> None:
    await create_node(api, make_node("bind-n1"))
    pod = await pending_pod(api, "bind-me")

    await KubeBinder(api).bind(NS, pod.name, pod.uid, "bind-n1")

    raw = await read_pod(api, "bind-me")
    assert parse_pod(raw).node_name == "bind-n1"
    assert pod_scheduled(raw)["status"] == "True"


async def _bind_twice(api: client.ApiClient, pod: PodView) -> None:
    await KubeBinder(api).bind(NS, pod.name, pod.uid, "bind-n1")
    await KubeBinder(api).bind(NS, pod.name, pod.uid, "bind-n2")


async def _bind_deleted(api: client.ApiClient, pod: PodView) -> None:
    await delete_pod_now(api, NS, pod.name)
    await KubeBinder(api).bind(NS, pod.name, pod.uid, "bind-n1")


async def _bind_recreated(api: client.ApiClient, pod: PodView) -> None:
    await delete_pod_now(api, NS, pod.name)
    await create_pod(api, make_pod(pod.name, NS))
    await KubeBinder(api).bind(NS, pod.name, pod.uid, "bind-n1")


@pytest.mark.parametrize(
    ("scenario", "reason", "status"),
    [
        (_bind_twice, "conflict", 409),
        (_bind_deleted, "not_found", 404),
        (_bind_recreated, "conflict", 409),
    ],
    ids=[
        "binding an already bound pod again is a conflict",
        "binding a deleted pod is not found",
        "binding a same-named pod created since (other uid) is a conflict",
    ],
)
async def test_bind_failures_are_translated_once(
    api: client.ApiClient,
    scenario: Callable[[client.ApiClient, PodView], Awaitable[None]],
    reason: str,
    status: int,
) -> None:
    await create_node(api, make_node("bind-n1"))
    await create_node(api, make_node("bind-n2"))
    pod = await pending_pod(api, "bind-fail")

    with pytest.raises(BindError) as caught:
        await scenario(api, pod)

    assert (caught.value.reason, caught.value.status) == (reason, status)
    assert caught.value.message


async def test_mark_unschedulable_sets_the_condition_once(api: client.ApiClient) -> None:
    pod = await pending_pod(api, "unsched")
    writer = PodStatusWriter(api)

    await writer.mark_unschedulable(pod, "0/1 nodes are available: 1 Insufficient cpu.")
    first = await read_pod(api, "unsched")
    await writer.mark_unschedulable(pod, "0/1 nodes are available: 1 Insufficient cpu.")
    again = await read_pod(api, "unsched")

    condition = pod_scheduled(first)
    assert condition["status"] == "False"
    assert condition["reason"] == "Unschedulable"
    assert condition["message"] == "0/1 nodes are available: 1 Insufficient cpu."
    assert again["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]  # type: ignore[index]


async def test_a_new_message_keeps_the_transition_time(api: client.ApiClient) -> None:
    pod = await pending_pod(api, "unsched-2")
    writer = PodStatusWriter(api, clock=FakeClock(), min_rewrite=0)
    await writer.mark_unschedulable(pod, "first reason")
    before = pod_scheduled(await read_pod(api, "unsched-2"))

    await writer.mark_unschedulable(pod, "second reason")

    after = pod_scheduled(await read_pod(api, "unsched-2"))
    assert after["message"] == "second reason"
    assert after["lastTransitionTime"] == before["lastTransitionTime"]


async def test_status_writes_to_a_deleted_pod_are_logged_not_raised(
    api: client.ApiClient,
) -> None:
    pod = await pending_pod(api, "gone")
    await delete_pod_now(api, NS, "gone")

    await PodStatusWriter(api).mark_unschedulable(pod, "whatever")
    await PodStatusWriter(api).set_nominated_node(pod, "n1")


async def test_status_writes_never_land_on_a_same_named_successor(
    api: client.ApiClient,
) -> None:
    pod = await pending_pod(api, "reborn")
    await delete_pod_now(api, NS, "reborn")
    successor = await pending_pod(api, "reborn")
    writer = PodStatusWriter(api)

    await writer.mark_unschedulable(pod, "meant for the old pod")
    await writer.set_nominated_node(pod, "bind-n1")

    status = (await read_pod(api, "reborn"))["status"]
    assert successor.uid != pod.uid
    assert "conditions" not in status and "nominatedNodeName" not in status  # type: ignore[operator]


async def test_nominated_node_is_set_and_cleared(api: client.ApiClient) -> None:
    pod = await pending_pod(api, "nominee")
    writer = PodStatusWriter(api)

    await writer.set_nominated_node(pod, "bind-n1")
    nominated = (await read_pod(api, "nominee"))["status"]
    await writer.set_nominated_node(pod, None)
    cleared = (await read_pod(api, "nominee"))["status"]

    assert nominated["nominatedNodeName"] == "bind-n1"  # type: ignore[index]
    assert "nominatedNodeName" not in cleared  # type: ignore[operator]


async def test_recording_twice_makes_one_event_with_a_series(api: client.ApiClient) -> None:
    pod = await pending_pod(api, "evented")
    recorder = EventRecorder(api, hostname="test-host")

    for _ in range(2):
        await recorder.record(pod, "Warning", "FailedScheduling", "Scheduling", "0/1 nodes")

    (event,) = await events_about(api, pod)
    assert event["series"]["count"] == 2  # type: ignore[index]
    assert event["reportingController"] == "gpu-scheduler"
    assert event["reportingInstance"] == "test-host"
    assert event["action"] == "Scheduling"
    assert event["regarding"]["name"] == "evented"  # type: ignore[index]
    assert len(str(event["eventTime"]).split(".")[1]) == len("123456Z")


async def test_a_different_note_or_a_lapsed_window_makes_a_new_event(
    api: client.ApiClient,
) -> None:
    pod = await pending_pod(api, "evented-2")
    clock = FakeClock()
    recorder = EventRecorder(api, clock=clock, hostname="test-host", window=600)

    await recorder.record(pod, "Warning", "FailedScheduling", "Scheduling", "note a")
    await recorder.record(pod, "Warning", "FailedScheduling", "Scheduling", "note b")
    clock.advance(601)
    await recorder.record(pod, "Warning", "FailedScheduling", "Scheduling", "note a")

    events = await events_about(api, pod)
    assert sorted(str(e["note"]) for e in events) == ["note a", "note a", "note b"]
    assert all("series" not in e for e in events)


async def test_an_event_deleted_on_the_server_is_created_again(api: client.ApiClient) -> None:
    pod = await pending_pod(api, "evented-3")
    recorder = EventRecorder(api, hostname="test-host")
    await recorder.record(pod, "Normal", "Scheduled", "Binding", "bound")
    (first,) = await events_about(api, pod)
    name = first["metadata"]["name"]  # type: ignore[index]
    await request_json(api, "DELETE", f"/apis/events.k8s.io/v1/namespaces/{NS}/events/{name}")

    await recorder.record(pod, "Normal", "Scheduled", "Binding", "bound")

    (second,) = await events_about(api, pod)
    assert second["metadata"]["name"] != name  # type: ignore[index]


async def test_concurrent_binds_through_a_client_from_the_kubeconfig(
    api: client.ApiClient, control_plane: ControlPlane
) -> None:
    await create_node(api, make_node("bind-many").pods(200))
    pods = [await pending_pod(api, f"many-{i}") for i in range(40)]
    own = await api_client(str(control_plane.kubeconfig))
    try:
        connector = own.rest_client.pool_manager.connector
        assert connector is not None and connector.limit == DEFAULT_MAX_CONNECTIONS
        binder = KubeBinder(own)
        await asyncio.gather(*(binder.bind(NS, p.name, p.uid, "bind-many") for p in pods))
    finally:
        await own.close()

    bound = [parse_pod(await read_pod(api, p.name)).node_name for p in pods]
    assert bound == ["bind-many"] * len(pods)


async def test_concurrent_repeats_extend_the_event_being_created(api: client.ApiClient) -> None:
    pod = await pending_pod(api, "evented-4")
    recorder = EventRecorder(api, hostname="test-host")

    await asyncio.gather(
        *(recorder.record(pod, "Warning", "FailedScheduling", "Scheduling", "x") for _ in range(3))
    )

    (event,) = await events_about(api, pod)
    assert event["series"]["count"] == 3  # type: ignore[index]


@pytest.mark.parametrize("applied", [True, False], ids=["applied", "not applied"])
async def test_a_binding_whose_answer_is_lost_is_read_back_before_it_counts_as_failed(
    api: client.ApiClient, monkeypatch: pytest.MonkeyPatch, applied: bool
) -> None:
    """The server may have applied a Binding whose answer never came (a restart, a cut
    connection): calling it failed would free the pod's GPUs while it holds them."""
    import batchsched.kube.binder as binder_module
    from batchsched.kube.client import ApiUnavailable

    await create_node(api, make_node("lost-n1"))
    pod = await pending_pod(api, "lost-answer")
    real = binder_module.request_unread

    async def answer_lost(*args: object, **kwargs: object) -> None:
        if applied:
            await real(*args, **kwargs)  # type: ignore[arg-type]
        raise ApiUnavailable("POST .../binding: ServerDisconnectedError")

    # The Binding goes out unread; the read-back (a GET through request_json) is real.
    monkeypatch.setattr(binder_module, "request_unread", answer_lost)
    monkeypatch.setattr(binder_module, "BIND_CHECK_PAUSE_S", 0.01)
    binder = KubeBinder(api)
    if applied:
        await binder.bind(pod.namespace, pod.name, pod.uid, "lost-n1")
    else:
        with pytest.raises(BindError, match="unavailable"):
            await binder.bind(pod.namespace, pod.name, pod.uid, "lost-n1")
    assert ((await read_pod(api, "lost-answer"))["spec"].get("nodeName") == "lost-n1") is applied  # type: ignore[attr-defined]


async def test_repeats_after_the_series_began_are_written_when_the_series_is_refreshed(
    api: client.ApiClient,
) -> None:
    """As client-go's events library: create, one patch that starts the series, then later
    counts only on a refresh (or when the series finishes), never one write per repeat."""
    pod = await pending_pod(api, "evented-5")
    clock = FakeClock()
    recorder = EventRecorder(api, clock=clock, hostname="test-host", refresh=60, finish=30)
    for _ in range(5):
        await recorder.record(pod, "Warning", "FailedScheduling", "Scheduling", "0/1 nodes")
    (before,) = await events_about(api, pod)

    nothing_due = await recorder.flush()
    clock.advance(20)
    await recorder.record(pod, "Warning", "FailedScheduling", "Scheduling", "0/1 nodes")
    clock.advance(40)
    refreshed = await recorder.flush()
    (after,) = await events_about(api, pod)

    assert before["series"]["count"] == 2  # type: ignore[index]
    assert nothing_due == 0
    assert refreshed == 1
    assert after["series"]["count"] == 6  # type: ignore[index]


async def test_a_finished_series_is_written_once_and_forgotten(api: client.ApiClient) -> None:
    pod = await pending_pod(api, "evented-6")
    clock = FakeClock()
    recorder = EventRecorder(api, clock=clock, hostname="test-host", refresh=600, finish=30)
    for _ in range(3):
        await recorder.record(pod, "Warning", "FailedScheduling", "Scheduling", "again")
    clock.advance(31)

    assert await recorder.flush() == 1
    (event,) = await events_about(api, pod)
    assert event["series"]["count"] == 3  # type: ignore[index]
    # Forgotten: the next occurrence is a new Event, and nothing is left to flush.
    assert await recorder.flush() == 0
    await recorder.record(pod, "Warning", "FailedScheduling", "Scheduling", "again")
    assert len(await events_about(api, pod)) == 2


def scheduled_message(pod: dict[str, object]) -> str | None:
    status = pod.get("status")
    assert isinstance(status, dict)
    for condition in status.get("conditions") or []:
        if condition["type"] == "PodScheduled":
            return str(condition["message"])
    return None


async def test_a_new_message_within_the_rewrite_interval_waits_for_the_flush(
    api: client.ApiClient,
) -> None:
    """A waiting gang retried on every cluster event must not rewrite each member's
    condition each time: within `min_rewrite` of the last write, the newest message is kept
    and written by the next flush after the interval, if the pod still waits."""
    pod = await pending_pod(api, "rewrite-1")
    clock = FakeClock()
    writer = PodStatusWriter(api, clock=clock, min_rewrite=5)
    await writer.mark_unschedulable(pod, "0/2 nodes: 2 Insufficient nvidia.com/gpu")
    await writer.mark_unschedulable(pod, "0/2 nodes: 1 Insufficient nvidia.com/gpu")
    await writer.mark_unschedulable(pod, "0/2 nodes: 2 Insufficient cpu")
    kept = scheduled_message(await read_pod(api, "rewrite-1"))

    too_soon = await writer.flush(lambda uid: True)
    clock.advance(5)
    written = await writer.flush(lambda uid: True)

    assert kept == "0/2 nodes: 2 Insufficient nvidia.com/gpu"
    assert (too_soon, written) == (0, 1)
    assert scheduled_message(await read_pod(api, "rewrite-1")) == "0/2 nodes: 2 Insufficient cpu"


async def test_a_deferred_message_for_a_pod_no_longer_waiting_is_dropped(
    api: client.ApiClient,
) -> None:
    pod = await pending_pod(api, "rewrite-2")
    clock = FakeClock()
    writer = PodStatusWriter(api, clock=clock, min_rewrite=5)
    await writer.mark_unschedulable(pod, "first")
    await writer.mark_unschedulable(pod, "second")
    clock.advance(5)

    assert await writer.flush(lambda uid: uid != pod.uid) == 0
    assert scheduled_message(await read_pod(api, "rewrite-2")) == "first"
    # Nothing is left over: a later flush writes nothing either.
    assert await writer.flush(lambda uid: True) == 0
