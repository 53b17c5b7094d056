"""Who may read the secure port, as kube-scheduler decides it: authentication by a verified
client certificate, else a bearer token the API server vouches for (TokenReview), else
anonymous; authorization of a non-resource path and verb by the API server
(SubjectAccessReview), except the always-allowed paths (/healthz, /readyz, /livez).

The decisions are pure functions; `AuthGate` adds the API calls, their caches and the
aiohttp middleware."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Final, Generic, Protocol, TypeVar

from aiohttp import web

from batchsched.kube.client import ApiError, ApiUnavailable
from batchsched.kube.delegated import ANONYMOUS, User
from batchsched.runtime.tls import peer_identity

__all__ = ["DEFAULT_ALWAYS_ALLOW", "AuthGate", "always_allowed", "bearer_token", "verb_of"]

logger = logging.getLogger(__name__)

# kube-scheduler's --authorization-always-allow-paths default.
DEFAULT_ALWAYS_ALLOW: Final = ("/healthz", "/readyz", "/livez")
# kube's webhook cache defaults: token reviews 10 s, access reviews 10 s allowed and denied.
CACHE_TTL_S: Final = 10.0
_CACHE_MAX: Final = 4096


def always_allowed(path: str, patterns: Sequence[str]) -> bool:
    """Purely computational: `path` matches a pattern exactly, or a pattern ending in `*`
    by prefix (kube's always-allow-paths matching)."""
    return any(path.startswith(p[:-1]) if p.endswith("*") else path == p for p in patterns)


def verb_of(method: str) -> str:
    """The non-resource verb of an HTTP method: lower case, HEAD read as get."""
    return "get" if method.upper() == "HEAD" else method.lower()


def bearer_token(authorization: str | None) -> str | None:
    """The token of an `Authorization: Bearer <token>` header; None without one."""
    if not authorization:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None


class Reviews(Protocol):
    async def authenticate(self, token: str) -> User | None: ...

    async def authorize(self, user: User, path: str, verb: str) -> tuple[bool, str]: ...


K = TypeVar("K")
V = TypeVar("V")


@dataclass
class _Cache(Generic[K, V]):
    now: Callable[[], float]
    entries: dict[K, tuple[float, V]]

    def get(self, key: K) -> tuple[bool, V | None]:
        found = self.entries.get(key)
        if found is None or found[0] <= self.now():
            return False, None
        return True, found[1]

    def put(self, key: K, value: V) -> None:
        if len(self.entries) >= _CACHE_MAX:
            self.entries.clear()  # bounded; a full cache costs one round of reviews
        self.entries[key] = (self.now() + CACHE_TTL_S, value)


class AuthGate:
    """Authenticates and authorizes each request to the secure port."""

    def __init__(
        self,
        reviews: Reviews,
        always_allow: Sequence[str] = DEFAULT_ALWAYS_ALLOW,
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        self._reviews = reviews
        self._always_allow = tuple(always_allow)
        self._tokens: _Cache[str, User | None] = _Cache(now, {})
        self._access: _Cache[tuple[User, str, str], tuple[bool, str]] = _Cache(now, {})

    async def user_of(self, request: web.Request) -> User | None:
        """The requester; None when a token was sent that the API server does not accept."""
        transport = request.transport
        peer = peer_identity(transport.get_extra_info("peercert")) if transport else None
        if peer is not None:
            return User(peer[0], peer[1])
        token = bearer_token(request.headers.get("Authorization"))
        if token is None:
            return ANONYMOUS
        hit, user = self._tokens.get(token)
        if not hit:
            user = await self._reviews.authenticate(token)
            self._tokens.put(token, user)
        return user

    async def allowed(self, user: User, path: str, verb: str) -> tuple[bool, str]:
        if always_allowed(path, self._always_allow):
            return True, "always allowed"
        key = (user, path, verb)
        hit, decision = self._access.get(key)
        if not hit or decision is None:
            decision = await self._reviews.authorize(user, path, verb)
            self._access.put(key, decision)
        return decision

    @web.middleware
    async def middleware(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        verb = verb_of(request.method)
        try:
            user = await self.user_of(request)
            if user is None:
                return web.Response(status=401, text="Unauthorized\n")
            allowed, reason = await self.allowed(user, request.path, verb)
        except (ApiError, ApiUnavailable) as err:
            logger.warning("delegated auth failed path=%s error=%s", request.path, err)
            return web.Response(status=500, text=f"authentication or authorization failed: {err}\n")
        if not allowed:
            detail = f": {reason}" if reason else ""
            text = f'forbidden: User "{user.name}" cannot {verb} path "{request.path}"{detail}\n'
            return web.Response(status=403, text=text)
        return await handler(request)
