"""The live scheduler's API client flow control and its HTTP serving, wired from the
KubeSchedulerConfiguration's `clientConnection` and the serving flags."""

from __future__ import annotations

import logging
import time

from kubernetes_asyncio.client import ApiClient

from batchsched.config.documents import JSON_CONTENT, ClientConnection
from batchsched.kube.throttle import Throttle, bucket_for, limit_requests
from batchsched.metrics import SchedulerMetrics

__all__ = ["throttle_client"]

logger = logging.getLogger(__name__)


def throttle_client(
    api: ApiClient, connection: ClientConnection, metrics: SchedulerMetrics
) -> None:
    """Every request of `api` through clientConnection's token bucket (qps, burst), and
    Retry-After answers waited out and counted in rest_client_request_retries_total."""
    bucket = bucket_for(connection.qps, connection.burst, time.monotonic)

    def count(status: int, method: str) -> None:
        metrics.request_retries.labels(code=str(status), verb=method).inc()

    limit_requests(api, Throttle(bucket, on_retry=count))
    if connection.content_type not in ("", JSON_CONTENT):
        logger.warning(
            "clientConnection.contentType=%s is not spoken; requests use %s",
            connection.content_type,
            JSON_CONTENT,
        )
    if bucket is None:
        logger.info("client rate limit off (clientConnection.qps < 0)")
    else:
        logger.info("client rate limit qps=%g burst=%d", bucket.qps, bucket.burst)
