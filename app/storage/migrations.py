"""Numbered SQL migrations (`NNNN_name.sql`), applied in order at start-up and recorded.

Each file runs in its own transaction together with the row that records it, so a failed
migration leaves nothing behind. A recorded migration whose file has changed since is refused:
the schema on disk would no longer match what the code expects.
"""

from __future__ import annotations

import hashlib
import re
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

from app.errors import MigrationError
from app.settings import StorageSettings

_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode()).hexdigest()


def discover(directory: Path) -> list[Migration]:
    if not directory.is_dir():
        raise MigrationError(f"migrations directory not found: {directory}")
    found: list[Migration] = []
    for path in sorted(directory.iterdir()):
        if path.suffix != ".sql":
            continue
        match = _NAME.match(path.name)
        if not match:
            raise MigrationError(f"bad migration file name {path.name!r}: want NNNN_name.sql")
        found.append(Migration(int(match[1]), match[2], path.read_text(encoding="utf-8")))
    versions = [m.version for m in found]
    if len(set(versions)) != len(versions):
        raise MigrationError("two migrations share a version number")
    return found


def apply_migrations(
    db_path: Path, directory: Path, busy_timeout_ms: int = StorageSettings().busy_timeout_ms
) -> list[str]:
    """Apply pending migrations; returns the names applied (empty when up to date)."""
    migrations = discover(directory)
    conn = sqlite3.connect(db_path, isolation_level=None)
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            " version INTEGER PRIMARY KEY, name TEXT NOT NULL,"
            " checksum TEXT NOT NULL, applied_at REAL NOT NULL)"
        )
        applied = {
            row[0]: (row[1], row[2])
            for row in conn.execute("SELECT version, name, checksum FROM schema_migrations")
        }
        done: list[str] = []
        for migration in migrations:
            label = f"{migration.version:04d}_{migration.name}"
            if migration.version in applied:
                if applied[migration.version][1] != migration.checksum:
                    raise MigrationError(
                        f"migration {label} was changed after it was applied; "
                        "add a new migration instead of editing an old one"
                    )
                continue
            try:
                conn.execute("BEGIN IMMEDIATE")
                for statement in split_statements(migration.sql):
                    conn.execute(statement)
                conn.execute(
                    "INSERT INTO schema_migrations (version, name, checksum, applied_at)"
                    " VALUES (?, ?, ?, ?)",
                    (migration.version, migration.name, migration.checksum, time.time()),
                )
                conn.execute("COMMIT")
            except sqlite3.Error as exc:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise MigrationError(f"migration {label} failed: {exc}") from exc
            done.append(label)
        return done
    finally:
        conn.close()


def split_statements(sql: str) -> list[str]:
    """Split a script into complete statements (sqlite3.complete_statement knows triggers)."""
    statements: list[str] = []
    buffer = ""
    for line in sql.splitlines(keepends=True):
        if not buffer and (not line.strip() or line.lstrip().startswith("--")):
            continue
        buffer += line
        if sqlite3.complete_statement(buffer):
            statements.append(buffer.strip())
            buffer = ""
    if buffer.strip():
        raise MigrationError(f"incomplete SQL statement at the end: {buffer.strip()[:80]!r}")
    return statements
