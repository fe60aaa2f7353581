"""Apply `migrations/postgres/NNNN_name.sql` in order, recorded as on SQLite.

The bookkeeping table, the file naming and the checksum rule are those of
`app.storage.migrations` (its `discover` and `Migration` are reused): a recorded migration
whose file has changed since is refused. Each file runs in its own transaction together with
the row that records it. A session-level advisory lock serialises processes that start at the
same moment (`hermes serve --workers N`, several replicas), so each migration runs exactly once;
the lock is per database, so test databases on one server do not wait for each other.
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

import psycopg

from app.errors import MigrationError
from app.storage.migrations import Migration, discover

# pg_advisory_lock takes a bigint: a fixed one derived from a name nobody else uses.
LOCK_KEY = int.from_bytes(hashlib.sha256(b"hermes.schema_migrations").digest()[:8], signed=True)

_BOOKKEEPING = (
    "CREATE TABLE IF NOT EXISTS schema_migrations ("
    " version BIGINT PRIMARY KEY, name TEXT NOT NULL,"
    " checksum TEXT NOT NULL, applied_at DOUBLE PRECISION NOT NULL)"
)


def apply_migrations(conn: psycopg.Connection, migrations_dir: Path) -> list[str]:
    """Apply pending migrations over `conn` (autocommit); returns the names applied."""
    if not conn.autocommit:
        raise MigrationError("PostgreSQL migrations need a connection in autocommit mode")
    migrations = discover(migrations_dir)
    try:
        conn.execute("SELECT pg_advisory_lock(%s)", (LOCK_KEY,))
    except psycopg.Error as exc:
        raise MigrationError(f"cannot lock the schema for migrations: {exc}") from exc
    try:
        return _apply_locked(conn, migrations)
    finally:
        if not conn.closed:
            conn.execute("SELECT pg_advisory_unlock(%s)", (LOCK_KEY,))


def _apply_locked(conn: psycopg.Connection, migrations: list[Migration]) -> list[str]:
    try:
        conn.execute(_BOOKKEEPING)
        applied: dict[int, str] = {
            int(version): str(checksum)
            for version, checksum in conn.execute(
                "SELECT version, checksum FROM schema_migrations"
            ).fetchall()
        }
    except psycopg.Error as exc:
        raise MigrationError(f"cannot read schema_migrations: {exc}") from exc
    done: list[str] = []
    for migration in migrations:
        label = f"{migration.version:04d}_{migration.name}"
        if migration.version in applied:
            if applied[migration.version] != migration.checksum:
                raise MigrationError(
                    f"migration {label} was changed after it was applied; "
                    "add a new migration instead of editing an old one"
                )
            continue
        try:
            with conn.transaction():
                # No parameters: psycopg sends the whole file at once, several statements and
                # all, and the transaction makes it one unit with its bookkeeping row.
                conn.execute(migration.sql.encode())
                conn.execute(
                    "INSERT INTO schema_migrations (version, name, checksum, applied_at)"
                    " VALUES (%s, %s, %s, %s)",
                    (migration.version, migration.name, migration.checksum, time.time()),
                )
        except psycopg.Error as exc:
            raise MigrationError(f"migration {label} failed: {exc}") from exc
        done.append(label)
    return done
