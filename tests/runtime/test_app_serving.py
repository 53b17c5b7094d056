"""clientConnection reaches the API client: its bucket, its retry metric, the contentType
warning."""

from __future__ import annotations

import logging

import pytest
from kubernetes_asyncio import client

from batchsched.config.documents import ClientConnection
from batchsched.kube.throttle import throttle_of
from batchsched.metrics import SchedulerMetrics
from batchsched.runtime.app_serving import throttle_client


async def test_qps_and_burst_become_the_clients_bucket_and_retries_are_counted() -> None:
    metrics = SchedulerMetrics()
    async with client.ApiClient(client.Configuration()) as api:
        throttle_client(api, ClientConnection(qps=7.0, burst=3), metrics)
        throttle = throttle_of(api)
        assert throttle is not None and throttle.bucket is not None
        assert (throttle.bucket.qps, throttle.bucket.burst) == (7.0, 3)
        throttle.on_retry(429, "POST")
    assert b'rest_client_request_retries_total{code="429",verb="POST"} 1.0' in metrics.render()


async def test_protobuf_is_answered_with_a_warning_that_json_is_used(
    caplog: pytest.LogCaptureFixture,
) -> None:
    connection = ClientConnection.model_validate(
        {"contentType": "application/vnd.kubernetes.protobuf"}
    )
    async with client.ApiClient(client.Configuration()) as api:
        with caplog.at_level(logging.WARNING):
            throttle_client(api, connection, SchedulerMetrics())
    assert "contentType=application/vnd.kubernetes.protobuf is not spoken" in caplog.text


async def test_a_negative_qps_leaves_the_client_unlimited() -> None:
    async with client.ApiClient(client.Configuration()) as api:
        throttle_client(api, ClientConnection(qps=-1.0), SchedulerMetrics())
        throttle = throttle_of(api)
    assert throttle is not None and throttle.bucket is None
