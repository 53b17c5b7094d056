"""A lean HTTP/1.1 keep-alive transport for the client's plain requests (`request_json`).

aiohttp's client costs about a third of the scheduler's CPU per pod on the backlog bench
(a session request builds a ClientRequest, walks its headers, wraps the answer in a
ClientResponse and a stream reader: ~0.78 ms of client CPU per Event POST). Here a request
is one bytes buffer written on a pooled connection and its answer is read by the small
parser in kube/http1_parse.py. Watches keep aiohttp (`open_stream`), and so does every
client whose requests go through a proxy.

Connections: one `asyncio.Protocol` each, reused LIFO (the most recently used is the least
likely to have been closed by the server), dropped after `IDLE_S` idle as aiohttp's
keep-alive timeout does. The client's in-flight limit (kube/in_flight.py) bounds how many
are in use at once; at most `MAX_IDLE` wait idle.

A reused connection the server closed before sending any byte of the answer is retried once
on a fresh connection, but only for an idempotent request: a POST may have reached the
server before the close, so it is given to the caller as unanswered (`ConnectionError`).
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Iterable
from typing import Final, cast
from urllib.parse import quote, urlsplit

from batchsched.kube.http1_parse import ProtocolError, Response, ResponseParser
from batchsched.kube.in_flight import DEFAULT_MAX_IN_FLIGHT
from batchsched.kube.throttle import IDEMPOTENT_METHODS

__all__ = ["Connection", "Endpoint", "Pool", "ProtocolError", "Response", "StaleConnection"]

IDLE_S: Final = 15.0
MAX_IDLE: Final = DEFAULT_MAX_IN_FLIGHT  # a burst's connections are kept for the next burst
# What a request target may hold unquoted (RFC 3986 pchar, "/" and "?"): anything else is
# percent-encoded, as aiohttp's URL handling would.
_SAFE_TARGET: Final = frozenset(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~!$&'()*+,;=:@/%?"
)


class StaleConnection(ConnectionResetError):
    """The server closed a connection before any byte of the answer came back."""


class Endpoint:
    """Where requests go: the client's host URL, TLS context and server name, parsed once."""

    def __init__(self, url: str, tls: ssl.SSLContext | None, server_name: str | None) -> None:
        self.url = url
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"API server URL {url!r} is not http(s)://host[:port]")
        self.https = parts.scheme == "https"
        self.host = parts.hostname
        self.port = parts.port or (443 if self.https else 80)
        self.prefix = parts.path.rstrip("/")
        self.tls = (tls or ssl.create_default_context()) if self.https else None
        self.server_name = (server_name or self.host) if self.https else None
        self.head = f"Host: {parts.netloc}\r\n"


