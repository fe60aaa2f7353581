"""Pure ASGI middleware: request body limit, request ids, metrics and access logs, and the
write lane of the session a request names.

Pure ASGI (not BaseHTTPMiddleware) so streamed SSE responses pass through untouched.
"""

from __future__ import annotations

import json
import logging
import secrets
import time
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.observability import metrics
from app.observability.logs import request_id_var
from app.storage import writer

log = logging.getLogger("hermes.access")


def _error_bytes(code: str, message: str, **details: Any) -> bytes:
    body = {"error": {"code": code, "message": message, "details": details}}
    return json.dumps(body).encode()


class BodyLimitMiddleware:
    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length")
        if declared is not None:
            try:
                too_big = int(declared) > self.max_bytes
            except ValueError:
                too_big = False
            if too_big:
                drained = await self._drain(receive)
                await self._reject(send, close=not drained)
                return
        seen = 0
        started = False
        rejected = False

        async def limited_receive() -> Message:
            nonlocal seen, rejected
            if rejected:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    rejected = True
                    if not started:
                        more = message.get("more_body", False)
                        drained = not more or await self._drain(receive)
                        await self._reject(send, close=not drained)
                    # The app sees a client that went away and stops reading.
                    return {"type": "http.disconnect"}
            return message

        async def guarded_send(message: Message) -> None:
            nonlocal started
            if rejected:
                return  # our 413 already went out
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        await self.app(scope, limited_receive, guarded_send)

    async def _drain(self, receive: Receive) -> bool:
        """Read and drop the rest of an oversized body so the client can read our answer.

        Gives up (and the connection is closed) past a few times the limit.
        """
        budget = 4 * self.max_bytes
        while budget > 0:
            message = await receive()
            if message["type"] != "http.request":
                return False
            budget -= len(message.get("body", b""))
            if not message.get("more_body", False):
                return True
        return False

    async def _reject(self, send: Send, *, close: bool) -> None:
        body = _error_bytes(
            "payload_too_large",
            f"the request body is larger than {self.max_bytes} bytes",
            max_bytes=self.max_bytes,
        )
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    *([(b"connection", b"close")] if close else []),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


class ObservabilityMiddleware:
    """Request id (X-Request-ID in and out), per-route metrics, one access log line."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        incoming = headers.get(b"x-request-id", b"").decode("latin-1")
        request_id = incoming if 0 < len(incoming) <= 64 else secrets.token_hex(8)
        token = request_id_var.set(request_id)
        start = time.perf_counter()
        status = 500

        async def send_wrapper(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message.setdefault("headers", []).append((b"x-request-id", request_id.encode()))
                route = scope.get("route")
                path = getattr(route, "path", "unmatched")
                metrics.HTTP_SECONDS.labels(route=path).observe(time.perf_counter() - start)
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            route = scope.get("route")
            path = getattr(route, "path", "unmatched")
            metrics.HTTP_REQUESTS.labels(
                route=path, method=scope["method"], status=str(status)
            ).inc()
            log.info(
                "%s %s %s",
                scope["method"],
                path,
                status,
                extra={"duration_ms": round((time.perf_counter() - start) * 1000, 2)},
            )
            request_id_var.reset(token)


class SessionLaneMiddleware:
    """A request under `/v1/sessions/{id}` writes on that session's lane, like its worker
    (app.storage.writer): the request's writes and the turns' keep one order."""

    _PREFIX = "/v1/sessions/"

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path: str = scope.get("path", "")
        if scope["type"] != "http" or not path.startswith(self._PREFIX):
            await self.app(scope, receive, send)
            return
        session_id = path[len(self._PREFIX) :].split("/", 1)[0]
        token = writer.lane.set(session_id or None)
        try:
            await self.app(scope, receive, send)
        finally:
            writer.lane.reset(token)
