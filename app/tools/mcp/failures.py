"""How MCP call failures read: one `ToolHandlerError` per kind, with a stable code, a message
a model (and the user it talks to) can act on, and whether trying later may help."""

from __future__ import annotations

from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_REQUEST

from app.errors import InternalError, ToolHandlerError


class SessionExpired(InternalError):
    """The HTTP server no longer knows our session (it restarted): reconnect and resend."""


def session_gone(exc: MCPError) -> bool:
    """An HTTP server that restarted answers 404 for our session id; the SDK reports that as
    INVALID_REQUEST, worded "Session terminated" or as the server put it."""
    message = exc.message.lower()
    return (
        exc.code == INVALID_REQUEST
        and "session" in message
        and any(w in message for w in ("terminated", "not found", "expired", "invalid"))
    )


def timed_out(server: str, tool: str, timeout_s: float) -> ToolHandlerError:
    return ToolHandlerError(
        "mcp_timeout",
        f"the MCP server {server} did not answer {tool} within {timeout_s:.3g}s",
        retryable=True,
    )


def crashed(server: str, tool: str) -> ToolHandlerError:
    return ToolHandlerError(
        "mcp_server_crashed",
        f"the connection to the MCP server {server} broke during {tool} "
        "(the server crashed or went away)",
        retryable=True,
    )


def unavailable(server: str, state: str) -> ToolHandlerError:
    return ToolHandlerError(
        "mcp_unavailable",
        f"the MCP server {server} is not connected right now ({state})",
        retryable=True,
    )


def circuit_open(server: str, retry_after_s: float) -> ToolHandlerError:
    return ToolHandlerError(
        "mcp_circuit_open",
        f"calls to the MCP server {server} are paused for {retry_after_s:.0f}s after "
        "repeated failures",
        retryable=True,
    )


def session_lost_twice(server: str) -> ToolHandlerError:
    return ToolHandlerError(
        "mcp_session_expired",
        f"the MCP server {server} dropped the session twice in a row",
        retryable=True,
    )


def invalid_result(server: str, tool: str, detail: str) -> ToolHandlerError:
    return ToolHandlerError(
        "mcp_invalid_result",
        f"the MCP server {server} returned an invalid result for {tool}: {detail}",
        retryable=True,
    )


def refused(server: str, tool: str, message: str) -> ToolHandlerError:
    # The server answered: it works, it just would not do this call.
    return ToolHandlerError("mcp_error", f"the MCP server {server} refused {tool}: {message}")


def describe(value: object) -> str:
    """One line about an error, for logs and the status page (mask it before showing)."""
    if isinstance(value, BaseExceptionGroup):
        return "; ".join(describe(e) for e in value.exceptions)
    if isinstance(value, MCPError):
        return f"MCPError {value.code}: {value.message}"
    if isinstance(value, BaseException):
        text = str(value).strip().splitlines()[0] if str(value).strip() else ""
        return f"{type(value).__name__}: {text}" if text else type(value).__name__
    return str(value)
