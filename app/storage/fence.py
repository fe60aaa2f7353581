"""The fence around one owner's writes to a session: the session's lease as its worker holds
it, carried by the worker's `SessionWriter` (app/storage/session_writer.py) and checked inside
every transaction written with that handle (app/storage/writer.py).

A write from an owner whose lease was taken over raises `LeaseLost` in its own transaction,
before anything is written: the stale owner stops, the new owner's work stands.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.errors import StorageError
from app.storage.port import Connection, dialect_of


class LeaseLost(StorageError):
    """This process no longer owns the session: another process took it over."""


@dataclass(frozen=True)
class Fence:
    session_id: str
    owner: str
    token: int


def check(conn: Connection, fence: Fence) -> None:
    """Raise `LeaseLost` unless `fence` still holds the session's lease.

    On PostgreSQL the check locks the lease row until this transaction ends, so a takeover
    waits for it instead of slipping in between the check and the commit (SQLite's writer
    already admits one transaction at a time). The lock lasts until the transaction ends, so
    an engine whose connection keeps `fences_checked` (PostgreSQL's: the set of fences checked
    in the current transaction, outside savepoints) skips checking the same fence again in
    the same transaction — several jobs of one session committed together."""
    checked: set[Fence] | None = getattr(conn, "fences_checked", None)
    if checked is not None and fence in checked:
        return  # this transaction already holds the lease row locked
    lock = " FOR UPDATE" if dialect_of(conn) == "postgres" else ""
    row = conn.execute(
        "SELECT 1 FROM session_leases WHERE session_id = ? AND owner = ? AND token = ?" + lock,
        (fence.session_id, fence.owner, fence.token),
    ).fetchone()
    if row is None:
        raise LeaseLost(
            f"session {fence.session_id} was taken over; this process stops writing to it"
        )
    if checked is not None:
        checked.add(fence)
