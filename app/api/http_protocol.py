"""The HTTP/1.1 connection Hermes serves on: uvicorn's httptools protocol with limits on the
request head and read timeouts, and the uvicorn options every way of serving passes
(`hermes serve`, with or without `--workers`, and `app.testing.serve`).

httptools has no limit of its own and keeps a header field whole (one bytes object grown on
every read) until it ends: a 32 MiB header was parsed and handed to the app, and ten of them took
hundreds of MiB and seconds of CPU. So the bytes are counted as they arrive, before the parser
sees them: it is fed at most what is left of `max_header_bytes`, and a head that fills it is
answered 431 (414 if the request line has not ended) and the connection closed, the rest never
read; a chunked body's framing and trailers may outgrow the body by no more than that. The
header fields are counted once the head is whole (the byte limit bounds what it holds until
then). A head must arrive within `header_timeout_s` of the connection (or, on a kept-alive one,
of its first byte) and a body within `body_timeout_s` of its head, else 408. Nothing times a
response being written: a slow reader of a stream is not a slow sender, and idle keep-alive
stays uvicorn's.

These answers come from the connection, before any route: the one error shape, the status of
the error's entry in `app.api.errors.WIRE`, `connection: close`.

uvicorn's internals this relies on (the parser callbacks, `data_received`, the cycle's flags) are
pinned with uvicorn itself; `tests/api/test_http_protocol.py` fails when they change.
"""

from __future__ import annotations

import asyncio
import functools
import http
import json
from dataclasses import dataclass
from typing import Any

import httptools
from uvicorn.config import Config
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

from app import errors as e
from app.api.errors import INTERNAL, wire_for
from app.observability import metrics
from app.settings import HttpSettings, Settings


@dataclass(frozen=True)
class ReadLimits:
    max_header_bytes: int  # request line, header fields and the blank line, as sent
    max_headers: int  # header fields
    header_timeout_s: float
    body_timeout_s: float

    @classmethod
    def from_settings(cls, settings: HttpSettings) -> ReadLimits:
        return cls(
            settings.max_header_bytes,
            settings.max_headers,
            settings.header_timeout_s,
            settings.body_timeout_s,
        )


def serving_options(settings: Settings) -> dict[str, Any]:
    """What every `uvicorn.run` and `uvicorn.Config` of Hermes passes, besides where to listen."""
    # uvicorn calls `http` like a class; a partial carries the limits and, unlike a class made
    # per settings, pickles to the `--workers` processes.
    return {
        "http": functools.partial(
            LimitedHttpProtocol, limits=ReadLimits.from_settings(settings.http)
        )
    }


