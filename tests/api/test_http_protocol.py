"""The connection's own limits, through raw sockets against the real service: a request head
over `HERMES_MAX_HEADER_BYTES` or `HERMES_MAX_HEADERS` is 431 (a request line alone, 414) before
the rest is sent; a head or body slower than its timeout is 408; every refusal is the one error
shape and closes the connection. Streams, kept-alive connections and requests right at the
limits are untouched."""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import json
import pickle
import re
import socket
import time
import tomllib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import pytest
import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle

from app.api.http_protocol import LimitedHttpProtocol, ReadLimits, serving_options
from app.llm.testing import FakeLLMServer, Gate, Reply
from app.settings import PROJECT_ROOT
from app.testing import LiveService, SseReader, post_message_stream, serve
from tests.conftest import new_session

MiB = 1024 * 1024
SLACK_S = 1.5  # a timeout fires within this of its deadline, on a busy two-core machine


@pytest.fixture
def backend() -> str:
    return "sqlite"  # the connection is the same on both engines


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes

    def error(self) -> dict[str, Any]:
        assert self.headers["content-type"] == "application/json", self.headers
        error: dict[str, Any] = json.loads(self.body)["error"]
        assert set(error) == {"code", "message", "details"}
        return error


class Raw:
    """One connection over a plain socket, to send what no HTTP client would."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buffer = b""

    @classmethod
    async def to(cls, svc: LiveService) -> Raw:
        url = urlsplit(svc.base_url)
        sock = socket.socket()
        sock.setblocking(False)
        await asyncio.get_running_loop().sock_connect(sock, (url.hostname, url.port))
        return cls(sock)

    async def send(self, data: bytes) -> bool:
        """False once the server has closed the connection."""
        try:
            await asyncio.get_running_loop().sock_sendall(self.sock, data)
        except (BrokenPipeError, ConnectionResetError):
            return False
        await asyncio.sleep(0)  # the server runs in this loop: let it read
        return True

    def answered(self) -> bool:
        """The server has sent something or closed, without waiting for it."""
        try:
            self.sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
        except BlockingIOError:
            return False
        except ConnectionResetError:
            return True
        return True

    async def response(self) -> Answer:
        """The next response (a body by content-length)."""
        while b"\r\n\r\n" not in self.buffer:
            await self._more()
        head, _, self.buffer = self.buffer.partition(b"\r\n\r\n")
        status_line, *fields = head.decode("latin-1").split("\r\n")
        headers = {k.lower(): v.strip() for k, _, v in (f.partition(":") for f in fields)}
        length = int(headers.get("content-length", "0"))
        while len(self.buffer) < length:
            await self._more()
        body, self.buffer = self.buffer[:length], self.buffer[length:]
        return Answer(int(status_line.split()[1]), headers, body)

    async def flood(self, size: int = 32 * MiB) -> tuple[Answer, int]:
        """Sends `size` bytes of 'a' until the server answers (then, unanswered, ends the head);
        its answer and how much got out before it."""
        sent, chunk = 0, b"a" * 65536
        while sent < size and not self.answered() and await self.send(chunk):
            sent += len(chunk)
        if sent >= size:
            await self.send(b"\r\n\r\n")
        return await self.response(), sent

    async def trickle(self, piece: Callable[[int], bytes]) -> Answer:
        """Sends `piece(n)` every 50 ms, a slow client that never ends, until the server
        answers; that answer."""
        n = 0
        while not self.answered():
            await self.send(piece(n))
            n += 1
            await asyncio.sleep(0.05)
        return await self.response()

    async def closed_by_server(self) -> bool:
        """Reads to the end: True once the server has closed (nothing else may come first)."""
        try:
            await self._more()
        except EOFError:
            return self.buffer == b""
        return False

    async def _more(self) -> None:
        try:
            chunk = await asyncio.get_running_loop().sock_recv(self.sock, 65536)
        except ConnectionResetError:
            chunk = b""
        if not chunk:
            raise EOFError(f"the server closed the connection; unread: {self.buffer[:200]!r}")
        self.buffer += chunk

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
async def raw() -> AsyncIterator[list[Raw]]:
    """Connections made in a test, closed after it."""
    made: list[Raw] = []
    yield made
    for connection in made:
        connection.close()


async def connect(svc: LiveService, made: list[Raw]) -> Raw:
    connection = await Raw.to(svc)
    made.append(connection)
    return connection


def get(path: str = "/healthz", *fields: bytes) -> bytes:
    return b"GET %s HTTP/1.1\r\nHost: t\r\n%s\r\n" % (path.encode(), b"".join(fields))


def padded_get(size: int, fields: int = 2) -> bytes:
    """A GET /healthz whose head is exactly `size` bytes with `fields` header fields."""
    extra = [b"X-F%d: v\r\n" % n for n in range(fields - 2)]
    bare = len(get("/healthz", *extra, b"X-Pad: \r\n"))
    return get("/healthz", *extra, b"X-Pad: " + b"p" * (size - bare) + b"\r\n")


async def refused_metric(svc: LiveService, code: str) -> float:
    text = (await svc.client.get("/metrics")).text
    line = f'hermes_http_refused_total{{code="{code}"}} '
    rows = [row for row in text.splitlines() if row.startswith(line)]
    return float(rows[0].split()[-1]) if rows else 0.0


# -- heads over the limits ---------------------------------------------------------------------


async def test_a_32_mib_header_is_431_long_before_it_is_all_sent(
    service: LiveService, raw: list[Raw]
) -> None:
    before = await refused_metric(service, "headers_too_large")
    conn = await connect(service, raw)
    await conn.send(b"GET /healthz HTTP/1.1\r\nHost: t\r\nX-Big: ")
    async with asyncio.timeout(60):
        answer, sent = await conn.flood()
        assert answer.status == 431, (answer, sent)
        assert answer.headers["connection"] == "close"
        assert answer.error() == {
            "code": "headers_too_large",
            "message": "the request head is larger than 16384 bytes",
            "details": {"max_header_bytes": 16384},
        }
        assert await conn.closed_by_server()
    # The server answered having read a limit's worth; what the client got out in the meantime
    # sat in socket buffers, never in the server's memory.
    assert sent < 4 * MiB, f"answered only after {sent} bytes"
    assert await refused_metric(service, "headers_too_large") == before + 1
    assert (await service.client.get("/healthz")).status_code == 200


async def test_five_thousand_header_fields_are_431(service: LiveService, raw: list[Raw]) -> None:
    conn = await connect(service, raw)
    await conn.send(get("/healthz", *(b"X-H%d: v\r\n" % n for n in range(5000))))
    async with asyncio.timeout(10):
        answer = await conn.response()
        assert answer.status == 431
        assert answer.error()["code"] == "headers_too_large"
        assert await conn.closed_by_server()


async def test_fields_past_max_headers_are_431_even_within_the_bytes(
    make_settings: Any, raw: list[Raw]
) -> None:
    async with serve(make_settings(max_headers=20)) as svc:
        conn = await connect(svc, raw)
        await conn.send(padded_get(1000, fields=21))
        async with asyncio.timeout(10):
            answer = await conn.response()
            assert answer.status == 431
            assert answer.error() == {
                "code": "headers_too_large",
                "message": "the request has more than 20 header fields",
                "details": {"max_headers": 20},
            }
            assert await conn.closed_by_server()


async def test_a_request_line_over_the_limit_is_414(make_settings: Any, raw: list[Raw]) -> None:
    async with serve(make_settings(max_header_bytes=2048)) as svc:
        conn = await connect(svc, raw)
        await conn.send(b"GET /healthz?q=" + b"x" * 4000 + b" HTTP/1.1\r\nHost: t\r\n\r\n")
        async with asyncio.timeout(10):
            answer = await conn.response()
            assert answer.status == 414
            assert answer.error()["code"] == "uri_too_long"
            assert await conn.closed_by_server()


async def test_a_request_right_at_the_limits_is_served_and_the_connection_kept(
    make_settings: Any, raw: list[Raw]
) -> None:
    async with serve(make_settings(max_header_bytes=2048, max_headers=20)) as svc:
        conn = await connect(svc, raw)
        async with asyncio.timeout(10):
            for _ in range(3):  # and again on the same connection
                await conn.send(padded_get(2048, fields=20))
                assert (await conn.response()).status == 200
            await conn.send(padded_get(2049, fields=20))
            answer = await conn.response()
            assert answer.status == 431, answer
            assert answer.error()["details"] == {"max_header_bytes": 2048}


async def test_chunked_bodies_pass_and_a_huge_trailer_is_431(
    service: LiveService, raw: list[Raw]
) -> None:
    async def pieces() -> AsyncIterator[bytes]:
        for piece in (b'{"user_id"', b': "u1"', b"}"):
            yield piece

    made = await service.client.post(
        "/v1/sessions", content=pieces(), headers={"Content-Type": "application/json"}
    )
    assert made.status_code == 201, made.text
    assert made.request.headers["transfer-encoding"] == "chunked"

    conn = await connect(service, raw)
    await conn.send(
        b"POST /v1/sessions HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\nX-Trailer: "
    )
    async with asyncio.timeout(60):
        answer, sent = await conn.flood()
        assert answer.status == 431, (answer, sent)
        assert answer.error()["code"] == "headers_too_large"
        assert await conn.closed_by_server()
    assert sent < 4 * MiB


# -- heads and bodies too slow -----------------------------------------------------------------


async def test_a_head_sent_a_line_at_a_time_is_408_within_the_timeout(
    make_settings: Any, raw: list[Raw]
) -> None:
    async with serve(make_settings(header_timeout_s=0.5)) as svc:
        before = await refused_metric(svc, "request_timeout")
        started = time.monotonic()
        conn = await connect(svc, raw)
        await conn.send(b"GET /healthz HTTP/1.1\r\n")
        async with asyncio.timeout(10):
            answer = await conn.trickle(lambda n: b"X-Slow-%d: v\r\n" % n)  # slowloris
            assert await conn.closed_by_server()
        elapsed = time.monotonic() - started
        assert answer.status == 408
        assert answer.error() == {
            "code": "request_timeout",
            "message": "the request head did not arrive within 0.5 s",
            "details": {"timeout_s": 0.5},
        }
        assert 0.5 <= elapsed < 0.5 + SLACK_S, elapsed
        assert await refused_metric(svc, "request_timeout") == before + 1


async def test_a_connection_that_sends_nothing_is_408_and_closed(
    make_settings: Any, raw: list[Raw]
) -> None:
    async with serve(make_settings(header_timeout_s=0.5)) as svc:
        started = time.monotonic()
        conn = await connect(svc, raw)
        async with asyncio.timeout(10):
            answer = await conn.response()
            assert await conn.closed_by_server()
        assert answer.status == 408 and answer.error()["code"] == "request_timeout"
        assert 0.5 <= time.monotonic() - started < 0.5 + SLACK_S


async def test_a_body_sent_a_byte_at_a_time_is_408_within_the_timeout(
    make_settings: Any, raw: list[Raw]
) -> None:
    async with serve(make_settings(body_timeout_s=0.5)) as svc:
        conn = await connect(svc, raw)
        await conn.send(
            b"POST /v1/sessions HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
            b"Content-Length: 200\r\n\r\n{"
        )
        started = time.monotonic()
        async with asyncio.timeout(10):
            answer = await conn.trickle(lambda n: b" ")
            assert await conn.closed_by_server()
        elapsed = time.monotonic() - started
        assert answer.status == 408
        assert answer.error() == {
            "code": "request_timeout",
            "message": "the request body did not arrive within 0.5 s of its head",
            "details": {"timeout_s": 0.5},
        }
        assert 0.5 <= elapsed < 0.5 + SLACK_S, elapsed
        listed = await svc.client.get("/v1/sessions")
        assert listed.status_code == 200 and listed.json()["items"] == []  # nothing was made


async def silence_is_refused(svc: LiveService, made: list[Raw]) -> None:
    """Returns once a connection that sent nothing got its 408: the head timeout has passed."""
    witness = await connect(svc, made)
    assert (await witness.response()).status == 408


async def test_a_kept_alive_connection_is_not_cut_by_the_head_timeout(
    make_settings: Any, raw: list[Raw]
) -> None:
    async with serve(make_settings(header_timeout_s=0.3)) as svc:
        conn = await connect(svc, raw)
        async with asyncio.timeout(10):
            await conn.send(get())
            assert (await conn.response()).status == 200
            await silence_is_refused(svc, raw)  # idle past the head timeout (not keep-alive's)
            await conn.send(get())
            assert (await conn.response()).status == 200


async def test_streams_outlive_both_timeouts(
    make_settings: Any, fake_llm: FakeLLMServer, raw: list[Raw]
) -> None:
    settings = make_settings(header_timeout_s=0.3, body_timeout_s=0.3, sse_keepalive_s=0.1)
    async with serve(settings) as svc:
        session_id = await new_session(svc)
        async with svc.client.stream("GET", f"/v1/sessions/{session_id}/events") as events:
            reader, text = SseReader(), events.aiter_text()
            async with asyncio.timeout(10):
                while not reader.comments:  # the stream's first keep-alive
                    reader.feed(await anext(text))
                # Not read for longer than either timeout (a slow consumer), a turn streamed
                # over a POST held open as long, both go on.
                gate = Gate(after=1)
                fake_llm.enqueue(Reply("held past both timeouts", chunks=3, gate=gate))
                async with post_message_stream(svc.client, session_id, "hi") as turn:
                    assert turn.status_code == 200
                    turn_text = turn.aiter_text()
                    streamed = await anext(turn_text)
                    while not gate.reached:
                        streamed += await anext(turn_text)
                    await silence_is_refused(svc, raw)
                    slow = await connect(svc, raw)  # and a body that never comes is refused
                    await slow.send(b"POST /v1/sessions HTTP/1.1\r\nContent-Length: 9\r\n\r\n")
                    assert (await slow.response()).status == 408
                    gate.open()
                    streamed += "".join([chunk async for chunk in turn_text])
                assert "event: turn.completed" in streamed
                seen: list[str] = []
                while "turn.completed" not in seen:
                    seen += [event.event for event in reader.feed(await anext(text))]


# -- how it is wired ---------------------------------------------------------------------------

# uvicorn's `HttpToolsProtocol.data_received`, which `LimitedHttpProtocol.data_received` replaces:
# when uvicorn's changes, port the change (a new error or upgrade path) and take its new digest.
DATA_RECEIVED_SHA256 = "010a7ae59a5d3b1a5e7326ce246878568629d126a076d8af5ba10cab040fae43"


def test_the_uvicorn_code_it_replaces_and_relies_on_is_the_pinned_one() -> None:
    pinned = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text("utf-8"))
    assert f"uvicorn[standard]=={uvicorn.__version__}" in pinned["project"]["dependencies"]
    source = inspect.getsource(HttpToolsProtocol.data_received)
    assert hashlib.sha256(source.encode()).hexdigest() == DATA_RECEIVED_SHA256, source
    for hook in (
        "connection_made",
        "connection_lost",
        "on_header",
        "on_headers_complete",
        "on_body",
        "on_message_complete",
        "_unset_keepalive_if_required",
        "_should_upgrade",
        "handle_websocket_upgrade",
        "_unsupported_upgrade_warning",
    ):
        assert callable(getattr(HttpToolsProtocol, hook)), hook
    init = inspect.getsource(HttpToolsProtocol.__init__)
    for attribute in (
        "parser",
        "transport",
        "flow",
        "cycle",
        "headers",
        "loop",
        "logger",
        "server_state",
    ):
        assert re.search(rf"self\.{attribute}(: [^=]+)? = ", init), attribute
    cycle = inspect.getsource(RequestResponseCycle.__init__)
    for flag in ("response_started", "response_complete", "keep_alive", "disconnected"):
        assert re.search(rf"self\.{flag}(: [^=]+)? = ", cycle), flag
    assert "self.message_event = message_event" in cycle


def test_every_way_of_serving_passes_the_limits(make_settings: Any) -> None:
    settings = make_settings(max_header_bytes=4096, max_headers=50, body_timeout_s=7)
    http = serving_options(settings)["http"]
    # `--workers` pickles uvicorn's config to each worker process.
    for protocol in (http, pickle.loads(pickle.dumps(http))):
        assert protocol.func is LimitedHttpProtocol
        assert protocol.keywords == {"limits": ReadLimits(4096, 50, 10.0, 7.0)}


@pytest.mark.parametrize("workers", [1, 2])
def test_hermes_serve_runs_uvicorn_with_the_limited_protocol(
    monkeypatch: pytest.MonkeyPatch, workers: int
) -> None:
    from app import cli, runtime
    from app.observability import logs

    ran: dict[str, Any] = {}
    monkeypatch.setattr(runtime, "preflight", lambda settings: None)
    monkeypatch.setattr(logs, "configure_logging", lambda *args: None)
    monkeypatch.setattr(uvicorn, "run", lambda app, **options: ran.update(options))
    monkeypatch.setenv("HERMES_MAX_HEADERS", "40")
    if workers > 1:
        monkeypatch.setenv("HERMES_DATABASE_URL", "postgresql://nobody@127.0.0.1:1/none")
    assert cli.main(["serve", "--workers", str(workers)]) == 0
    assert ran["http"].func is LimitedHttpProtocol
    assert ran["http"].keywords["limits"].max_headers == 40
