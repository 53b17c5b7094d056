"""Which transport a client's plain requests take, and the headers every request carries.

The lean HTTP/1.1 pool (kube/http1.py) unless the client goes through a proxy (configured,
or in the environment: aiohttp knows how to speak to one, the pool does not) or
`BATCHSCHED_KUBE_TRANSPORT=aiohttp` asks for the old path (a fallback, and the baseline the
lean one is measured against).
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Awaitable, Callable, Mapping
from typing import Final
from weakref import WeakKeyDictionary

from kubernetes_asyncio.client import ApiClient

from batchsched.kube.http1 import Endpoint, Pool
from batchsched.kube.tls_chain import send_as_loaded

__all__ = [
    "PROXY_VARIABLES",
    "TRANSPORT_VARIABLE",
    "lean_pool",
    "proxied",
    "request_headers",
    "send_certificate_as_loaded",
]

TRANSPORT_VARIABLE: Final = "BATCHSCHED_KUBE_TRANSPORT"
PROXY_VARIABLES: Final = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY")
# The generated client names the bearer token (in-cluster, token kubeconfigs) this way.
_AUTH_SETTINGS: Final = ["BearerToken"]

# Per client, decided on its first request: its pool, or None for aiohttp's path.
_POOLS: WeakKeyDictionary[ApiClient, Pool | None] = WeakKeyDictionary()


def proxied() -> bool:
    """Does the environment name a proxy? (aiohttp's session would then use it)"""
    return any(os.environ.get(v) or os.environ.get(v.lower()) for v in PROXY_VARIABLES)


def lean_pool(api: ApiClient) -> Pool | None:
    """The client's connection pool, made on first use; None: use aiohttp."""
    try:
        pool = _POOLS[api]
    except KeyError:
        pool = _POOLS[api] = _new_pool(api)
        return pool
    if pool is not None and pool.endpoint.url != api.configuration.host:
        # The host is read per request on aiohttp's path too: a client pointed elsewhere
        # (a test cutting a leader off, a failover address) goes there from now on.
        pool.close()
        pool = _POOLS[api] = _new_pool(api)
    return pool


def _new_pool(api: ApiClient) -> Pool | None:
    rest = api.rest_client
    if os.environ.get(TRANSPORT_VARIABLE, "http1") == "aiohttp" or rest.proxy or proxied():
        return None
    tls = _tls_context(api)
    pool = Pool(Endpoint(str(api.configuration.host), tls, rest.server_hostname or None))
    _close_with(api, pool)
    return pool


def send_certificate_as_loaded(api: ApiClient) -> None:
    """The context aiohttp's connector holds (the lean pool shares it) sends the client
    certificate without the chain OpenSSL would build up to the CA: kube/tls_chain.py says
    what that costs the API server. Call before the first request."""
    held = _held_context(api)
    if held is not None and api.configuration.cert_file:
        send_as_loaded(held)


def _held_context(api: ApiClient) -> ssl.SSLContext | None:
    held = getattr(api.rest_client.pool_manager.connector, "_ssl", None)
    return held if isinstance(held, ssl.SSLContext) else None


def _tls_context(api: ApiClient) -> ssl.SSLContext:
    """The context aiohttp's connector was built with (CA, client certificate and key,
    verification as configured), so both paths trust and present the same; built the way
    kubernetes_asyncio builds it where the connector does not hold one."""
    held = _held_context(api)
    if held is not None:
        return held
    cfg = api.configuration
    context = ssl.create_default_context(cafile=cfg.ssl_ca_cert)
    if cfg.cert_file:
        context.load_cert_chain(cfg.cert_file, keyfile=cfg.key_file)
        send_as_loaded(context)
    if not cfg.verify_ssl:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if cfg.disable_strict_ssl_verification:
        context.verify_flags &= ~ssl.VERIFY_X509_STRICT
    return context


def _close_with(api: ApiClient, pool: Pool) -> None:
    """Closing the client (`await api.close()`, `async with ApiClient`) closes the pool's
    connections too: the client closes its REST client, so that call is wrapped."""
    rest = api.rest_client
    close_rest: Callable[[], Awaitable[None]] = rest.close

    async def close() -> None:
        pool.close()
        await close_rest()

    rest.close = close  # type: ignore[method-assign]


async def request_headers(
    api: ApiClient, headers: Mapping[str, str], query: list[tuple[str, str]]
) -> dict[str, str]:
    """`headers` plus what `api.call_api` would add: default headers (User-Agent), cookie,
    and its auth settings, read per request so `refresh_api_key_hook` still renews rotated
    in-cluster tokens."""
    merged = {**headers, **api.default_headers}
    if api.cookie:
        merged["Cookie"] = api.cookie
    await api.update_params_for_auth(merged, query, _AUTH_SETTINGS)
    return merged
