"""Every error Hermes raises on purpose, under one base, with no knowledge of HTTP.

Each error has a stable `code` naming what went wrong. How an error reaches a caller (its HTTP
status, and whether its own message is shown) is decided in one table in `app.api.errors`;
this module is the bottom layer and imports nothing from `app`.

Two families:
- errors for the caller (`SessionNotFound`, `RateLimited`, `UpstreamLLMError`, ...);
- `Fault`s, no caller's doing: errors that stop Hermes from starting or working
  (`ConfigError`, `DatabaseClosed`, ...) and `InternalError`s, raised and handled inside
  Hermes. Among those are the errors the *model* should see (`ToolHandlerError`): they never
  leave a turn, they become tool messages in the conversation (see `app.tools.results`).

The code is a class attribute. Three errors pass on a code chosen by what failed, and take it
as an argument: a model's failure (`UpstreamLLMError`, from the closed set in
`app.llm.failures`), a finished turn's stored code (`TurnFailed`), and a tool's refusal the
model acts on (`ToolHandlerError`).
"""

from __future__ import annotations

from typing import Any


class HermesError(Exception):
    """Base for every error Hermes raises on purpose."""

    code: str = "internal_error"

    def __init__(self, message: str = "", **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details = details

    def body(self) -> dict[str, Any]:
        """The one error shape: `{"error": {"code", "message", "details"}}`."""
        return {"error": {"code": self.code, "message": self.message, "details": self.details}}


# -- the caller asked for something that isn't there -----------------------------------------


class NotFound(HermesError):
    code = "not_found"


class SessionNotFound(NotFound):
    code = "session_not_found"


class TurnNotFound(NotFound):
    code = "turn_not_found"


class StepNotFound(NotFound):
    code = "step_not_found"


class ApprovalNotFound(NotFound):
    code = "approval_not_found"


class MemoryNotFound(NotFound):
    code = "memory_not_found"


class McpServerNotFound(NotFound):
    code = "mcp_server_not_found"


class HandoffNotFound(NotFound):
    code = "handoff_not_found"


class SummaryNotFound(NotFound):
    code = "summary_not_found"


class KeyNotFound(NotFound):
    code = "key_not_found"


class UserNotFound(NotFound):
    """Another user's data asked for with a key bound to one user: as if there were none."""

    code = "user_not_found"


class DocumentNotFound(NotFound):
    """A knowledge document this tenant does not have (another tenant's is not there either)."""

    code = "document_not_found"


class McpToolNotFound(NotFound):
    code = "mcp_tool_not_found"


# -- the caller's request is wrong ------------------------------------------------------------


class BadRequest(HermesError):
    code = "bad_request"


class InvalidInput(HermesError):
    code = "validation_error"


class InvalidCursor(InvalidInput):
    """A page cursor this service did not issue (or one for another listing)."""

    def __init__(self, message: str = "cursor is not one this service issued") -> None:
        super().__init__(message, field="cursor")


class InvalidDocument(InvalidInput):
    """A knowledge document that cannot be read: not UTF-8, an unknown format, a PDF that is
    encrypted, empty or broken. The message names the problem, for the operator who uploaded
    it."""

    code = "invalid_document"


class PayloadTooLarge(HermesError):
    code = "payload_too_large"


class DocumentTooLarge(PayloadTooLarge):
    """A knowledge document over `HERMES_KNOWLEDGE_MAX_DOCUMENT_BYTES`: refused before it is
    read, so nothing of it is stored."""

    code = "document_too_large"


class UnsupportedMediaType(HermesError):
    """A body in a media type the route does not read (it names the ones it does)."""

    code = "unsupported_media_type"


class HeadersTooLarge(HermesError):
    """A request head over `HERMES_MAX_HEADER_BYTES` or `HERMES_MAX_HEADERS`: answered by the
    connection (`app.api.http_protocol`) before any route sees the request."""

    code = "headers_too_large"


class UriTooLong(HeadersTooLarge):
    """The request line alone filled `HERMES_MAX_HEADER_BYTES`."""

    code = "uri_too_long"


class RequestTimeout(HermesError):
    """A request head or body that did not arrive in time (`HERMES_HEADER_TIMEOUT_S`,
    `HERMES_BODY_TIMEOUT_S`); the connection is closed."""

    code = "request_timeout"


class Unauthorized(HermesError):
    code = "unauthorized"


class Forbidden(HermesError):
    code = "forbidden"


class CsrfFailed(Forbidden):
    """A state-changing request signed in by the desk's cookie without its CSRF token."""

    code = "csrf_failed"


class NotHandoffAgent(Forbidden):
    """Another agent holds the session; releasing it needs that agent or an operator."""

    code = "handoff_not_yours"


# -- the request conflicts with the current state ---------------------------------------------


class Conflict(HermesError):
    code = "conflict"


class SessionBusy(Conflict):
    code = "session_busy"


class NoRunningTurn(Conflict):
    """Nothing to cancel: no turn of the session is running (in any process)."""

    code = "no_running_turn"


class ApprovalClosed(Conflict):
    code = "approval_not_pending"


class HandoffConflict(Conflict):
    """The handoff is not in a state that allows this (claimed by another agent, not yet
    claimed, not held by the caller)."""

    code = "handoff_conflict"


class StepNotRetryable(Conflict):
    code = "step_not_retryable"


class DefinitionMoved(Conflict):
    """An MCP tool's definition changed again since the operator looked at it: approve what
    is seen."""

    code = "mcp_definition_changed"


# -- too much at once -------------------------------------------------------------------------


class QueueFull(HermesError):
    code = "queue_full"


class StepQueueFull(HermesError):
    code = "step_queue_full"


class RateLimited(HermesError):
    """Too many requests from one principal (`details.retry_after_s`: when to try again)."""

    code = "rate_limited"


class TooManyStreams(RateLimited):
    """One principal holds as many open event streams as it may."""

    code = "too_many_streams"


class BudgetExceeded(HermesError):
    """A token or cost cap is used up (`details.kind` says which). A daily cap says when it
    starts again (`details.retry_after_s`); a session's cap never does."""

    code = "budget_exceeded"


# -- something Hermes depends on can't answer -------------------------------------------------


class CircuitOpen(HermesError):
    code = "circuit_open"


class Unavailable(HermesError):
    code = "unavailable"


class NLUUnavailable(Unavailable):
    code = "nlu_unavailable"


class CancelTimeout(HermesError):
    """The process running the turn did not end it within `HERMES_CANCEL_WAIT_S` of a cancel
    asked elsewhere; the request stays on the turn until the turn ends."""

    code = "cancel_timeout"


class UpstreamLLMError(HermesError):
    """The model could not answer after retries and fallbacks. `code` says why, from the
    closed set of model failure codes (`app.llm.failures.MESSAGES`)."""

    def __init__(self, message: str, *, code: str = "llm_unavailable", **details: Any) -> None:
        super().__init__(message, **details)
        self.code = code


# -- a turn the caller waited for failed ------------------------------------------------------


class TurnFailed(HermesError):
    """A turn ended in `turn.failed`; carries the turn's own error code. Build it with
    `TurnFailed.of`, which picks the subclass that says how the turn ended."""

    def __init__(self, code: str, message: str, **details: Any) -> None:
        super().__init__(message, **details)
        self.code = code

    @staticmethod
    def of(code: str, message: str, **details: Any) -> TurnFailed:
        kind = _TURN_ENDINGS.get(code, TurnFailed)
        return kind(code, message, **details)


class TurnTimedOut(TurnFailed):
    """The turn (or the model within it) ran out of time."""


class TurnInterrupted(TurnFailed):
    """The turn was cancelled, or the service shut down under it."""


class TurnSessionDeleted(TurnFailed):
    """The session was deleted while its turn ran."""


class TurnOverBudget(TurnFailed):
    """The turn used up a token or cost cap and was ended between model rounds."""


_TURN_ENDINGS: dict[str, type[TurnFailed]] = {
    "turn_timeout": TurnTimedOut,
    "llm_timeout": TurnTimedOut,
    "interrupted": TurnInterrupted,
    "cancelled": TurnInterrupted,
    "session_deleted": TurnSessionDeleted,
    "budget_exceeded": TurnOverBudget,
}


# -- not the caller's doing -------------------------------------------------------------------


class Fault(HermesError):
    """Base for errors that are no caller's doing: Hermes is misconfigured, its database is
    gone, or an error meant to be handled inside Hermes escaped. A caller that meets one sees
    an internal error; the log has the rest."""


class InternalError(Fault):
    """Base for errors Hermes raises and handles itself (a retry signal, a skipped item, a
    backend refusal turned into a tool message); they may stay private to their module."""


class ToolHandlerError(InternalError):
    """A tool handler failed in a way worth telling the model (not a bug in Hermes): it
    becomes a tool message, never leaves the turn. `code` is the tool's own stable code for
    the refusal, so the model can act on it."""

    def __init__(self, code: str, message: str, *, retryable: bool = False) -> None:
        super().__init__(message)
        self.code = code
        self.retryable = retryable


# -- Hermes can't start: configuration --------------------------------------------------------


class ConfigError(Fault):
    """Start-up configuration is invalid. `source` names what to fix (the environment
    variable or the file, with a line where known), `problem` says what is wrong; the message
    is `"<source>: <problem>"`, one line for the `hermes` command to print."""

    code = "config_error"

    def __init__(self, source: str, problem: str) -> None:
        super().__init__(f"{source}: {problem}")
        self.source = source
        self.problem = problem


class ModelConfigError(ConfigError):
    """A configured model can't be served; `source` is the variable that names it."""


class McpConfigError(ConfigError):
    """The MCP configuration is unusable; `source` is the file."""


class ToolsFileError(ConfigError):
    """tools.yaml is invalid; `source` is the file, the message adds line and reason."""


class NLUModelError(ConfigError):
    """The NLU model directory is missing, corrupt or out of date; the message says what to
    do."""


class DatasetError(Fault):
    """The NLU training or test data is malformed; the message names file and line."""

    code = "dataset_error"


# -- Hermes can't work: storage ---------------------------------------------------------------


class StorageError(Fault):
    code = "storage_error"


class DatabaseClosed(StorageError):
    code = "database_closed"


class DatabaseUnavailable(StorageError):
    """The database cannot be reached: its connection broke, it refuses connections, no pooled
    connection came in time. Unlike other storage errors (a constraint, a bug) it is expected
    to pass, so a caller may wait and try again. Only the engines' adapters raise it (each
    knows its driver's errors), so callers tell it apart by its class.

    `stored` says what became of the write that met it: False, nothing of it was stored;
    None, nobody knows (the connection broke while its commit was under way, so it may have
    been applied): read the database before doing it again. Reads always say False."""

    code = "database_unavailable"

    def __init__(
        self,
        message: str = "the database cannot be reached right now; try again shortly",
        *,
        stored: bool | None = False,
    ) -> None:
        super().__init__(message, retry_after_s=1)
        self.stored = stored


class MigrationError(StorageError):
    code = "migration_failed"


class OwnerFull(StorageError):
    """A user has used every memory id their owner range holds."""

    code = "memory_ids_exhausted"


def first_line(exc: BaseException) -> str:
    """An error as one line for the `hermes` command (drivers' messages run over several)."""
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0].strip()
