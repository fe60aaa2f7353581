"""Path and stream parameters shared by the routers, each checked before any lookup.

Every id in a path goes through one of the aliases below, so an absurd id (300 characters, an
empty one) is a 422 `validation_error` from FastAPI's own validation and never reaches the
database. Stream positions (`Last-Event-ID`, `?after=`) are event sequence numbers: SQLite
keeps them as signed 64-bit integers, so anything outside 0..2^63-1 is refused up front rather
than failing inside a stream that has already started.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from fastapi import Depends, Header, Path, Query

from app.errors import InvalidInput

MAX_ID_CHARS = 128
MAX_SEQ = 2**63 - 1  # SQLite INTEGER is signed 64-bit

_ID = r"^[A-Za-z0-9_.:@+-]+$"
_SEQ = re.compile(r"[0-9]{1,19}")


def _id(description: str, *, pattern: str | None = None) -> Any:
    return Path(min_length=1, max_length=MAX_ID_CHARS, pattern=pattern, description=description)


SessionId = Annotated[str, _id("A session id")]
ApprovalId = Annotated[str, _id("An approval id")]
StepId = Annotated[str, _id("A step id")]
UserId = Annotated[str, _id("The customer's user id", pattern=_ID)]
MemoryId = Annotated[str, _id("A memory id", pattern=_ID)]
McpServerName = Annotated[str, _id("The MCP server's name")]
McpToolName = Annotated[str, _id("The server's name for the tool, or the registry's")]


def parse_seq(value: str, field: str) -> int:
    """An event sequence number written as plain ASCII digits, within 0..2^63-1."""
    text = value.strip()
    if not _SEQ.fullmatch(text) or int(text) > MAX_SEQ:
        raise InvalidInput(
            f"{field} must be an event id from this stream: a whole number from 0 to {MAX_SEQ}",
            field=field,
        )
    return int(text)


def resume_after(
    after: Annotated[
        str | None,
        Query(
            max_length=64,
            description=f"Replay the events after this sequence number (0 to {MAX_SEQ})",
        ),
    ] = None,
    last_event_id: Annotated[str | None, Header()] = None,
) -> int | None:
    """Where a stream resumes: `Last-Event-ID` (what a browser's EventSource sends when it
    reconnects) wins over `?after=`; None when neither is given. Both are read by the same
    strict rule (an int query parameter would also take "+3", "1_0" or "3.0")."""
    if last_event_id is not None and last_event_id.strip():
        return parse_seq(last_event_id, "Last-Event-ID")
    return None if after is None else parse_seq(after, "after")


ResumeAfter = Annotated[int | None, Depends(resume_after)]
