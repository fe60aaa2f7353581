"""Schemathesis hooks for `make fuzz` (bench/fuzz_api.py): what the spec's own formats mean.

Time fields (`format: date-time`, years 0002 to 9998 in any zone) get their extremes as well as
ordinary instants: the first and last instant a field takes in the zones furthest from UTC
(+14:00 and -14:00), whose UTC year is 1 or 9999. (The schema gives the same two as its
`examples`, which the examples phase sends every run; past them, the schema's pattern makes them
negative cases.) A memory stored past them once made every listing of the user's memories a
500.

Page cursors are opaque strings only the service issues (`format: hermes-session-cursor`,
`hermes-message-cursor`, `hermes-document-cursor`): any other string is rightly a 422. The
generator makes cursors the way the service does, for positions that need not exist, so a
positive case is a cursor a client could have been given.

Two refusals of a new knowledge document are right although no schema can state their rule, so
they are not failures: a file that is not a readable document (`invalid_document`: a JPEG sent
as `file`, text that is not UTF-8), and a validity whose `valid_until` is not after its
`valid_from` (a rule between two fields). Any other refusal of a schema-valid document still is.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import schemathesis
from hypothesis import strategies as st

from app.api.params import DOCUMENT_CURSOR, MESSAGE_CURSOR, SESSION_CURSOR
from app.storage.messages import encode_message_cursor
from app.storage.paging import encode_cursor

_ID = st.text(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_", min_size=1, max_size=40
)
_SEQ = st.integers(min_value=0, max_value=2**63 - 1)

# A knowledge document page's cursor is made like a session page's: (created_at, id).
for _kind in (SESSION_CURSOR, DOCUMENT_CURSOR):
    schemathesis.openapi.format(
        _kind,
        st.builds(encode_cursor, st.floats(min_value=0, max_value=4e9, allow_nan=False), _ID),
    )
_ZONES = st.integers(min_value=-14 * 60, max_value=14 * 60).map(
    lambda minutes: timezone(timedelta(minutes=minutes))
)
_EXTREMES = (
    "0002-01-01T00:00:00+14:00",
    "0002-01-01T00:00:00Z",
    "9998-12-31T23:59:59.999999-14:00",
    "9998-12-31T23:59:59Z",
)
_INSTANTS = st.datetimes(
    min_value=datetime(2, 1, 1), max_value=datetime(9998, 12, 31, 23, 59, 59), timezones=_ZONES
).map(lambda when: when.isoformat().replace("+00:00", "Z"))
schemathesis.openapi.format("date-time", st.one_of(st.sampled_from(_EXTREMES), _INSTANTS))
schemathesis.openapi.format(MESSAGE_CURSOR, st.builds(encode_message_cursor, _SEQ, _SEQ))


@schemathesis.hook.apply_to(path="/v1/knowledge/documents", method="POST")
def filter_failure(
    ctx: schemathesis.HookContext, failure: Any, _case: schemathesis.Case, response: Any
) -> bool:
    """Keeps every failure but a schema-valid document refused for what no schema can state."""
    if getattr(failure, "code", None) != "ST202" or response.status_code != 422:
        return True
    error = response.json().get("error", {})
    unreadable = error.get("code") == "invalid_document"
    backwards = error.get("code") == "validation_error" and error.get("details") == {
        "field": "valid_until"
    }
    return not (unreadable or backwards)
