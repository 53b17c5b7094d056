"""One extender over HTTP(S): a POST per verb with the extender's timeout, behind a circuit
breaker, library exceptions translated once here into `ExtenderUnavailable`."""

from __future__ import annotations

import base64
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass

import aiohttp

from batchsched.extenders.settings import ExtenderSettings

# (extender URL prefix, verb, result "ok" | "error" | "circuit_open", seconds): for metrics.
Observe = Callable[[str, str, str, float], None]


def _ignore(extender: str, verb: str, result: str, seconds: float) -> None:
    return None


class ExtenderUnavailable(Exception):
    """The extender could not be asked or answered wrongly (timeout, refused, bad JSON)."""


@dataclass(slots=True)
class Breaker:
    """Open after `threshold` failures in a row: calls fail at once for `cooldown` seconds,
    then one call goes through (half open); a success closes it."""

    threshold: int = 3
    cooldown: float = 10.0
    failures: int = 0
    open_until: float = 0.0

    def allows(self, now: float) -> bool:
        return self.failures < self.threshold or now >= self.open_until

    def succeeded(self) -> None:
        self.failures = 0

    def failed(self, now: float) -> None:
        self.failures += 1
        if self.failures >= self.threshold:
            self.open_until = now + self.cooldown


def ssl_context(settings: ExtenderSettings) -> ssl.SSLContext | bool:
    """kube's tlsConfig: CA, client certificate and key from files or base64 data."""
    if not settings.enable_https:
        return False
    tls = settings.tls_config
    if tls is None:
        return ssl.create_default_context()
    ca_data = base64.b64decode(tls.ca_data).decode() if tls.ca_data else None
    context = ssl.create_default_context(cafile=tls.ca_file or None, cadata=ca_data)
    if tls.insecure:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if tls.cert_file:
        context.load_cert_chain(tls.cert_file, tls.key_file or None)
    return context


class ExtenderClient:
    def __init__(
        self,
        settings: ExtenderSettings,
        session: aiohttp.ClientSession | None = None,
        now: Callable[[], float] = time.monotonic,
        breaker: Breaker | None = None,
        observe: Observe = _ignore,
    ) -> None:
        self.settings = settings
        self._session = session
        self._now = now
        self._observe = observe
        self.breaker = breaker if breaker is not None else Breaker()
        self._ssl = ssl_context(settings)
        tls = settings.tls_config
        self._server_name = tls.server_name if tls is not None and tls.server_name else None

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    @property
    def name(self) -> str:
        return self.settings.url_prefix

    async def post(self, verb: str, body: dict[str, object]) -> object:
        """The decoded JSON answer to one call, or ExtenderUnavailable."""
        started = self._now()
        if not self.breaker.allows(started):
            self._observe(self.name, verb, "circuit_open", 0.0)
            raise ExtenderUnavailable(f"extender {self.name}: circuit open after failures")
        try:
            answer = await self._post(verb, body)
        except ExtenderUnavailable:
            ended = self._now()
            self.breaker.failed(ended)
            self._observe(self.name, verb, "error", ended - started)
            raise
        self.breaker.succeeded()
        self._observe(self.name, verb, "ok", self._now() - started)
        return answer

    async def _post(self, verb: str, body: dict[str, object]) -> object:
        url = self.settings.url(verb)
        timeout = aiohttp.ClientTimeout(total=self.settings.timeout)
        if self._session is None:  # made on the event loop, at the first call
            self._session = aiohttp.ClientSession()
        try:
            async with self._session.post(
                url, json=body, timeout=timeout, ssl=self._ssl, server_hostname=self._server_name
            ) as response:
                if response.status != 200:
                    text = (await response.text())[:200]
                    raise ExtenderUnavailable(f"extender {url}: HTTP {response.status}: {text}")
                return await response.json(content_type=None)
        except TimeoutError as err:
            raise ExtenderUnavailable(
                f"extender {url}: no answer in {self.settings.timeout:g}s"
            ) from err
        except (aiohttp.ClientError, ValueError, ssl.SSLError) as err:
            raise ExtenderUnavailable(f"extender {url}: {err}") from err
