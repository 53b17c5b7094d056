"""Client-side flow control for API requests: a token bucket, Retry-After handling, and
the reconnect backoff of watches.

kube-scheduler's client (client-go) sends every request through a token bucket of `qps`
tokens a second holding at most `burst` (KubeSchedulerConfiguration `clientConnection`,
defaults 50 and 100), and waits out a `Retry-After` the API server sends with a 429 (API
Priority and Fairness rejecting it) or a 5xx. Both are pure here: the bucket reads an injected
clock and says how long to wait; `retry_delay` says whether and how long to wait before
retrying an answer. kube/client.py does the waiting.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from typing import Final
from weakref import WeakKeyDictionary

__all__ = [
    "DEFAULT_BURST",
    "DEFAULT_QPS",
    "Backoff",
    "RetryPolicy",
    "Throttle",
    "TokenBucket",
    "bucket_for",
    "limit_requests",
    "parse_retry_after",
    "retry_delay",
    "throttle_of",
]

# kube-scheduler's defaults (componentconfig v1), also what a 0 in the file means there.
DEFAULT_QPS: Final = 50.0
DEFAULT_BURST: Final = 100
# RFC 9110's idempotent methods: the only ones retried after a 5xx, whose request may have
# taken effect. A 429 is retried for any method: the server refused it before acting.
IDEMPOTENT_METHODS: Final = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE"})


class TokenBucket:
    """golang.org/x/time/rate's limiter as client-go uses it: full (`burst` tokens) at the
    start, refilled at `qps` tokens a second, each request takes one. `reserve()` takes the
    token now and returns the seconds to wait before sending, so waiters queue in order
    (the balance goes negative, as a reservation does there)."""

    def __init__(self, qps: float, burst: int, now: Callable[[], float]) -> None:
        if qps <= 0 or burst < 1:
            raise ValueError(f"token bucket needs qps > 0 and burst >= 1 (qps={qps} burst={burst})")
        self.qps = qps
        self.burst = burst
        self._now = now
        self._tokens = float(burst)
        self._last = now()

    def reserve(self) -> float:
        """Purely computational on the clock: take one token; seconds until it is there."""
        now = self._now()
        elapsed = max(0.0, now - self._last)
        self._last = now
        self._tokens = min(float(self.burst), self._tokens + elapsed * self.qps) - 1.0
        return 0.0 if self._tokens >= 0 else -self._tokens / self.qps


def bucket_for(qps: float, burst: int, now: Callable[[], float]) -> TokenBucket | None:
    """The bucket a clientConnection asks for, with kube-scheduler's reading of it: 0 means
    the default (qps 50, burst 100); a negative qps turns the limiter off, as in client-go
    (a rest.Config with QPS < 0 gets no rate limiter)."""
    if qps < 0:
        return None
    return TokenBucket(qps or DEFAULT_QPS, burst or DEFAULT_BURST, now)


def parse_retry_after(value: str | None, now_epoch: float) -> float | None:
    """Seconds a `Retry-After` asks for: delta-seconds, or an HTTP-date (RFC 9110 10.2.3);
    None when absent or unreadable. The API server sends whole seconds; a date in the past
    means now."""
    if value is None:
        return None
    text = value.strip()
    if text.isdigit():
        return float(int(text))
    try:
        moment = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if moment.tzinfo is None:
        return None  # RFC 9110 dates are GMT; a date without a zone is not one
    return max(0.0, moment.timestamp() - now_epoch)


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How far a Retry-After is honoured: at most `max_retries` retries of one request, each
    wait at most `max_wait` seconds (a longer ask waits `max_wait`), and never past the
    request's own deadline."""

    max_retries: int = 5
    max_wait: float = 10.0


def retry_delay(
    policy: RetryPolicy,
    method: str,
    status: int,
    headers: Mapping[str, str],
    attempt: int,
    time_left: float,
    now_epoch: float,
) -> float | None:
    """Purely computational: the seconds to wait before retrying this answer, or None to
    give it to the caller. Retried: a 429 with Retry-After (any method), a 5xx with
    Retry-After for an idempotent method; `attempt` retries already made."""
    if status != 429 and not (500 <= status <= 599 and method in IDEMPOTENT_METHODS):
        return None
    if attempt >= policy.max_retries:
        return None
    asked = parse_retry_after(headers.get("Retry-After"), now_epoch)
    if asked is None:
        return None
    wait = min(asked, policy.max_wait)
    return wait if wait < time_left else None


@dataclass
class Throttle:
    """A client's flow control: the token bucket every request and every watch's opening
    goes through (None: unlimited), how far Retry-After is honoured, and a callback told of
    each retry (status code, method), for the metric."""

    bucket: TokenBucket | None
    policy: RetryPolicy = field(default_factory=RetryPolicy)
    on_retry: Callable[[int, str], None] = lambda _status, _method: None


# Per API client, as the write fence is (kube/client.py): one place every request passes.
_THROTTLES: WeakKeyDictionary[object, Throttle] = WeakKeyDictionary()


def limit_requests(api: object, throttle: Throttle) -> None:
    """From now on every request through `api` (kube/client.py's request_json and
    open_stream) waits for a token and waits out a Retry-After as `throttle` says.
    Without it: no limit and no retries."""
    _THROTTLES[api] = throttle


def throttle_of(api: object) -> Throttle | None:
    return _THROTTLES.get(api)


class Backoff:
    """Exponential reconnect delays with jitter, so replicas don't reconnect in lockstep."""

    def __init__(
        self,
        rng: random.Random,
        initial: float = 0.2,
        maximum: float = 30.0,
        jitter: float = 0.5,
    ) -> None:
        self._rng = rng
        self._initial = initial
        self._maximum = maximum
        self._jitter = jitter
        self._failures = 0

    def next_delay(self) -> float:
        """Between (1 - jitter) and 1 times initial * 2**failures, capped at maximum."""
        ceiling = min(self._maximum, self._initial * 2.0 ** min(self._failures, 64))
        self._failures += 1
        return ceiling * (1.0 - self._jitter * self._rng.random())

    def reset(self) -> None:
        self._failures = 0
