"""Failure texts and the expired-session test."""

from __future__ import annotations

from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED, INVALID_PARAMS, INVALID_REQUEST

from app.tools.mcp import failures


def test_expired_sessions_are_recognised_in_their_wordings() -> None:
    for message in (
        "Session terminated",
        "Session not found",
        "Not Found: Invalid or expired session ID",
    ):
        assert failures.session_gone(MCPError(INVALID_REQUEST, message))
    assert not failures.session_gone(MCPError(INVALID_REQUEST, "Invalid request"))
    assert not failures.session_gone(MCPError(INVALID_PARAMS, "Session not found"))


def test_describe_gives_one_line() -> None:
    assert failures.describe(MCPError(CONNECTION_CLOSED, "Connection closed")) == (
        "MCPError -32000: Connection closed"
    )
    assert failures.describe(OSError("first line\nsecond")) == "OSError: first line"
    assert failures.describe(TimeoutError()) == "TimeoutError"
    group = ExceptionGroup("x", [ConnectionError("refused"), ValueError("bad")])
    assert failures.describe(group) == "ConnectionError: refused; ValueError: bad"


def test_codes_and_retry_advice() -> None:
    assert failures.timed_out("crm", "lookup", 2.5).code == "mcp_timeout"
    assert failures.crashed("crm", "lookup").retryable
    refused = failures.refused("crm", "lookup", "unknown tool")
    assert (refused.code, refused.retryable) == ("mcp_error", False)
    assert "crm" in refused.message and "unknown tool" in refused.message