class LimitedHttpProtocol(HttpToolsProtocol):
    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
        *,
        limits: ReadLimits,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self.limits = limits
        self._in_head = True  # reading a request head, or waiting for one; else its body
        self._head_bytes = 0  # of the head being read
        self._line_ended = False  # its request line has (else a refusal is 414)
        self._body_fed = 0  # bytes fed while reading the body, and the body's own among them:
        self._body_bytes = 0  # the rest is chunk framing and trailers
        self._head_timer: asyncio.TimerHandle | None = None
        self._body_timer: asyncio.TimerHandle | None = None
        self._refused = False

    # -- the connection ---------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._head_timer = self.loop.call_later(self.limits.header_timeout_s, self._head_late)

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_timers()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        # In place of uvicorn's: the same parser errors and upgrades, fed in measured pieces.
        if self._refused:
            return  # answered: what still comes is dropped unread
        self._unset_keepalive_if_required()
        view, pos, end = memoryview(data), 0, len(data)
        limit = self.limits.max_header_bytes
        while pos < end:
            if self._in_head:
                n = min(limit - self._head_bytes, end - pos)
                if n <= 0:
                    self._refuse(self._head_too_large())
                    return
                self._head_bytes += n
                if not self._line_ended:
                    self._line_ended = data.find(b"\n", pos, pos + n) >= 0
            else:
                # Pieces of at most `limit` here too: a pipelined head that starts inside one
                # goes uncounted for no more than that.
                n = min(limit, end - pos)
                self._body_fed += n
            if not self._feed(view[pos : pos + n]):
                return
            pos += n
            if not self._in_head and self._body_fed - self._body_bytes > limit + self._body_bytes:
                self._refuse(
                    e.HeadersTooLarge(
                        f"the request's chunk framing and trailer fields are larger than its"
                        f" body and {limit} bytes",
                        max_header_bytes=limit,
                    )
                )
                return
        if not self._in_head:
            if self._body_timer is None:
                self._body_timer = self.loop.call_later(self.limits.body_timeout_s, self._body_late)
        elif self._head_bytes and self._head_timer is None:  # a kept-alive connection's next
            self._head_timer = self.loop.call_later(self.limits.header_timeout_s, self._head_late)

    def _feed(self, piece: memoryview) -> bool:
        """Parse `piece`; False once the connection is done with (answered, upgraded, closing)."""
        try:
            self.parser.feed_data(piece)
        except httptools.HttpParserCallbackError as exc:
            refusal = exc.__context__  # what a callback raised
            if isinstance(refusal, e.HermesError):
                self._refuse(refusal)
            else:
                self._not_http()
            return False
        except httptools.HttpParserError:
            self._not_http()
            return False
        except httptools.HttpParserUpgrade:
            self._cancel_timers()
            if self._should_upgrade():
                self.handle_websocket_upgrade()
            else:
                self._unsupported_upgrade_warning()
            return False
        return not self.transport.is_closing()

    # -- parser callbacks -------------------------------------------------------------------------

    def on_headers_complete(self) -> None:
        # Counted once the head is whole: `max_header_bytes` already bounds what it holds.
        if len(self.headers) > self.limits.max_headers:
            # Raised into the parser, which stops; `_feed` answers it.
            raise e.HeadersTooLarge(
                f"the request has more than {self.limits.max_headers} header fields",
                max_headers=self.limits.max_headers,
            )
        self._in_head, self._head_bytes, self._line_ended = False, 0, False
        self._body_fed = self._body_bytes = 0
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None
        super().on_headers_complete()

    def on_body(self, body: bytes) -> None:
        self._body_bytes += len(body)
        super().on_body(body)

    def on_message_complete(self) -> None:
        self._in_head = True
        if self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None
        super().on_message_complete()

    # -- refusals ---------------------------------------------------------------------------------

    def _head_too_large(self) -> e.HeadersTooLarge:
        limit = self.limits.max_header_bytes
        if not self._line_ended:
            return e.UriTooLong(
                f"the request line is longer than {limit} bytes", max_header_bytes=limit
            )
        return e.HeadersTooLarge(
            f"the request head is larger than {limit} bytes", max_header_bytes=limit
        )

    def _head_late(self) -> None:
        self._head_timer = None
        timeout = self.limits.header_timeout_s
        self._refuse(
            e.RequestTimeout(
                f"the request head did not arrive within {timeout:g} s", timeout_s=timeout
            )
        )

    def _body_late(self) -> None:
        self._body_timer = None
        timeout = self.limits.body_timeout_s
        if self.cycle.response_complete:
            # Answered without its body: nothing to say, only a connection to end.
            self.transport.close()
            return
        if self.flow.read_paused:
            # uvicorn stopped reading (the app has not taken what came, or an earlier response
            # is still going out): the wait is not the client's.
            self._body_timer = self.loop.call_later(timeout, self._body_late)
            return
        self._refuse(
            e.RequestTimeout(
                f"the request body did not arrive within {timeout:g} s of its head",
                timeout_s=timeout,
            )
        )

    def _not_http(self) -> None:
        self.logger.warning("Invalid HTTP request received.")  # as uvicorn logs it
        self._refuse(e.BadRequest("the request is not valid HTTP/1.1"))

    def _refuse(self, error: e.HermesError) -> None:
        """Answer `error` and close, reading nothing more. While a response to a request on this
        connection is still to be written, that response is its last answer instead."""
        if self.transport.is_closing():
            return
        self._refused = True
        self._cancel_timers()
        metrics.HTTP_REFUSED.labels(code=error.code).inc()
        cycle = self.cycle
        if cycle is not None and not cycle.response_complete:
            if self._in_head or cycle.response_started:
                # An earlier request's answer (or this one's, begun) comes first; then close.
                cycle.keep_alive = False
                return
            # Our answer is this request's: the app, still waiting for the body, sees a client
            # that went away and writes nothing after it.
            cycle.disconnected = True
            cycle.message_event.set()
        wire = wire_for(type(error)) or INTERNAL
        body = json.dumps(error.body()).encode()
        phrase = http.HTTPStatus(wire.status).phrase.encode()
        head = [b"HTTP/1.1 %d %s\r\n" % (wire.status, phrase)]
        head += [b"%s: %s\r\n" % field for field in self.server_state.default_headers]
        head.append(
            b"content-type: application/json\r\ncontent-length: %d\r\nconnection: close\r\n\r\n"
            % len(body)
        )
        self.transport.write(b"".join(head) + body)
        self.transport.close()

    def _cancel_timers(self) -> None:
        for timer in (self._head_timer, self._body_timer):
            if timer is not None:
                timer.cancel()
        self._head_timer = self._body_timer = None
