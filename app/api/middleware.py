"""Pure ASGI middleware: request body limit, request ids, metrics and access logs.

Pure ASGI (not BaseHTTPMiddleware) so streamed SSE responses pass through untouched.
"""

from __future__ import annotations

import json
import logging
import secrets
import time
from collections.abc import Mapping
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.observability import metrics
from app.observability.logs import request_id_var

log = logging.getLogger("hermes.access")


def _error_bytes(code: str, message: str, **details: Any) -> bytes:
    body = {"error": {"code": code, "message": message, "details": details}}
    return json.dumps(body).encode()


class BodyLimitMiddleware:
    """Bodies over `max_bytes` are answered 413 before the app reads them: at once when the
    `Content-Length` says so, else when what arrived passes it. A path in `paths` has a limit
    of its own (a knowledge document's upload may be larger than any other body)."""

    def __init__(
        self, app: ASGIApp, max_bytes: int, paths: Mapping[str, int] | None = None
    ) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.paths = dict(paths or {})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        max_bytes = self.paths.get(scope["path"], self.max_bytes)
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length")
        if declared is not None:
            try:
                too_big = int(declared) > max_bytes
            except ValueError:
                too_big = False
            if too_big:
                drained = await self._drain(receive, max_bytes)
                await self._reject(send, max_bytes, close=not drained)
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
                if seen > max_bytes:
                    rejected = True
                    if not started:
                        more = message.get("more_body", False)
                        drained = not more or await self._drain(receive, max_bytes)
                        await self._reject(send, max_bytes, close=not drained)
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

    async def _drain(self, receive: Receive, max_bytes: int) -> bool:
        """Read and drop the rest of an oversized body so the client can read our answer.

        Gives up (and the connection is closed) past a few times the limit.
        """
        budget = 4 * max_bytes
        while budget > 0:
            message = await receive()
            if message["type"] != "http.request":
                return False
            budget -= len(message.get("body", b""))
            if not message.get("more_body", False):
                return True
        return False

    async def _reject(self, send: Send, max_bytes: int, *, close: bool) -> None:
        body = _error_bytes(
            "payload_too_large",
            f"the request body is larger than {max_bytes} bytes",
            max_bytes=max_bytes,
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
