"""Helpers for reading a demo file directly, through a connection of the test's own."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from app.demo.schema import TABLES


def query(path: Path, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(path)
    try:
        return [tuple(r) for r in conn.execute(sql, params).fetchall()]
    finally:
        conn.close()


def dump(path: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table, in a stable order."""
    return {t: sorted(query(path, f"SELECT * FROM {t}"), key=repr) for t in TABLES}
