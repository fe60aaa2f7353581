"""`hermes migrate-sqlite-to-postgres`: copy a SQLite database into a fresh PostgreSQL one.

The target gets the PostgreSQL migrations first and must hold no rows. Every table is copied in
one transaction, parents before children (foreign keys), in batches through COPY; identity
sequences then continue after the highest id copied (or SQLite's AUTOINCREMENT high-water
mark). Left out: the FTS5 index and its shadow tables (PostgreSQL's trigram index builds
itself) and `schema_migrations` (each side records its own).

Verification reads both databases again and computes, in Python and identically on both sides,
a row count and a sha256 per table over the rows ordered by primary key, with values in one
normal form: floats by `repr`, bytes in hex, JSONB columns parsed and dumped with sorted keys.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from app.errors import StorageError
from app.settings import PROJECT_ROOT
from app.storage.migrations import discover
from app.storage.postgres.migrations import apply_migrations

SQLITE_MIGRATIONS = PROJECT_ROOT / "migrations"
POSTGRES_MIGRATIONS = PROJECT_ROOT / "migrations" / "postgres"
BATCH = 1000

# How a PostgreSQL column's values are converted on the way in and normalised for checksums.
_KINDS = {"bigint": "int", "double precision": "float", "jsonb": "json", "bytea": "bytes"}


class CopyRefused(StorageError):
    """The copy would not be faithful or would mix data: nothing was written."""

    code = "copy_refused"


@dataclass(frozen=True)
class Column:
    name: str
    kind: str  # "int", "float", "text", "json" or "bytes"


@dataclass(frozen=True)
class Table:
    name: str
    columns: tuple[Column, ...]
    key: tuple[str, ...]  # the primary key: the order rows are checksummed in


@dataclass(frozen=True)
class TableCheck:
    table: str
    sqlite_rows: int
    sqlite_checksum: str
    postgres_rows: int
    postgres_checksum: str

    @property
    def ok(self) -> bool:
        return (self.sqlite_rows, self.sqlite_checksum) == (
            self.postgres_rows,
            self.postgres_checksum,
        )

    def line(self) -> str:
        """`table  rows  sha256:<first 16 hex>  ok`, or both sides and MISMATCH."""
        head = f"{self.table:<20} {self.sqlite_rows:>9} rows  sha256:{self.sqlite_checksum[:16]}"
        if self.ok:
            return f"{head}  ok"
        return (
            f"{head}  postgres {self.postgres_rows} rows sha256:{self.postgres_checksum[:16]}"
            "  MISMATCH"
        )


def copy_database(
    source: Path,
    target: psycopg.Connection,
    *,
    migrations_dir: Path = POSTGRES_MIGRATIONS,
    sqlite_migrations_dir: Path = SQLITE_MIGRATIONS,
    batch: int = BATCH,
) -> list[TableCheck]:
    """Copy `source` into `target` (an autocommit connection) and verify every table."""
    if not source.is_file():
        raise CopyRefused(f"no SQLite database at {source}")
    with closing(sqlite3.connect(source, isolation_level=None)) as lite:
        _check_source_version(lite, sqlite_migrations_dir)
        apply_migrations(target, migrations_dir)
        tables = plan(lite, target)
        _refuse_rows(target)
        # One read transaction: the copy and its verification see the same snapshot of the
        # source, even if something writes to it meanwhile.
        lite.execute("BEGIN")
        try:
            with target.transaction():
                for table in tables:
                    _copy_table(lite, target, table, batch)
                _reset_identities(lite, target)
        except psycopg.Error as exc:
            raise StorageError(f"copy failed, nothing was written: {exc}") from exc
        try:
            return verify(lite, target, tables)
        finally:
            lite.execute("ROLLBACK")


def plan(lite: sqlite3.Connection, target: psycopg.Connection) -> list[Table]:
    """The tables to copy, parents first, with PostgreSQL's column kinds and primary keys.

    Every SQLite table is copied except virtual (FTS5) tables, their shadow tables and the
    migrations' bookkeeping; each must exist in PostgreSQL with the same columns.
    """
    rows = lite.execute("SELECT type, name, sql FROM sqlite_master").fetchall()
    virtual = {name for _, name, ddl in rows if ddl and ddl.upper().startswith("CREATE VIRTUAL")}
    names = sorted(
        name
        for kind, name, _ in rows
        if kind == "table"
        and name != "schema_migrations"
        and not name.startswith("sqlite_")
        and name not in virtual
        and not any(name.startswith(f"{v}_") for v in virtual)
    )
    pg_columns: dict[str, list[Column]] = {}
    for table, column, data_type in target.execute(
        "SELECT table_name, column_name, data_type FROM information_schema.columns"
        " WHERE table_schema = current_schema() ORDER BY table_name, ordinal_position"
    ):
        pg_columns.setdefault(table, []).append(Column(column, _KINDS.get(data_type, "text")))
    keys = _primary_keys(target)
    tables: dict[str, Table] = {}
    for name in names:
        if name not in pg_columns:
            raise CopyRefused(f"table {name} of the SQLite database has no PostgreSQL twin")
        lite_columns = [r[1] for r in lite.execute(f'PRAGMA table_info("{name}")')]
        if sorted(lite_columns) != sorted(c.name for c in pg_columns[name]):
            raise CopyRefused(f"table {name} has different columns in SQLite and PostgreSQL")
        if name not in keys:
            raise CopyRefused(f"table {name} has no primary key in PostgreSQL")
        tables[name] = Table(name, tuple(pg_columns[name]), keys[name])
    return _parents_first(tables, _references(target))


def verify(
    lite: sqlite3.Connection, target: psycopg.Connection, tables: Sequence[Table] | None = None
) -> list[TableCheck]:
    """Count and checksum every table on both sides (all of `plan`'s when none are given)."""
    checks = []
    for table in plan(lite, target) if tables is None else tables:
        lite_rows, lite_sum = _checksum(table, _sqlite_rows(lite, table))
        with target.transaction(), target.cursor(name="hermes_verify") as cur:
            cur.itersize = BATCH
            cur.execute(_pg_select(table))
            pg_rows, pg_sum = _checksum(table, cur)
        checks.append(TableCheck(table.name, lite_rows, lite_sum, pg_rows, pg_sum))
    return checks


# -- the copy ---------------------------------------------------------------------------------


def _check_source_version(lite: sqlite3.Connection, directory: Path) -> None:
    expected = {m.version for m in discover(directory)}
    try:
        found = {r[0] for r in lite.execute("SELECT version FROM schema_migrations")}
    except sqlite3.Error as exc:
        raise CopyRefused(f"not a Hermes SQLite database: {exc}") from exc
    if max(found, default=0) > max(expected, default=0):
        raise CopyRefused(
            f"the SQLite database is at migration {max(found):04d}, newer than this Hermes "
            f"({max(expected, default=0):04d}): copy it with the Hermes version that wrote it"
        )
    if found != expected:
        raise CopyRefused(
            f"the SQLite database is at migration {max(found, default=0):04d}, this Hermes at "
            f"{max(expected, default=0):04d}: start this Hermes on it once (hermes serve --db), "
            "then copy"
        )


def _refuse_rows(target: psycopg.Connection) -> None:
    tables = [
        r[0]
        for r in target.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema ="
            " current_schema() AND table_type = 'BASE TABLE' AND table_name <> 'schema_migrations'"
            " ORDER BY table_name"
        )
    ]
    for name in tables:
        query = sql.SQL("SELECT EXISTS (SELECT 1 FROM {})").format(sql.Identifier(name))
        row = target.execute(query).fetchone()
        if row is not None and row[0]:
            raise CopyRefused(
                f"the PostgreSQL database already holds rows (table {name}): copy into an empty one"
            )


