"""Path and stream parameters shared by the routers, each checked before any lookup.

Every id in a path goes through one of the aliases below, so an absurd id (300 characters, an
empty one) is a 422 `validation_error` from FastAPI's own validation and never reaches the
database. Stream positions (`Last-Event-ID`, `?after=`) are event sequence numbers: SQLite
keeps them as signed 64-bit integers, so anything outside 0..2^63-1 is refused up front rather
than failing inside a stream that has already started.
"""

from __future__ import annotations

import re
from datetime import date, datetime
from typing import Annotated, Any

from fastapi import Depends, Header, Path, Query
from pydantic import BeforeValidator, WithJsonSchema

from app.errors import InvalidInput

MAX_ID_CHARS = 128
MAX_SEQ = 2**63 - 1  # SQLite INTEGER is signed 64-bit
MAX_SEQ_CHARS = 64

_ID = r"^[A-Za-z0-9_.:@+-]+$"


def _at_most(limit: str) -> str:
    """A regular expression for the decimal numbers of `len(limit)` digits up to `limit`."""
    options = [
        limit[:i] + (f"[0-{int(d) - 1}]" if d != "1" else "0") + f"[0-9]{{{len(limit) - i - 1}}}"
        for i, d in enumerate(limit)
        if d != "0"
    ]
    return "|".join([*options, limit])


# A stream position as the schema states it and the server checks it: plain ASCII digits (any
# leading zeros) from 0 to 2^63-1, or empty for "none". One pattern, so the two cannot drift.
SEQ_PATTERN = rf"^(0*([0-9]{{1,18}}|{_at_most(str(MAX_SEQ))}))?$"
_SEQ = re.compile(SEQ_PATTERN)


def _id(description: str, *, pattern: str | None = None) -> Any:
    return Path(min_length=1, max_length=MAX_ID_CHARS, pattern=pattern, description=description)


SessionId = Annotated[str, _id("A session id")]
ApprovalId = Annotated[str, _id("An approval id")]
StepId = Annotated[str, _id("A step id")]
UserId = Annotated[str, _id("The customer's user id", pattern=_ID)]
MemoryId = Annotated[str, _id("A memory id", pattern=_ID)]
DocumentId = Annotated[str, _id("A knowledge document's id", pattern=_ID)]
McpServerName = Annotated[str, _id("The MCP server's name")]
McpToolName = Annotated[str, _id("The server's name for the tool, or the registry's")]


# RFC 3339's date-time, what `format: date-time` promises: a zone is part of it (pydantic alone
# would also take a bare date, a time without a zone, or a number of seconds). The year is
# 0002 to 9998, so the instant is a date in every zone: 9999-12-31T23:59:59-14:00 is in the
# year 10000 in UTC (a memory valid until then was stored, then every listing of it was a 500).
# The schema states the same pattern the server checks, so a client (and the fuzzer) knows.
_YEAR = "(000[2-9]|00[1-9][0-9]|0[1-9][0-9]{2}|[1-8][0-9]{3}|9[0-8][0-9]{2}|99[0-8][0-9]|999[0-8])"
INSTANT_PATTERN = (
    rf"^{_YEAR}-[0-9]{{2}}-[0-9]{{2}}[Tt][0-9]{{2}}:[0-9]{{2}}:[0-9]{{2}}(\.[0-9]+)?"
    r"([Zz]|[+-][0-9]{2}:[0-9]{2})$"
)
_INSTANT = re.compile(INSTANT_PATTERN)


def _rfc3339(value: Any) -> Any:
    if isinstance(value, datetime):
        return value
    if not isinstance(value, str) or not _INSTANT.fullmatch(value):
        raise ValueError(
            "expected an RFC 3339 date-time with its zone in the years 0002 to 9998,"
            " e.g. 2030-01-01T00:00:00Z"
        )
    return value


Instant = Annotated[
    datetime,
    BeforeValidator(_rfc3339),
    WithJsonSchema(
        {
            "type": "string",
            "format": "date-time",
            "pattern": INSTANT_PATTERN,
            # The first and the last instant every time field takes, in the zones furthest
            # from UTC: a client (and the fuzz stage's examples phase) tries both ends.
            "examples": ["0002-01-01T00:00:00+14:00", "9998-12-31T23:59:59-14:00"],
        }
    ),
]

# A day or an instant: a document's validity, given as a date ("2026-01-31", a whole day in
# UTC) or as an RFC 3339 date-time with its zone. Read as a `date` or an aware `datetime`.
DAY_PATTERN = rf"^{_YEAR}-[0-9]{{2}}-[0-9]{{2}}$"
_DAY = re.compile(DAY_PATTERN)


def _day_or_instant(value: Any) -> Any:
    if isinstance(value, date):
        return value
    if isinstance(value, str) and _DAY.fullmatch(value):
        return date.fromisoformat(value)  # a month 13 or a 31 February is a ValueError
    if isinstance(value, str) and _INSTANT.fullmatch(value):
        # RFC 3339 allows a lower-case "t" and "z"; fromisoformat takes only the upper case.
        return datetime.fromisoformat(value.upper())
    raise ValueError(
        "expected a date (2030-01-31) or an RFC 3339 date-time with its zone"
        " (2030-01-31T09:00:00Z), in the years 0002 to 9998"
    )


DayOrInstant = Annotated[
    date | datetime,
    BeforeValidator(_day_or_instant),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "string", "format": "date", "pattern": DAY_PATTERN},
                {"type": "string", "format": "date-time", "pattern": INSTANT_PATTERN},
            ]
        }
    ),
]

# Page cursors are opaque: only the ones the service issued are valid. The format names them so
# a client (and the fuzzer's generator, bench/fuzz_hooks.py) knows where one comes from.
SESSION_CURSOR = "hermes-session-cursor"
MESSAGE_CURSOR = "hermes-message-cursor"
DOCUMENT_CURSOR = "hermes-document-cursor"


def cursor_query(kind: str) -> Any:
    return Query(
        max_length=512,
        description="`next_cursor` of the previous page",
        json_schema_extra={"format": kind},
    )


def parse_seq(value: str, field: str) -> int | None:
    """An event sequence number written as plain ASCII digits, within 0..2^63-1; None for an
    empty value (no position)."""
    if len(value) > MAX_SEQ_CHARS or not _SEQ.fullmatch(value):
        raise InvalidInput(
            f"{field} must be an event id from this stream: a whole number from 0 to {MAX_SEQ}",
            field=field,
        )
    return int(value) if value else None


def _position(description: str) -> dict[str, Any]:
    return {
        "max_length": MAX_SEQ_CHARS,
        "description": description,
        # Stated, not enforced by FastAPI: parse_seq checks it and names the field it read.
        "json_schema_extra": {"pattern": SEQ_PATTERN},
    }


def resume_after(
    after: Annotated[
        str | None,
        Query(**_position(f"Replay the events after this sequence number (0 to {MAX_SEQ})")),
    ] = None,
    last_event_id: Annotated[
        str | None,
        Header(**_position("What a reconnecting EventSource sends; wins over `after`")),
    ] = None,
) -> int | None:
    """Where a stream resumes: `Last-Event-ID` (what a browser's EventSource sends when it
    reconnects) wins over `?after=`; None when neither is given or both are empty. Both are
    read by the same strict rule (an int query parameter would also take "+3", "1_0" or "3.0")."""
    from_query = None if after is None else parse_seq(after, "after")  # checked either way
    if last_event_id:
        return parse_seq(last_event_id, "Last-Event-ID")
    return from_query


ResumeAfter = Annotated[int | None, Depends(resume_after)]
