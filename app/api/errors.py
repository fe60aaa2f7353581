"""Every error leaves the API in one shape: {"error": {"code", "message", "details"}}.

`WIRE` is the one place that says how a Hermes error answers over HTTP: its status, and
whether its own code and message are shown. It is looked up along the error's class
hierarchy, so a subclass answers like its base unless it has an entry of its own. Errors
that should never reach a caller answer as a bug (`INTERNAL`): 500, a fixed message, logged.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match, Mount

from app import errors as e

log = logging.getLogger(__name__)

_HTTP_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    406: "not_acceptable",
    413: "payload_too_large",
    415: "unsupported_media_type",
    429: "rate_limited",
}


@dataclass(frozen=True)
class Wire:
    """How an error answers: its HTTP status and, when `code` is set, that code and a fixed
    message in place of the error's own (which may say more than a caller should see)."""

    status: int
    code: str | None = None
    message: str | None = None


_PROBED_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")

INTERNAL = Wire(500, "internal_error", "something went wrong on our side")

WIRE: dict[type[BaseException], Wire] = {
    # the caller asked for something that isn't there
    e.NotFound: Wire(404),
    # the request is wrong
    e.BadRequest: Wire(400),
    e.InvalidInput: Wire(422),  # InvalidCursor too
    e.PayloadTooLarge: Wire(413),
    e.UnsupportedMediaType: Wire(415),
    e.HeadersTooLarge: Wire(431),  # answered by the connection, app.api.http_protocol
    e.UriTooLong: Wire(414),
    e.RequestTimeout: Wire(408),
    e.Unauthorized: Wire(401),
    e.Forbidden: Wire(403),
    # the request conflicts with the current state
    e.Conflict: Wire(409),
    # too much at once
    e.QueueFull: Wire(429),
    e.StepQueueFull: Wire(429),
    e.RateLimited: Wire(429),  # TooManyStreams too
    e.BudgetExceeded: Wire(429),
    # something Hermes depends on can't answer
    e.CircuitOpen: Wire(503),
    e.Unavailable: Wire(503),
    e.UpstreamLLMError: Wire(502),
    e.CancelTimeout: Wire(504),  # the process running the turn did not end it in time
    e.DatabaseUnavailable: Wire(503),  # away for now: retry (a message with client_message_id)
    # a turn the caller waited for failed: the turn's own code, status by how it ended
    e.TurnFailed: Wire(502),
    e.TurnTimedOut: Wire(504),
    e.TurnInterrupted: Wire(503),
    e.TurnSessionDeleted: Wire(410),
    e.TurnOverBudget: Wire(429),
    # no caller's doing: configuration, the database, an error meant to be handled inside
    e.Fault: INTERNAL,
}


def wire_for(kind: type[BaseException]) -> Wire | None:
    """The entry of the nearest class in `kind`'s hierarchy that has one."""
    for cls in kind.__mro__:
        found = WIRE.get(cls)
        if found is not None:
            return found
    return None


def error_response(status: int, code: str, message: str, **details: Any) -> JSONResponse:
    return JSONResponse(
        {"error": {"code": code, "message": message, "details": details}}, status_code=status
    )


def _clean(errors: list[Any]) -> list[dict[str, Any]]:
    out = []
    for err in errors:
        loc = [str(p) for p in err.get("loc", ())]
        out.append({"field": ".".join(loc), "message": err.get("msg", ""), "type": err.get("type")})
    return out


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(e.HermesError)
    async def hermes_error(_request: Request, exc: e.HermesError) -> JSONResponse:
        wire = wire_for(type(exc)) or INTERNAL
        if wire.code is not None:
            log.exception("error that should not reach a caller", exc_info=exc)
            return error_response(wire.status, wire.code, wire.message or "")
        response = JSONResponse(exc.body(), status_code=wire.status)
        retry_after = exc.details.get("retry_after_s")
        if isinstance(retry_after, int | float) and wire.status in (429, 503):
            response.headers["Retry-After"] = str(max(1, math.ceil(retry_after)))
        return response

    @app.exception_handler(RequestValidationError)
    async def validation_error(_request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = _clean(list(exc.errors()))
        if any(e["type"] == "json_invalid" for e in errors):
            # Not a JSON document at all: malformed, not an invalid value (400, not 422).
            return error_response(
                400, "invalid_json", "the request body is not valid JSON", errors=errors
            )
        return error_response(422, "validation_error", "the request is invalid", errors=errors)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = _HTTP_CODES.get(exc.status_code, "http_error")
        message = exc.detail if isinstance(exc.detail, str) else code.replace("_", " ")
        response = error_response(exc.status_code, code, message)
        for name, value in (exc.headers or {}).items():
            response.headers[name] = value
        if exc.status_code == 405:
            response.headers["Allow"] = allowed_methods(request, response.headers.get("Allow", ""))
        return response

    @app.exception_handler(Exception)
    async def unexpected(_request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error", exc_info=exc)
        return error_response(500, "internal_error", "something went wrong on our side")


def allowed_methods(request: Request, fallback: str) -> str:
    """Every method some route serves at this path. Starlette's own 405 names the methods of
    the first route that matched the path only, and one path often has several routes (`GET`
    and `POST /v1/sessions`). Asked of the router itself, method by method, so routes of
    included routers count too; a mount (static files) answers its own 405s (`fallback`)."""
    routes = [r for r in request.app.router.routes if not isinstance(r, Mount)]
    allowed = [
        method
        for method in _PROBED_METHODS
        if any(r.matches({**request.scope, "method": method})[0] is Match.FULL for r in routes)
    ]
    return ", ".join(allowed) or fallback
