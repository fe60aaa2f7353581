"""Session leases: which process owns a session's turns, until when, under which fencing token.

A lease is taken inside the transaction that claims the session's next turn (`acquire`), kept
alive for every session a process holds by one statement per writer lane (`LeaseStore.renew`),
and let go in the transaction that finds nothing more to run (`release`). The token grows by
one each time the lease is taken (from another owner, or again after a release or expiry) and
never goes back (a released row stays, with
`expires_at = 0`); `app.storage.fence` checks it inside every write made with the owner's
`SessionWriter` (app/storage/session_writer.py).

Times are the processes' own clocks (Unix seconds): across machines they must agree to well
within a lease's length (NTP does).
"""

from __future__ import annotations

import asyncio
import os
import secrets
import socket
from collections.abc import Callable, Sequence

from app.storage.fence import Fence
from app.storage.session_writer import NO_SESSION, SessionWriter
from app.storage.tx import Store, Tx

_CHUNK = 500  # sessions renewed per statement (bound parameters stay far below any limit)


def new_owner() -> str:
    """This process's name as a lease owner: host, pid, and a random part (a pid is reused)."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


def acquire(tx: Tx, session_id: str, owner: str, ttl_s: float) -> int | None:
    """Take the session's lease, or keep it if `owner` holds it now; its token, or None while
    another owner holds it (or the session is gone). Keeping is the same tenure and token;
    taking a lease let go or expired is a new one, even by the same owner: a renewal that ran
    while it was let go reports the old token lost, which must not stop the new holder."""
    row = tx.one(
        "INSERT INTO session_leases (session_id, owner, token, expires_at)"
        " SELECT ?, ?, 1, ? WHERE EXISTS (SELECT 1 FROM sessions WHERE id = ?)"
        " ON CONFLICT (session_id) DO UPDATE SET"
        " token = CASE WHEN session_leases.owner = excluded.owner"
        " AND session_leases.expires_at > ? THEN session_leases.token"
        " ELSE session_leases.token + 1 END,"
        " owner = excluded.owner, expires_at = excluded.expires_at"
        " WHERE session_leases.owner = excluded.owner OR session_leases.expires_at <= ?"
        " RETURNING token",
        (session_id, owner, tx.now + ttl_s, session_id, tx.now, tx.now),
    )
    return None if row is None else int(row[0])


def release(tx: Tx, fence: Fence) -> None:
    """Let go (if still held under `fence`): anyone may take the lease now, with a new token."""
    tx.execute(
        "UPDATE session_leases SET expires_at = 0 WHERE session_id = ? AND owner = ? AND token = ?",
        (fence.session_id, fence.owner, fence.token),
    )


def _pid_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # someone else's process: alive
        return False
    return False


def dead_local_owner(owner: str, host: str | None = None) -> bool:
    """`owner` named a process of this host that no longer exists (never true of this one).

    Only meaningful where every owner shares one process table: processes on one SQLite file."""
    parts = owner.split(":")
    if len(parts) < 3 or not parts[-2].isdigit():
        return False
    owner_host = ":".join(parts[:-2])
    pid = int(parts[-2])
    if owner_host != (host or socket.gethostname()) or pid == os.getpid():
        return False
    return _pid_gone(pid)


class LeaseStore(Store):
    async def acquire(self, session_id: str, owner: str, ttl_s: float) -> int | None:
        """Take or keep the session's lease (on its lane: no lease held yet to fence it)."""
        return await self.transact(
            SessionWriter(session_id), lambda tx: acquire(tx, session_id, owner, ttl_s)
        )

    async def release(self, fence: Fence) -> None:
        """Let go of the lease held under `fence`, on the session's lane (its statement checks
        the fence itself: a stale owner's release changes nothing)."""
        await self.transact(SessionWriter(fence.session_id), lambda tx: release(tx, fence))

    async def renew(self, owner: str, held: dict[str, int], ttl_s: float) -> dict[str, int]:
        """Push on every lease in `held` (session -> token) that `owner` still holds; the ones
        it lost (taken over, or released meanwhile), with the token it had.

        One transaction per writer lane, with the sessions whose writes take that lane: a
        lease row is then only ever locked by its own session's lane, and a lane's fence
        checks never wait for another lane's renewal (app.storage.writer)."""

        def renew(group: dict[str, int]) -> Callable[[Tx], dict[str, int]]:
            def run(tx: Tx) -> dict[str, int]:
                kept: dict[str, int] = {}
                sessions = list(group)
                for start in range(0, len(sessions), _CHUNK):
                    chunk = sessions[start : start + _CHUNK]
                    marks = ", ".join("?" for _ in chunk)
                    rows = tx.execute(
                        "UPDATE session_leases SET expires_at = ? WHERE owner = ?"
                        f" AND expires_at > 0 AND session_id IN ({marks})"
                        " RETURNING session_id, token",
                        (tx.now + ttl_s, owner, *chunk),
                    ).fetchall()
                    kept.update((str(r[0]), int(r[1])) for r in rows)
                return {s: t for s, t in group.items() if kept.get(s) != t}

            return run

        groups: dict[int, dict[str, int]] = {}
        for session_id, token in held.items():
            groups.setdefault(self.db.lane_of(session_id), {})[session_id] = token
        futures = []
        for group in groups.values():
            # Every session of the group takes this lane: the first one's handle names it.
            lane = SessionWriter(next(iter(group)))
            futures.append(self.transact_nowait(lane, renew(group)))
        lost: dict[str, int] = {}
        for result, _events in await asyncio.gather(*futures):
            lost.update(result)
        return lost

    async def holder(self, session_id: str) -> tuple[str, int, float] | None:
        """(owner, token, expires_at) of the session's lease row, if it has one."""
        row = await self.db.fetchone(
            "SELECT owner, token, expires_at FROM session_leases WHERE session_id = ?",
            (session_id,),
        )
        return None if row is None else (str(row[0]), int(row[1]), float(row[2]))

    async def unowned(self, now: float, fresh_s: float = 0.0) -> list[str]:
        """Sessions with a queued or running turn and no live owner: the lease is absent,
        released or expired. A turn queued less than `fresh_s` ago does not count: the process
        that accepted it is about to claim it (and its caller follows the turn there)."""
        rows = await self.db.fetchall(
            "SELECT DISTINCT t.session_id FROM turns t"
            " LEFT JOIN session_leases l ON l.session_id = t.session_id"
            " WHERE t.status IN ('queued', 'running')"
            " AND (l.session_id IS NULL OR l.expires_at <= ?)"
            " AND (t.status = 'running' OR t.created_at <= ?)",
            (now, now - fresh_s),
        )
        return [str(r[0]) for r in rows]

    async def expire_dead_local(self, now: float) -> list[str]:
        """Let go of the unexpired leases of processes of this host that no longer exist (one
        SQLite file: every owner shares this host's process table); the owners expired."""
        rows = await self.db.fetchall(
            "SELECT DISTINCT owner FROM session_leases WHERE expires_at > ?", (now,)
        )
        dead = [str(r[0]) for r in rows if dead_local_owner(str(r[0]))]
        if dead:
            await self.transact(NO_SESSION, lambda tx: _expire_owners(tx, dead))
        return dead


def _expire_owners(tx: Tx, owners: Sequence[str]) -> None:
    for owner in owners:
        tx.execute(
            "UPDATE session_leases SET expires_at = 0 WHERE owner = ? AND expires_at > 0",
            (owner,),
        )