def _copy_table(
    lite: sqlite3.Connection, target: psycopg.Connection, table: Table, batch: int
) -> None:
    names = [c.name for c in table.columns]
    select = f"SELECT {', '.join(_lite_ident(n) for n in names)} FROM {_lite_ident(table.name)}"
    copy_sql = sql.SQL("COPY {} ({}) FROM STDIN").format(
        sql.Identifier(table.name), sql.SQL(", ").join(map(sql.Identifier, names))
    )
    convert = [_CONVERT[c.kind] for c in table.columns]
    cursor = lite.execute(select)
    with target.cursor() as cur, cur.copy(copy_sql) as copy:
        while rows := cursor.fetchmany(batch):
            for row in rows:
                try:
                    values = [
                        None if v is None else f(v) for f, v in zip(convert, row, strict=True)
                    ]
                except (TypeError, ValueError) as exc:
                    raise CopyRefused(
                        f"table {table.name}: a value PostgreSQL's column type cannot hold ({exc})"
                    ) from exc
                copy.write_row(values)


def _reset_identities(lite: sqlite3.Connection, target: psycopg.Connection) -> None:
    """Identity sequences continue after the highest id copied, or after SQLite's
    AUTOINCREMENT high-water mark when rows at the top were deleted."""
    try:
        high_water = dict(lite.execute("SELECT name, seq FROM sqlite_sequence").fetchall())
    except sqlite3.OperationalError:  # no AUTOINCREMENT table: no sqlite_sequence
        high_water = {}
    identities = target.execute(
        "SELECT table_name, column_name FROM information_schema.columns"
        " WHERE table_schema = current_schema() AND is_identity = 'YES'"
    ).fetchall()
    for table, column in identities:
        query = sql.SQL("SELECT COALESCE(MAX({}), 0) FROM {}").format(
            sql.Identifier(column), sql.Identifier(table)
        )
        row = target.execute(query).fetchone()
        top = max(int(row[0]) if row else 0, int(high_water.get(table, 0)))
        target.execute(
            "SELECT setval(pg_get_serial_sequence(%s, %s), %s, false)",
            (sql.Identifier(table).as_string(target), column, top + 1),
        )


