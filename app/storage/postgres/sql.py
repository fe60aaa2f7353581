"""Application SQL is written in SQLite's spelling; this turns it into PostgreSQL's.

Only what the stores use: `?` placeholders become `%s` (and a literal `%` is doubled, which
psycopg wants when there are parameters), and `LIKE` becomes `ILIKE` (SQLite's `LIKE` ignores
ASCII case). String literals and quoted names are left alone. Statements that differ in more
than spelling branch on the dialect where they are written.
"""

from __future__ import annotations

import re
from functools import lru_cache

_WORD_LIKE = re.compile(r"\bLIKE\b", re.IGNORECASE)


@lru_cache(maxsize=4096)
def to_postgres(sql: str, with_params: bool = True) -> str:
    out: list[str] = []
    i, n = 0, len(sql)
    plain_start = 0

    def flush_plain(end: int) -> None:
        chunk = sql[plain_start:end]
        chunk = _WORD_LIKE.sub("ILIKE", chunk)
        if with_params:
            chunk = chunk.replace("%", "%%").replace("?", "%s")
        out.append(chunk)

    while i < n:
        ch = sql[i]
        if ch in ("'", '"'):
            flush_plain(i)
            end = i + 1
            while end < n:
                if sql[end] == ch:
                    if end + 1 < n and sql[end + 1] == ch:  # doubled quote inside
                        end += 2
                        continue
                    break
                end += 1
            literal = sql[i : end + 1]
            out.append(literal.replace("%", "%%") if with_params else literal)
            i = end + 1
            plain_start = i
            continue
        i += 1
    flush_plain(n)
    return "".join(out)
