"""Keyset pages, newest first: the opaque cursor a listing hands out (the last item's
`created_at` and id) and the one query shape that reads a page after it. Sessions and
knowledge documents are listed this way."""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

from app.errors import InvalidCursor
from app.storage.port import Database

_MAX_ID = 128
_MAX_TIME = 2**63 - 1


class Keyed(Protocol):
    @property
    def id(self) -> str: ...

    @property
    def created_at(self) -> float: ...


T = TypeVar("T", bound=Keyed)


def encode_cursor(created_at: float, item_id: str) -> str:
    raw = json.dumps([created_at, item_id]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[float, str]:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        created_at, item_id = json.loads(base64.urlsafe_b64decode(padded.encode()))
        if not isinstance(item_id, str) or not 0 < len(item_id) <= _MAX_ID:
            raise TypeError
        # json.loads takes NaN, Infinity and 1e400 (= inf): none is a time we wrote.
        if isinstance(created_at, bool) or not isinstance(created_at, int | float):
            raise TypeError
        if not (math.isfinite(created_at) and 0 <= created_at <= _MAX_TIME):
            raise ValueError
        return float(created_at), item_id
    except (ValueError, TypeError) as exc:
        raise InvalidCursor from exc


async def newest_first(
    db: Database,
    select: str,
    where: Sequence[str],
    params: Sequence[Any],
    cursor: str | None,
    limit: int,
    read: Callable[[Any], T],
) -> tuple[list[T], str | None]:
    """`select` ("SELECT … FROM table") under `where` (ANDed, with `params`), newest first,
    the `limit` rows after `cursor`, and the cursor of the next page (None on the last)."""
    conditions, values = list(where), list(params)
    if cursor:
        created_at, last_id = decode_cursor(cursor)
        conditions.append("(created_at < ? OR (created_at = ? AND id < ?))")
        values += [created_at, created_at, last_id]
    rows = await db.fetchall(
        f"{select} WHERE {' AND '.join(conditions)} ORDER BY created_at DESC, id DESC LIMIT ?",
        (*values, limit + 1),
    )
    items = [read(row) for row in rows[:limit]]
    more = len(rows) > limit
    return items, (encode_cursor(items[-1].created_at, items[-1].id) if more else None)