def _parents_first(tables: dict[str, Table], references: set[tuple[str, str]]) -> list[Table]:
    """Tables ordered so that every table comes after those its foreign keys point at."""
    parents = {name: {p for c, p in references if c == name and p != name} for name in tables}
    ordered: list[Table] = []
    placed: set[str] = set()
    while len(ordered) < len(tables):
        ready = [n for n in sorted(tables) if n not in placed and parents[n] <= placed]
        if not ready:
            raise CopyRefused("the foreign keys between the tables form a cycle")
        for name in ready:
            ordered.append(tables[name])
            placed.add(name)
    return ordered


def _references(target: psycopg.Connection) -> set[tuple[str, str]]:
    """(child table, parent table) for every foreign key."""
    rows = target.execute(
        "SELECT c.conrelid::regclass::text, c.confrelid::regclass::text FROM pg_constraint c"
        " JOIN pg_namespace n ON n.oid = c.connamespace"
        " WHERE c.contype = 'f' AND n.nspname = current_schema()"
    ).fetchall()
    return {(_unquote(child), _unquote(parent)) for child, parent in rows}


def _primary_keys(target: psycopg.Connection) -> dict[str, tuple[str, ...]]:
    rows = target.execute(
        "SELECT k.table_name, k.column_name FROM information_schema.table_constraints t"
        " JOIN information_schema.key_column_usage k"
        " ON k.constraint_name = t.constraint_name AND k.table_schema = t.table_schema"
        " AND k.table_name = t.table_name"
        " WHERE t.constraint_type = 'PRIMARY KEY' AND t.table_schema = current_schema()"
        " ORDER BY k.table_name, k.ordinal_position"
    ).fetchall()
    keys: dict[str, tuple[str, ...]] = {}
    for table, column in rows:
        keys[table] = (*keys.get(table, ()), column)
    return keys


def _unquote(name: str) -> str:
    return name[1:-1].replace('""', '"') if name.startswith('"') else name


def _lite_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _to_text(value: Any) -> str:
    return value if isinstance(value, str) else str(value)


def _to_bytes(value: Any) -> bytes:
    return bytes(value)


def _to_json_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


_CONVERT: dict[str, Callable[[Any], Any]] = {
    "int": int,
    "float": float,
    "text": _to_text,
    "json": _to_json_text,  # COPY parses the text into JSONB
    "bytes": _to_bytes,
}


# -- the checksums ----------------------------------------------------------------------------


def _sqlite_rows(lite: sqlite3.Connection, table: Table) -> Iterator[Sequence[Any]]:
    columns = ", ".join(_lite_ident(c.name) for c in table.columns)
    order = ", ".join(_lite_ident(k) for k in table.key)  # TEXT keys: BINARY, i.e. UTF-8 bytes
    cursor = lite.execute(f"SELECT {columns} FROM {_lite_ident(table.name)} ORDER BY {order}")
    while rows := cursor.fetchmany(BATCH):
        yield from rows


def _pg_select(table: Table) -> sql.Composed:
    kinds = {c.name: c.kind for c in table.columns}
    # COLLATE "C" compares UTF-8 bytes, the order SQLite's BINARY collation gives text keys.
    order = [
        sql.SQL('{} COLLATE "C"' if kinds[k] == "text" else "{}").format(sql.Identifier(k))
        for k in table.key
    ]
    return sql.SQL("SELECT {} FROM {} ORDER BY {}").format(
        sql.SQL(", ").join(sql.Identifier(c.name) for c in table.columns),
        sql.Identifier(table.name),
        sql.SQL(", ").join(order),
    )


def _checksum(table: Table, rows: Iterable[Sequence[Any]]) -> tuple[int, str]:
    digest = hashlib.sha256()
    count = 0
    kinds = [c.kind for c in table.columns]
    for row in rows:
        values = [_normal(kind, value) for kind, value in zip(kinds, row, strict=True)]
        digest.update(json.dumps(values, ensure_ascii=False).encode())
        digest.update(b"\n")
        count += 1
    return count, digest.hexdigest()


def _normal(kind: str, value: Any) -> Any:
    """One form for a value whichever engine it was read from; the tag keeps kinds apart."""
    if value is None:
        return None
    if kind == "int":
        return int(value)
    if kind == "float":
        return "f" + repr(float(value))
    if kind == "bytes":
        return "b" + bytes(value).hex()
    if kind == "json":
        parsed = json.loads(value) if isinstance(value, str) else value
        return "j" + json.dumps(parsed, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    if isinstance(value, bytes | memoryview):  # text columns hold text; a stray blob shows
        return "b" + bytes(value).hex()
    return "s" + str(value)