class Connection(asyncio.Protocol):
    """One persistent connection: a request written whole, its answer parsed as it comes."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.usable = True  # False once closed, broken or out of step with us
        self.idle_since = 0.0
        self._parser: ResponseParser | None = None
        self._answer: asyncio.Future[Response] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # asyncio's transports subclass asyncio.Transport; uvloop's TLS transport only
        # has its methods
        self.transport = cast(asyncio.Transport, transport)

    def exchange(self, request: bytes, head_request: bool) -> asyncio.Future[Response]:
        """Send `request`; the future is its answer."""
        assert self.transport is not None
        self._parser = ResponseParser(head_request)
        self._answer = asyncio.get_running_loop().create_future()
        self.transport.write(request)
        return self._answer

    def data_received(self, data: bytes) -> None:
        answer, parser = self._answer, self._parser
        if answer is None or parser is None or answer.done():
            self.close()  # bytes nobody asked for: the connection is out of step
            return
        try:
            response = parser.feed(data)
        except ProtocolError as err:
            self.close()
            answer.set_exception(err)
            return
        if response is not None:
            self._answer = None
            answer.set_result(response)

    def eof_received(self) -> bool:
        self.usable = False
        answer, parser = self._answer, self._parser
        if answer is not None and parser is not None and not answer.done():
            self._answer = None
            try:
                answer.set_result(parser.feed_eof())
            except ProtocolError as err:
                answer.set_exception(_closed(parser, err))
        return False  # close the transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.usable = False
        answer, parser = self._answer, self._parser
        if answer is not None and parser is not None and not answer.done():
            self._answer = None
            answer.set_exception(_closed(parser, exc))

    def close(self) -> None:
        self.usable = False
        if self.transport is not None:
            self.transport.close()

    def abort(self) -> None:
        self.usable = False
        if self.transport is not None:
            self.transport.abort()


def _closed(parser: ResponseParser, cause: BaseException | None) -> ConnectionError:
    if not parser.started:
        return StaleConnection("server closed the connection before answering")
    return ConnectionResetError(f"connection closed in the middle of the answer ({cause})")


class Pool:
    """A client's persistent connections to one endpoint."""

    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint
        self._idle: list[Connection] = []
        self.opened = 0  # connections made so far (tests and benchmarks read it)

    async def request(
        self, method: str, path: str, query: str, headers: Iterable[tuple[str, str]], body: bytes
    ) -> Response:
        """One exchange; `OSError` (`ConnectionError` included) or `ProtocolError` when no
        whole answer came. The caller bounds it in time: a cancelled exchange closes its
        connection."""
        request = self._encode(method, path, query, headers, body)
        conn, reused = await self._checkout()
        try:
            response = await self._exchange(conn, method, request)
        except StaleConnection:
            conn.abort()
            if not reused or method not in IDEMPOTENT_METHODS:
                raise
            conn, _ = await self._checkout(fresh=True)
            response = await self._exchange(conn, method, request)
        self._check_in(conn, response.keep_alive)
        return response

    async def _exchange(self, conn: Connection, method: str, request: bytes) -> Response:
        try:
            return await conn.exchange(request, method == "HEAD")
        except BaseException:
            conn.abort()  # its state is unknown (timeout, cancel, broken answer)
            raise

    async def _checkout(self, fresh: bool = False) -> tuple[Connection, bool]:
        """An idle connection still open (a closed one provably has not carried this
        request), else a new one; whether it was reused."""
        now = time.monotonic()
        while self._idle and not fresh:
            conn = self._idle.pop()
            transport = conn.transport
            is_open = conn.usable and transport is not None and not transport.is_closing()
            if is_open and now - conn.idle_since <= IDLE_S:
                return conn, True
            conn.close()
        end = self.endpoint
        loop = asyncio.get_running_loop()
        _, conn = await loop.create_connection(
            Connection, end.host, end.port, ssl=end.tls, server_hostname=end.server_name
        )
        self.opened += 1
        return conn, False

    def _check_in(self, conn: Connection, keep_alive: bool) -> None:
        now = time.monotonic()
        # Reuse is LIFO, so the oldest idle ones sit at the bottom: close the expired there,
        # rather than keep their sockets until the server drops them.
        while self._idle and now - self._idle[0].idle_since > IDLE_S:
            self._idle.pop(0).close()
        if keep_alive and conn.usable and len(self._idle) < MAX_IDLE:
            conn.idle_since = now
            self._idle.append(conn)
        else:
            conn.close()

    def _encode(
        self, method: str, path: str, query: str, headers: Iterable[tuple[str, str]], body: bytes
    ) -> bytes:
        target = self.endpoint.prefix + path
        if not _SAFE_TARGET.issuperset(target):
            target = quote(target, safe="/%:@!$&'()*+,;=-._~")
        if query:
            target += "?" + query
        lines = [f"{method} {target} HTTP/1.1\r\n", self.endpoint.head]
        for name, value in headers:
            if "\r" in value or "\n" in value:
                raise ValueError(f"header {name} holds a line break; refusing to send it")
            lines.append(f"{name}: {value}\r\n")
        if body or method not in ("GET", "HEAD", "DELETE", "OPTIONS"):
            lines.append(f"Content-Length: {len(body)}\r\n")
        lines.append("\r\n")
        return "".join(lines).encode("latin-1", "strict") + body

    def idle_open(self) -> int:
        """Idle connections not seen closed (yet)."""
        return sum(1 for conn in self._idle if conn.usable)

    def close(self) -> None:
        for conn in self._idle:
            conn.close()
        self._idle.clear()
