"""Two families of errors under one base.

`ServiceError`s are for the caller: each has a stable `code` and an HTTP status and is turned
into the one error shape by the API's exception handler. Errors the *model* should see (bad
tool arguments, a failed tool) are not exceptions that leave a turn: they become tool
messages in the conversation (see `app.tools.results`).
"""

from __future__ import annotations

from typing import Any, ClassVar


class HermesError(Exception):
    """Base for every error Hermes raises on purpose."""


class ServiceError(HermesError):
    code: ClassVar[str] = "internal_error"
    status: ClassVar[int] = 500

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details = details

    def body(self) -> dict[str, Any]:
        return {"error": {"code": self.code, "message": self.message, "details": self.details}}


class NotFound(ServiceError):
    code = "not_found"
    status = 404


class SessionNotFound(NotFound):
    code = "session_not_found"


class TurnNotFound(NotFound):
    code = "turn_not_found"


class BadRequest(ServiceError):
    code = "bad_request"
    status = 400


class InvalidInput(ServiceError):
    code = "validation_error"
    status = 422


class Unauthorized(ServiceError):
    code = "unauthorized"
    status = 401


class Forbidden(ServiceError):
    code = "forbidden"
    status = 403


class Conflict(ServiceError):
    code = "conflict"
    status = 409


class SessionBusy(Conflict):
    code = "session_busy"


class QueueFull(ServiceError):
    code = "queue_full"
    status = 429


class RateLimited(ServiceError):
    code = "rate_limited"
    status = 429


class PayloadTooLarge(ServiceError):
    code = "payload_too_large"
    status = 413


class CircuitOpen(ServiceError):
    code = "circuit_open"
    status = 503


class Unavailable(ServiceError):
    code = "unavailable"
    status = 503


class UpstreamLLMError(ServiceError):
    """The model could not answer after retries and fallbacks."""

    code = "llm_unavailable"
    status = 502

    def __init__(self, message: str, *, code: str | None = None, **details: Any) -> None:
        super().__init__(message, **details)
        if code is not None:
            self.code = code  # type: ignore[misc]  # per-instance refinement of the class code


class TurnFailed(ServiceError):
    """A turn ended in `turn.failed`; carries the turn's own error code."""

    status = 502

    def __init__(self, code: str, message: str, **details: Any) -> None:
        super().__init__(message, **details)
        self.code = code  # type: ignore[misc]
        if code in {"turn_timeout", "llm_timeout"}:
            self.status = 504  # type: ignore[misc]
        elif code in {"interrupted", "cancelled"}:
            self.status = 503  # type: ignore[misc]
        elif code == "session_deleted":
            self.status = 410  # type: ignore[misc]
