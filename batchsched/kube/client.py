"""The API client, and the raw-JSON requests every adapter makes through it.

Responses are read as JSON and parsed straight into our lean views: kubernetes_asyncio's
generated models cost several times the parse itself (`python -m batchsched.bench parse`) and
its Binding response handling is broken. Library and HTTP failures are translated here, once,
into `ApiError` (the server answered no) and `ApiUnavailable` (no answer: retry later), both
defined in kube/api_errors.py.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Final
from urllib.parse import urlencode
from weakref import WeakKeyDictionary

import aiohttp
import yaml
from kubernetes_asyncio import client, config
from kubernetes_asyncio.client import ApiClient

from batchsched.kube.api_errors import ApiError, ApiUnavailable, NotLeading, status_error
from batchsched.kube.http1 import ProtocolError
from batchsched.kube.in_flight import DEFAULT_MAX_IN_FLIGHT, limit_in_flight, turn
from batchsched.kube.throttle import (
    Backoff,
    Throttle,
    limit_requests,
    retry_delay,
    throttle_of,
)
from batchsched.kube.transport import (
    lean_pool,
    proxied,
    request_headers,
    send_certificate_as_loaded,
)

__all__ = [
    "JSON",
    "MERGE_PATCH",
    "STRATEGIC_MERGE_PATCH",
    "ApiError",
    "ApiUnavailable",
    "Backoff",
    "KubeConfigError",
    "NotLeading",
    "Throttle",
    "api_client",
    "fence_writes",
    "limit_in_flight",
    "limit_requests",
    "open_stream",
    "request_json",
    "request_unread",
]

log = logging.getLogger(__name__)

JSON: Final = "application/json"
MERGE_PATCH: Final = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH: Final = "application/strategic-merge-patch+json"

# aiohttp's connector limit: the library default (100) would queue a burst of binds behind
# each other and behind the long-lived watch connections that each hold one.
DEFAULT_MAX_CONNECTIONS: Final = 1000
DEFAULT_TIMEOUT_S: Final = 30.0
_CONFIG_ERRORS: Final = (config.ConfigException, OSError, ValueError, TypeError, yaml.YAMLError)


class KubeConfigError(RuntimeError):
    """No usable credentials: the message lists what was tried and why each failed."""


# Per client: may it write now? Only the replica holding the Lease writes (DESIGN.md,
# invariant 7); the fence is checked on every non-GET request, here, in one place, so no
# code path (housekeeping, an Event for a malformed object seen by a standby) can forget it.
_FENCES: WeakKeyDictionary[ApiClient, Callable[[], float]] = WeakKeyDictionary()


def fence_writes(api: ApiClient, write_window: Callable[[], float]) -> None:
    """From now on, every write through `api` (except the Lease's own, which pass
    `fenced=False`) first asks `write_window()`: the seconds this replica may still write
    (until its lease could be taken over). None left: `NotLeading`; some: the request must
    be done within them, so a write stuck in a queue (an overloaded API server) is dropped
    here rather than arriving after a standby took over."""
    _FENCES[api] = write_window


def _fence_window(api: ApiClient, method: str, path: str) -> float:
    window = _FENCES.get(api)
    left = float("inf") if window is None else window()
    if left <= 0:
        raise NotLeading(f"{method} {path}: not the leader; this replica does not write")
    return left


async def _wait_for_token(api: ApiClient) -> None:
    throttle = throttle_of(api)
    if throttle is not None and throttle.bucket is not None:
        delay = throttle.bucket.reserve()
        if delay > 0:
            await asyncio.sleep(delay)


async def api_client(
    kubeconfig: str | None = None,
    *,
    max_connections: int = DEFAULT_MAX_CONNECTIONS,
    max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
) -> ApiClient:
    """A client from `kubeconfig`, else $KUBECONFIG, else the in-cluster service account,
    else ~/.kube/config; `KubeConfigError` when none of them works. At most `max_in_flight`
    of its requests are in flight at once (`limit_in_flight`)."""
    cfg = client.Configuration()
    # The connector is built from the configuration when ApiClient is created: set it first.
    cfg.connection_pool_maxsize = max_connections
    tried: list[str] = []
    for source in _config_sources(kubeconfig):
        try:
            await _load(source, cfg)
        except _CONFIG_ERRORS as err:
            tried.append(f"{source}: {err}")
            continue
        log.info("kube config source=%s host=%s", source, cfg.host)
        api = ApiClient(cfg)
        send_certificate_as_loaded(api)
        await _without_per_request_env_lookups(api)
        limit_in_flight(api, max_in_flight)
        return api
    raise KubeConfigError("no usable Kubernetes credentials; tried " + "; ".join(tried))


async def _without_per_request_env_lookups(api: ApiClient) -> None:
    """kubernetes_asyncio opens its session with trust_env=True, so aiohttp looks up ~/.netrc
    and the proxy variables on every request, each in a thread: about 0.4 ms of CPU per
    request measured here, a fifth of a pod's whole cost. Without proxy variables in the
    environment there is nothing to find, so use a session that does not look."""
    if proxied():
        return
    rest = api.rest_client
    old = rest.pool_manager
    connector = old.connector
    old.detach()  # keep the connector (pool size, TLS context) for the new session
    await old.close()
    rest.pool_manager = aiohttp.ClientSession(
        connector=connector, trust_env=False, read_bufsize=2**21
    )


def _config_sources(kubeconfig: str | None) -> list[str]:
    if kubeconfig:
        return [kubeconfig]  # asked for explicitly: falling back would hide a typo
    sources = []
    if os.environ.get("KUBECONFIG"):
        sources.append(os.environ["KUBECONFIG"])
    sources.append("in-cluster")
    default = Path.home() / ".kube" / "config"
    if default.exists():
        sources.append(str(default))
    return sources


async def _load(source: str, cfg: client.Configuration) -> None:
    if source == "in-cluster":
        config.load_incluster_config(client_configuration=cfg)  # type: ignore[no-untyped-call]
        return
    # $KUBECONFIG may list several files; like kubectl, missing ones are skipped, but the
    # library would "load" a list of only missing files without complaint.
    paths = [Path(p).expanduser() for p in source.split(os.pathsep) if p]
    if not any(p.exists() for p in paths):
        raise FileNotFoundError(f"no kubeconfig file at {source}")
    await config.load_kube_config(config_file=source, client_configuration=cfg)


async def request_json(
    api: ApiClient,
    method: str,
    path: str,
    *,
    query: Sequence[tuple[str, str]] = (),
    body: Mapping[str, object] | None = None,
    content_type: str = JSON,
    timeout: float = DEFAULT_TIMEOUT_S,
    fenced: bool = True,
) -> dict[str, object]:
    """One request; the decoded JSON body of a 2xx answer, `ApiError` for any other.

    A write (any method but GET) is refused with `NotLeading` when the client is fenced
    (`fence_writes`) and its replica does not hold the Lease; `fenced=False` is for the
    Lease itself."""
    answer = _answered(api, method, path, query, body, content_type, timeout, fenced)
    return _decode_object(*await answer)


async def request_unread(
    api: ApiClient,
    method: str,
    path: str,
    *,
    body: Mapping[str, object] | None = None,
    content_type: str = JSON,
    timeout: float = DEFAULT_TIMEOUT_S,
) -> None:
    """`request_json` (fenced, retried, errors raised alike) for a write whose answer is not
    used: a 2xx body is not decoded. The created Event and the Binding's Status came back
    only to be thrown away (issue #17): decoding the Event was ~0.04 ms of client CPU per
    POST against the real API server, 0.41 -> 0.37 ms, on a loaded box."""
    await _answered(api, method, path, (), body, content_type, timeout, fenced=True)


async def _answered(
    api: ApiClient,
    method: str,
    path: str,
    query: Sequence[tuple[str, str]],
    body: Mapping[str, object] | None,
    content_type: str,
    timeout: float,
    fenced: bool,
) -> tuple[int, bytes]:
    """Status and body of the 2xx answer; retries as the client's throttle allows."""
    deadline = time.monotonic() + timeout
    headers = {"Accept": JSON, "Content-Type": content_type}
    retries = 0
    while True:
        await _wait_for_token(api)
        if fenced and method != "GET":
            # Asked when the request leaves, after the token: a write that waited its turn
            # in the bucket (or out a Retry-After) must still end within the window.
            deadline = min(deadline, time.monotonic() + _fence_window(api, method, path))
        async with turn(api, method, path, deadline):
            # The time left is read once a turn came: the wait for one counts against it.
            status, data, answer_headers = await _send(
                api, method, path, list(query), headers, body, deadline - time.monotonic()
            )
        if 200 <= status < 300:
            return status, data
        delay = _retry_wait(api, method, status, answer_headers, retries, deadline)
        if delay is None:
            raise status_error(status, data)
        retries += 1
        log.info(
            "retrying after Retry-After method=%s path=%s code=%d wait=%.1fs",
            *(method, path, status, delay),
        )
        await asyncio.sleep(delay)


def _retry_wait(
    api: ApiClient,
    method: str,
    status: int,
    headers: Mapping[str, str],
    retries: int,
    deadline: float,
) -> float | None:
    throttle = throttle_of(api)
    if throttle is None:
        return None
    left = deadline - time.monotonic()
    delay = retry_delay(throttle.policy, method, status, headers, retries, left, time.time())
    if delay is not None:
        throttle.on_retry(status, method)
    return delay


async def _send(
    api: ApiClient,
    method: str,
    path: str,
    query: list[tuple[str, str]],
    headers: dict[str, str],
    body: Mapping[str, object] | None,
    timeout: float,
) -> tuple[int, bytes, Mapping[str, str]]:
    """One HTTP exchange: status, body and headers; no answer is `ApiUnavailable`.

    On the client's lean pool (kube/transport.py) where it has one, else through aiohttp."""
    if timeout <= 0:
        raise ApiUnavailable(f"{method} {path}: no time left (client rate limit or retries)")
    data = None if body is None else json.dumps(body, separators=(",", ":")).encode()
    pool = lean_pool(api)
    try:
        if pool is not None:
            async with asyncio.timeout(timeout):
                headers = await request_headers(api, headers, query)
                answer = await pool.request(
                    method, path, urlencode(query) if query else "", headers.items(), data or b""
                )
            return answer.status, answer.body, answer.headers
        resp = await _request(
            api, method, path, query, headers, data, aiohttp.ClientTimeout(total=timeout)
        )
        try:
            data = await resp.read()
        finally:
            resp.release()
    except (aiohttp.ClientError, TimeoutError, OSError, ProtocolError) as err:
        raise ApiUnavailable(f"{method} {path}: {type(err).__name__}: {err}") from err
    return resp.status, data, resp.headers


async def _request(
    api: ApiClient,
    method: str,
    path: str,
    query: list[tuple[str, str]],
    headers: dict[str, str],
    data: bytes | None,
    timeout: aiohttp.ClientTimeout,
) -> aiohttp.ClientResponse:
    """The request `api.call_api` would send, made on its session directly: the generic
    client walks headers and body through its model serializer and encodes the body as text
    on every call (about a tenth of a request's client CPU, measured on Event POSTs against
    the real API server: 0.84 -> 0.75 ms). What it does that matters is kept:
    its host, default headers (User-Agent) and cookie; its auth settings, read per request so
    `refresh_api_key_hook` still renews rotated in-cluster tokens; its session, whose
    connector carries the TLS context (CA, client certificate); its proxy and TLS server
    name."""
    headers = await request_headers(api, headers, query)
    url = f"{api.configuration.host}{path}"
    if query:
        url += "?" + urlencode(query)
    rest = api.rest_client
    session: aiohttp.ClientSession = rest.pool_manager
    return await session.request(
        method,
        url,
        headers=headers,
        data=data,
        timeout=timeout,
        proxy=rest.proxy or None,
        proxy_headers=rest.proxy_headers or None,
        server_hostname=rest.server_hostname or None,
    )


async def open_stream(
    api: ApiClient,
    path: str,
    query: Sequence[tuple[str, str]],
    timeout: aiohttp.ClientTimeout,
) -> aiohttp.ClientResponse:
    """Start a streaming GET (a watch); the caller reads `.content` and releases it.

    Opening takes a token of the client's bucket; what streams after does not (client-go)."""
    await _wait_for_token(api)
    try:
        resp = await _request(api, "GET", path, list(query), {"Accept": JSON}, None, timeout)
        if 200 <= resp.status < 300:
            return resp
        try:
            data = await resp.read()
        finally:
            resp.release()
    except (aiohttp.ClientError, TimeoutError, OSError) as err:
        raise ApiUnavailable(f"GET {path}: {type(err).__name__}: {err}") from err
    raise status_error(resp.status, data)


def _decode_object(status: int, data: bytes) -> dict[str, object]:
    try:
        decoded = json.loads(data)
    except (ValueError, RecursionError) as err:
        raise ApiError(status, "InvalidResponse", f"answer is not JSON: {err}") from err
    if not isinstance(decoded, dict):
        raise ApiError(status, "InvalidResponse", "answer is not a JSON object")
    return decoded


def micro_time(epoch_seconds: float) -> str:
    """RFC 3339 with microseconds, the API's MicroTime format."""
    moment = datetime.fromtimestamp(epoch_seconds, tz=UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def rfc3339(epoch_seconds: float) -> str:
    return datetime.fromtimestamp(epoch_seconds, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


async def merge_patch(api: ApiClient, path: str, body: Mapping[str, object]) -> object:
    """A JSON merge patch (RFC 7386) of the object at `path`."""
    return await request_json(
        api, "PATCH", path, body=body, content_type="application/merge-patch+json"
    )
