"""The HTTP/1.1 answer parser (kube/http1_parse.py) fed bytes as a connection would hand
them over: whole, split at every byte, or cut short."""

from __future__ import annotations

import pytest

from batchsched.kube.http1_parse import ProtocolError, Response, ResponseParser

LENGTH = (
    b"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n"
    b'{"a":"bcd"}'
)
CHUNKED = (
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nAudit-Id: x\r\n\r\n"
    b'4;ext=1\r\n{"a"\r\n7\r\n:"bcd"}\r\n0\r\nTrailer-Field: t\r\n\r\n'
)


def feed_all(parser: ResponseParser, pieces: list[bytes]) -> Response | None:
    response = None
    for piece in pieces:
        got = parser.feed(piece)
        if got is not None:
            assert response is None, "the answer completed twice"
            response = got
    return response


def every_byte(raw: bytes) -> list[bytes]:
    return [raw[i : i + 1] for i in range(len(raw))]


@pytest.mark.parametrize(
    "raw",
    [pytest.param(LENGTH, id="content-length"), pytest.param(CHUNKED, id="chunked")],
)
@pytest.mark.parametrize("split", ["whole", "byte by byte", "halves"])
def test_an_answer_is_read_the_same_however_its_bytes_are_split(raw: bytes, split: str) -> None:
    pieces = {
        "whole": [raw],
        "byte by byte": every_byte(raw),
        "halves": [raw[: len(raw) // 2], raw[len(raw) // 2 :]],
    }[split]
    response = feed_all(ResponseParser(), pieces)
    assert response is not None
    assert response.body == b'{"a":"bcd"}'
    assert response.keep_alive


def test_the_answer_is_not_complete_until_its_last_body_byte_came() -> None:
    parser = ResponseParser()
    assert parser.feed(LENGTH[:-1]) is None
    assert parser.feed(LENGTH[-1:]) is not None


def test_headers_are_read_case_insensitively_with_the_status_code() -> None:
    response = ResponseParser().feed(
        b"HTTP/1.1 429 Too Many Requests\r\nretry-after:  3 \r\nContent-Length: 0\r\n\r\n"
    )
    assert response is not None
    assert response.status == 429
    assert response.headers["Retry-After"] == "3"
    assert response.body == b""


@pytest.mark.parametrize(
    ("head", "keep_alive"),
    [
        pytest.param(b"HTTP/1.1 200 OK\r\nConnection: close", False, id="1.1 told to close"),
        pytest.param(b"HTTP/1.1 200 OK\r\nConnection: Keep-Alive, Close", False, id="close token"),
        pytest.param(b"HTTP/1.1 200 OK", True, id="1.1 keeps alive by default"),
        pytest.param(b"HTTP/1.0 200 OK", False, id="1.0 closes by default"),
        pytest.param(b"HTTP/1.0 200 OK\r\nConnection: keep-alive", True, id="1.0 asked to keep"),
    ],
)
def test_whether_the_connection_may_carry_another_request(head: bytes, keep_alive: bool) -> None:
    response = ResponseParser().feed(head + b"\r\nContent-Length: 2\r\n\r\n{}")
    assert response is not None
    assert response.keep_alive is keep_alive


def test_a_body_without_length_ends_with_the_connection_which_is_then_not_reused() -> None:
    parser = ResponseParser()
    assert parser.feed(b'HTTP/1.1 200 OK\r\n\r\n{"a"') is None
    assert parser.feed(b":1}") is None
    response = parser.feed_eof()
    assert response.body == b'{"a":1}'
    assert not response.keep_alive


@pytest.mark.parametrize(
    ("raw", "where"),
    [
        pytest.param(b"", "before any byte", id="nothing came"),
        pytest.param(LENGTH[:30], "in its head", id="cut in the head"),
        pytest.param(LENGTH[:-3], "in its body", id="cut in a length body"),
        pytest.param(CHUNKED[:-5], "in its trailer", id="cut in a chunked trailer"),
    ],
)
def test_a_connection_closed_before_the_answer_ended_is_an_error_saying_where(
    raw: bytes, where: str
) -> None:
    parser = ResponseParser()
    assert parser.feed(raw) is None
    assert parser.started is bool(raw)
    with pytest.raises(ProtocolError, match=where):
        parser.feed_eof()


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        pytest.param(b"SPDY/3 200 OK\r\n\r\n", "malformed status line", id="not HTTP/1"),
        pytest.param(b"HTTP/1.1 2000 OK\r\n\r\n", "malformed status line", id="4-digit code"),
        pytest.param(b"HTTP/1.1 2x0 OK\r\n\r\n", "malformed status code", id="letter in code"),
        pytest.param(b"HTTP/1.1\r\n\r\n", "malformed status line", id="no code"),
        pytest.param(b"HTTP/1.1 200 OK\r\nno colon\r\n\r\n", "malformed header", id="header"),
        pytest.param(
            b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n",
            "malformed Content-Length",
            id="two lengths",
        ),
        pytest.param(
            b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
            "malformed Content-Length",
            id="negative length",
        ),
        pytest.param(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
            "malformed chunk size",
            id="chunk size not hex",
        ),
        pytest.param(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabcd",
            "chunk not followed by CRLF",
            id="chunk longer than said",
        ),
        pytest.param(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
            "unsupported Transfer-Encoding",
            id="other coding",
        ),
    ],
)
def test_a_malformed_answer_is_a_protocol_error_naming_what_is_wrong(
    raw: bytes, message: str
) -> None:
    with pytest.raises(ProtocolError, match=message):
        ResponseParser().feed(raw)


def test_a_head_that_never_ends_is_refused_past_the_bound() -> None:
    parser = ResponseParser()
    parser.feed(b"HTTP/1.1 200 OK\r\n")
    with pytest.raises(ProtocolError, match="head longer"):
        parser.feed(b"X-Long: " + b"a" * 70_000)


def test_an_interim_100_continue_is_skipped_for_the_real_answer() -> None:
    response = ResponseParser().feed(b"HTTP/1.1 100 Continue\r\n\r\n" + LENGTH)
    assert response is not None
    assert response.status == 201


@pytest.mark.parametrize(
    ("raw", "head_request"),
    [
        pytest.param(b"HTTP/1.1 204 No Content\r\n\r\n", False, id="204"),
        pytest.param(b"HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\n", True, id="HEAD"),
    ],
)
def test_answers_without_a_body_complete_at_the_end_of_their_head(
    raw: bytes, head_request: bool
) -> None:
    response = ResponseParser(head_request).feed(raw)
    assert response is not None
    assert response.body == b""
    assert response.keep_alive


def test_bytes_after_the_answer_mean_the_connection_is_out_of_step_and_not_reused() -> None:
    response = ResponseParser().feed(LENGTH + b"HTTP/1.1 200 OK\r\n")
    assert response is not None
    assert not response.keep_alive
