"""Reading an HTTP/1.1 answer from the bytes a connection hands over: a pure state machine
(as h11 is), fed whatever arrived, with no socket in sight, so every way an answer can be
split across reads is testable without a server. kube/http1.py moves the bytes.

Only what an answer from the API server needs: the status line, headers, a body framed by
Content-Length, chunked transfer coding or the end of the connection, and whether the
connection may carry another request. Interim 1xx answers are skipped.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from multidict import CIMultiDict

__all__ = ["ProtocolError", "Response", "ResponseParser"]

# Bounds on what we hold before the body: an API server's head is a few hundred bytes.
MAX_HEAD_BYTES: Final = 64 * 1024
MAX_CHUNK_LINE_BYTES: Final = 4096

_HEAD_END: Final = b"\r\n\r\n"
_CRLF: Final = b"\r\n"


class ProtocolError(Exception):
    """The answer is not HTTP/1.1 as this client reads it (the message says where)."""


@dataclass(frozen=True, slots=True)
class Response:
    status: int
    headers: CIMultiDict[str]
    body: bytes
    # May the connection carry another request? (no `Connection: close`, framed body)
    keep_alive: bool


@dataclass(frozen=True, slots=True)
class _Head:
    status: int
    headers: CIMultiDict[str]
    keep_alive: bool


def parse_head(raw: bytes) -> _Head:
    """Purely computational: the status line and headers, without the blank line ending
    them."""
    lines = raw.split(_CRLF)
    status_line = lines[0]
    parts = status_line.split(b" ", 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or len(parts[1]) != 3:
        raise ProtocolError(f"malformed status line {status_line[:80]!r}")
    if not parts[1].isdigit():
        raise ProtocolError(f"malformed status code in {status_line[:80]!r}")
    headers: CIMultiDict[str] = CIMultiDict()
    for line in lines[1:]:
        name, sep, value = line.partition(b":")
        if not sep or not name or name != name.strip():
            raise ProtocolError(f"malformed header line {line[:80]!r}")
        headers.add(name.decode("latin-1"), value.strip().decode("latin-1"))
    tokens = {t.strip().lower() for v in headers.getall("Connection", ()) for t in v.split(",")}
    # HTTP/1.0 closes unless asked to keep alive; 1.1 keeps alive unless told to close.
    http10 = parts[0] == b"HTTP/1.0"
    keep_alive = "keep-alive" in tokens if http10 else "close" not in tokens
    return _Head(int(parts[1]), headers, keep_alive)


class ResponseParser:
    """One answer's bytes in (`feed`, then `feed_eof` if the connection ends), the
    `Response` out once it is complete. `ProtocolError` for anything malformed."""

    def __init__(self, head_request: bool = False) -> None:
        self._no_body = head_request
        self._buf = bytearray()
        self._head: _Head | None = None
        self._step: Callable[[], bool | Response] = self._on_head
        self._left = 0  # body bytes still due: Content-Length or the current chunk
        self._body: list[bytes] = []
        self.started = False  # has any byte of the answer arrived?

    def feed(self, data: bytes) -> Response | None:
        """Take the bytes that arrived; the answer once it is whole, else None."""
        if data:
            self.started = True
        self._buf += data
        return self._advance()

    def feed_eof(self) -> Response:
        """The connection ended: the answer if that was its end, else `ProtocolError`."""
        if self._step == self._on_until_close:
            self._body.append(bytes(self._buf))
            return self._done(keep_alive=False)
        state = self._step.__name__.removeprefix("_on_").replace("_", " ")
        where = "before any byte of the answer" if not self.started else f"in its {state}"
        raise ProtocolError(f"connection closed {where}")

    def _advance(self) -> Response | None:
        while True:
            result = self._step()
            if isinstance(result, Response):
                return result
            if not result:
                return None

    def _on_head(self) -> bool | Response:
        end = self._buf.find(_HEAD_END)
        if end < 0:
            if len(self._buf) > MAX_HEAD_BYTES:
                raise ProtocolError(f"answer head longer than {MAX_HEAD_BYTES} bytes")
            return False
        head = parse_head(bytes(self._buf[:end]))
        del self._buf[: end + 4]
        if 100 <= head.status < 200:
            return True  # interim (100 Continue): the real answer follows
        self._head = head
        return self._frame_body(head)

    def _frame_body(self, head: _Head) -> bool | Response:
        if self._no_body or head.status in (204, 304):
            return self._done(head.keep_alive)
        coding = head.headers.get("Transfer-Encoding")
        if coding is not None:
            if coding.strip().lower() != "chunked":
                raise ProtocolError(f"unsupported Transfer-Encoding {coding!r}")
            self._step = self._on_chunk_size
            return True
        lengths = head.headers.getall("Content-Length", ())
        if not lengths:
            self._step = self._on_until_close  # no framing: the body ends with the connection
            return False
        if len(set(lengths)) != 1 or not lengths[0].isdigit():
            raise ProtocolError(f"malformed Content-Length {', '.join(lengths)!r}")
        self._left = int(lengths[0])
        self._step = self._on_body
        return True

    def _on_body(self) -> bool | Response:
        if len(self._buf) < self._left:
            return False
        self._body.append(bytes(self._buf[: self._left]))
        del self._buf[: self._left]
        return self._done(self._head_keep_alive())

    def _on_until_close(self) -> bool:
        return False  # everything stays buffered until feed_eof

    def _on_chunk_size(self) -> bool:
        end = self._buf.find(_CRLF)
        if end < 0:
            if len(self._buf) > MAX_CHUNK_LINE_BYTES:
                raise ProtocolError("chunk size line too long")
            return False
        line = bytes(self._buf[:end]).split(b";", 1)[0].strip()
        del self._buf[: end + 2]
        try:
            self._left = int(line, 16)
        except ValueError:
            raise ProtocolError(f"malformed chunk size {line[:40]!r}") from None
        if self._left < 0 or line.startswith((b"-", b"+", b"0x", b"0X")):
            raise ProtocolError(f"malformed chunk size {line[:40]!r}")
        self._step = self._on_chunk_data if self._left else self._on_trailer
        return True

    def _on_chunk_data(self) -> bool:
        if len(self._buf) < self._left + 2:
            return False
        if self._buf[self._left : self._left + 2] != _CRLF:
            raise ProtocolError("chunk not followed by CRLF")
        self._body.append(bytes(self._buf[: self._left]))
        del self._buf[: self._left + 2]
        self._step = self._on_chunk_size
        return True

    def _on_trailer(self) -> bool | Response:
        end = self._buf.find(_CRLF)
        if end < 0:
            if len(self._buf) > MAX_HEAD_BYTES:
                raise ProtocolError("trailer too long")
            return False
        del self._buf[: end + 2]
        if end == 0:  # the blank line ending the trailer section
            return self._done(self._head_keep_alive())
        return True

    def _head_keep_alive(self) -> bool:
        return self._head is not None and self._head.keep_alive

    def _done(self, keep_alive: bool) -> Response:
        head = self._head
        assert head is not None
        self._step = self._on_done
        # Bytes beyond the answer were not asked for (no pipelining): the connection is
        # out of step with us and must not carry another request.
        keep_alive = keep_alive and not self._buf
        return Response(head.status, head.headers, b"".join(self._body), keep_alive)

    def _on_done(self) -> bool:
        return False
