"""The live scheduler's API client flow control and its HTTP serving, wired from the
KubeSchedulerConfiguration's `clientConnection` and the serving flags."""

from __future__ import annotations

import logging
import ssl
import time
from typing import Protocol

from kubernetes_asyncio.client import ApiClient

from batchsched.config import SchedulerConfig
from batchsched.config.configz import configz_document
from batchsched.config.documents import JSON_CONTENT, ClientConnection
from batchsched.kube.delegated import Reviewer
from batchsched.kube.throttle import Throttle, bucket_for, limit_requests
from batchsched.metrics import SchedulerMetrics
from batchsched.runtime.app_options import RunOptions
from batchsched.runtime.server import RunningServer, serve
from batchsched.runtime.serving_auth import AuthGate
from batchsched.runtime.tls import ServingCert, self_signed, server_context

__all__ = ["start_serving", "throttle_client"]

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


class Served(Protocol):
    """What the servers read of the app."""

    options: RunOptions
    metrics: SchedulerMetrics

    def health(self) -> tuple[bool, str]: ...

    def ready(self) -> dict[str, tuple[bool, str]]: ...

    def leading(self) -> bool: ...

    @property
    def config(self) -> SchedulerConfig: ...


async def start_serving(app: Served, api: ApiClient) -> dict[str, RunningServer]:
    """The plain listener (when asked) and the secure port (when set), started; each logs
    "serving http port=N" / "serving https port=N" with the bound port."""
    options = app.options
    servers: dict[str, RunningServer] = {}
    try:
        if options.http_port is not None:
            plain = await serve(
                options.http_host,
                options.http_port,
                health=app.health,
                ready=app.ready,
                metrics=app.metrics,
                leader=app.leading,
            )
            logger.info("serving http port=%d", plain.port)
            servers["http"] = plain
        if options.secure_port is not None:
            gate = AuthGate(Reviewer(api), options.always_allow_paths)
            secure = await serve(
                options.bind_address,
                options.secure_port,
                health=app.health,
                ready=app.ready,
                metrics=app.metrics,
                leader=app.leading,
                configz=lambda: configz_document(app.config),
                middlewares=[gate.middleware],
                ssl_context=_tls(options),
            )
            logger.info("serving https port=%d", secure.port)
            servers["https"] = secure
    except BaseException:
        for server in servers.values():
            await server.close()
        raise
    return servers


def _tls(options: RunOptions) -> ssl.SSLContext:
    if options.tls_cert_file is not None and options.tls_private_key_file is not None:
        cert = ServingCert(options.tls_cert_file, options.tls_private_key_file)
    else:
        cert = self_signed(options.cert_dir, options.bind_address)
        logger.info("self-signed serving certificate cert=%s", cert.cert)
    return server_context(cert, options.client_ca_file)
