"""Writes whose answer is not read (`request_unread`: Event creates, Bindings, status
patches) against a tiny local HTTP server that answers as told: a 2xx body is skipped, but
every other answer is still an `ApiError` as from `request_json`, retried and fenced alike."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from kubernetes_asyncio import client

from batchsched.kube.client import (
    ApiError,
    NotLeading,
    Throttle,
    fence_writes,
    limit_requests,
    request_json,
    request_unread,
)
from batchsched.kube.events import EventRecorder, ObjectRef
from batchsched.kube.throttle import RetryPolicy
from tests.kube.stub_server import stub_api

NOT_JSON = b"<html>created</html>"


def status(code: int, reason: str) -> tuple[int, bytes, dict[str, str]]:
    body = b'{"kind":"Status","status":"Failure","reason":"%s","message":"said no","code":%d}'
    return code, body % (reason.encode(), code), {"Content-Type": "application/json"}


class Script:
    """Answers the listed (status, body, headers) in turn, then 201 with a body that is not
    JSON (a client that decoded it would fail)."""

    def __init__(self) -> None:
        self.answers: list[tuple[int, bytes, dict[str, str]]] = []
        self.seen: list[str] = []

    async def handle(self, request: web.Request) -> web.Response:
        self.seen.append(f"{request.method} {request.path}")
        code, body, headers = self.answers.pop(0) if self.answers else (201, NOT_JSON, {})
        return web.Response(status=code, body=body, headers=headers)


@pytest.fixture
async def served() -> AsyncIterator[tuple[Script, client.ApiClient]]:
    script = Script()
    async with stub_api(script.handle) as api:
        yield script, api


async def test_a_2xx_answer_is_not_decoded_where_request_json_would_refuse_it(
    served: tuple[Script, client.ApiClient],
) -> None:
    script, api = served
    await request_unread(api, "POST", "/apis/events.k8s.io/v1/namespaces/d/events", body={})
    with pytest.raises(ApiError, match="not JSON"):
        await request_json(api, "POST", "/apis/events.k8s.io/v1/namespaces/d/events", body={})
    assert len(script.seen) == 2


@pytest.mark.parametrize(
    ("code", "reason"), [(404, "NotFound"), (409, "AlreadyExists"), (422, "Invalid")]
)
async def test_any_other_answer_is_an_api_error_with_the_status_s_code_and_reason(
    served: tuple[Script, client.ApiClient], code: int, reason: str
) -> None:
    script, api = served
    script.answers.append(status(code, reason))
    with pytest.raises(ApiError) as raised:
        await request_unread(api, "POST", "/api/v1/namespaces/d/pods/p/binding", body={})
    assert (raised.value.status, raised.value.reason, raised.value.message) == (
        code,
        reason,
        "said no",
    )


async def test_a_429_with_retry_after_is_retried_as_request_json_retries_it(
    served: tuple[Script, client.ApiClient],
) -> None:
    script, api = served
    counted: list[tuple[int, str]] = []
    policy = RetryPolicy(max_retries=3, max_wait=5.0)
    limit_requests(api, Throttle(None, policy, on_retry=lambda c, v: counted.append((c, v))))
    code, body, headers = status(429, "TooManyRequests")
    script.answers.append((code, body, headers | {"Retry-After": "0"}))
    await request_unread(api, "PATCH", "/api/v1/namespaces/d/pods/p/status", body={})
    assert counted == [(429, "PATCH")]
    assert len(script.seen) == 2


async def test_a_fenced_client_that_does_not_lead_sends_nothing(
    served: tuple[Script, client.ApiClient],
) -> None:
    script, api = served
    fence_writes(api, lambda: 0.0)
    with pytest.raises(NotLeading):
        await request_unread(api, "POST", "/api/v1/namespaces/d/pods/p/binding", body={})
    assert script.seen == []


REF = ObjectRef("v1", "Pod", "d", "p", "uid-1")


async def test_an_event_create_refused_with_4xx_is_reported_not_taken(
    served: tuple[Script, client.ApiClient],
) -> None:
    script, api = served
    script.answers.append(status(422, "Invalid"))
    recorder = EventRecorder(api, hostname="h")
    assert not await recorder.record(REF, "Normal", "Scheduled", "Binding", "to n1")


async def test_an_event_create_answered_409_was_created_by_an_earlier_try(
    served: tuple[Script, client.ApiClient],
) -> None:
    script, api = served
    script.answers.append(status(409, "AlreadyExists"))
    recorder = EventRecorder(api, hostname="h")
    assert await recorder.record(REF, "Normal", "Scheduled", "Binding", "to n1")


async def test_an_event_created_with_an_unreadable_answer_is_taken(
    served: tuple[Script, client.ApiClient],
) -> None:
    script, api = served
    recorder = EventRecorder(api, hostname="h")
    assert await recorder.record(REF, "Normal", "Scheduled", "Binding", "to n1")
    assert script.seen == ["POST /apis/events.k8s.io/v1/namespaces/d/events"]
