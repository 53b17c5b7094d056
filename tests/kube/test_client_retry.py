"""Retry-After handling at the edge (`request_json`) against a tiny local HTTP server that
answers 429/503 as told: the retry logic, not Kubernetes semantics, is under test here."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from kubernetes_asyncio import client

from batchsched.kube.client import ApiError, Throttle, limit_requests, request_json
from batchsched.kube.throttle import RetryPolicy
from tests.kube.stub_server import stub_api


class Script:
    """Answers the listed (status, Retry-After) in turn, then 200 {} for ever."""

    def __init__(self, answers: list[tuple[int, str | None]]) -> None:
        self.answers = answers
        self.seen: list[str] = []

    async def handle(self, request: web.Request) -> web.Response:
        self.seen.append(request.method)
        if not self.answers:
            return web.json_response({"kind": "Status", "status": "Success"})
        status, retry_after = self.answers.pop(0)
        headers = {} if retry_after is None else {"Retry-After": retry_after}
        body = {"kind": "Status", "reason": "TooManyRequests", "message": "slow down"}
        return web.json_response(body, status=status, headers=headers)


@pytest.fixture
async def served() -> AsyncIterator[tuple[Script, client.ApiClient]]:
    script = Script([])
    async with stub_api(script.handle) as api:
        yield script, api


def retried(api: client.ApiClient, max_retries: int = 3) -> list[tuple[int, str]]:
    counted: list[tuple[int, str]] = []
    policy = RetryPolicy(max_retries=max_retries, max_wait=5.0)
    limit_requests(
        api, Throttle(None, policy, on_retry=lambda code, verb: counted.append((code, verb)))
    )
    return counted


async def test_a_429_with_retry_after_is_retried_until_it_succeeds_and_each_retry_counted(
    served: tuple[Script, client.ApiClient],
) -> None:
    script, api = served
    counted = retried(api)
    script.answers = [(429, "0"), (429, "0")]
    await request_json(api, "POST", "/api/v1/namespaces/default/pods/p/binding", body={})
    assert script.seen == ["POST", "POST", "POST"]
    assert counted == [(429, "POST"), (429, "POST")]


async def test_a_503_with_retry_after_is_retried_for_a_read_but_not_for_a_create(
    served: tuple[Script, client.ApiClient],
) -> None:
    script, api = served
    counted = retried(api)
    script.answers = [(503, "0")]
    await request_json(api, "GET", "/api/v1/nodes")
    script.answers = [(503, "0")]
    with pytest.raises(ApiError) as caught:
        await request_json(api, "POST", "/api/v1/namespaces/default/events", body={})
    assert caught.value.status == 503
    assert script.seen == ["GET", "GET", "POST"]
    assert counted == [(503, "GET")]


async def test_retries_stop_at_the_bound_and_the_last_answer_is_the_error(
    served: tuple[Script, client.ApiClient],
) -> None:
    script, api = served
    retried(api, max_retries=2)
    script.answers = [(429, "0")] * 5
    with pytest.raises(ApiError) as caught:
        await request_json(api, "GET", "/api/v1/pods")
    assert caught.value.status == 429 and caught.value.reason == "TooManyRequests"
    assert len(script.seen) == 3


async def test_without_a_throttle_a_429_goes_straight_to_the_caller(
    served: tuple[Script, client.ApiClient],
) -> None:
    script, api = served
    script.answers = [(429, "0")]
    with pytest.raises(ApiError):
        await request_json(api, "GET", "/api/v1/pods")
    assert script.seen == ["GET"]
