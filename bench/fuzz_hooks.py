"""Schemathesis hooks for `make fuzz` (bench/fuzz_api.py): what the spec's own formats mean.

Page cursors are opaque strings only the service issues (`format: hermes-session-cursor`,
`hermes-message-cursor`): any other string is rightly a 422. The generator makes cursors the way
the service does, for positions that need not exist, so a positive case is a cursor a client
could have been given.
"""

from __future__ import annotations

import schemathesis
from hypothesis import strategies as st

from app.api.params import MESSAGE_CURSOR, SESSION_CURSOR
from app.storage.messages import encode_message_cursor
from app.storage.sessions import encode_cursor

_ID = st.text(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_", min_size=1, max_size=40
)
_SEQ = st.integers(min_value=0, max_value=2**63 - 1)

schemathesis.openapi.format(
    SESSION_CURSOR,
    st.builds(encode_cursor, st.floats(min_value=0, max_value=4e9, allow_nan=False), _ID),
)
schemathesis.openapi.format(MESSAGE_CURSOR, st.builds(encode_message_cursor, _SEQ, _SEQ))
