"""The retention purge on both engines: old finished sessions lose their events, steps,
idempotency records and approvals, then themselves with their messages; recent, live and
resumed sessions keep everything; desk sign-ins go once they have ended; every batch stays
under its bound; runs are audited per tenant, counts only."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from app.settings import RetentionSettings
from app.storage import audit
from app.storage.audit import AuditStore
from app.storage.desk_sessions import DeskSession, DeskSessionStore
from app.storage.event_log import SESSION_KEY, EventStore
from app.storage.port import Database
from app.storage.purge import DAY, Purger, RetentionPolicy
from app.storage.retention import SESSION_RULES
from app.storage.session_writer import NO_SESSION
from app.storage.sessions import SESSION_TABLES, SessionStore
from app.storage.steps import NewStep, TurnRef, enqueue_steps
from app.storage.turns import TurnStore, complete_turn
from app.storage.tx import Store, Tx
from tests.storage.test_usage import running_turn

NOW = time.time()
POLICY = RetentionPolicy.from_settings(RetentionSettings())  # HERMES_RETENTION_* defaults


async def finished_session(db: Database, tenant: str, *, turns: int = 2) -> str:
    """A session with finished turns: messages, events, steps and a tool call each."""
    session_id = (await SessionStore(db).create(tenant, "u1", {})).id
    store = TurnStore(db)
    for n in range(turns):
        turn = await running_turn(store, tenant, session_id)

        def finish(tx: Tx, turn: Any = turn, n: int = n) -> None:
            enqueue_steps(
                tx,
                TurnRef(tenant, session_id, turn.id),
                [NewStep(key=f"s{n}", action_type="generate_response", name="reply")],
                max_depth=50,
            )
            tx.execute(
                "INSERT INTO tool_calls (idempotency_key, tenant_id, session_id, turn_id,"
                " call_id, tool, status, created_at) VALUES (?, ?, ?, ?, 'c', 't',"
                " 'succeeded', ?)",
                (f"{turn.id}:c{n}", tenant, session_id, turn.id, tx.now),
            )
            complete_turn(
                tx,
                turn,
                text="ok",
                token_estimate=1,
                model="m",
                rounds=0,
                prompt_tokens=1,
                completion_tokens=1,
            )

        await store.transact(NO_SESSION, finish)
    return session_id


async def archive(db: Database, session_id: str, days_ago: float) -> None:
    at = NOW - days_ago * DAY
    await db.write(
        NO_SESSION,
        lambda conn: conn.execute(
            "UPDATE sessions SET status = 'archived', archived_at = ?, last_activity_at = ?"
            " WHERE id = ?",
            (at, at, session_id),
        ),
    )


# Events are keyed by the session's integer key (migration 0017).
_OF_SESSION = {"events": f"session_key = {SESSION_KEY}"}


async def _count(db: Database, table: str, session_id: str) -> int:
    where = _OF_SESSION.get(table, "session_id = ?")
    row = await db.fetchone(f"SELECT count(*) FROM {table} WHERE {where}", (session_id,))
    return int(row[0])


async def _orphan_events(db: Database) -> int:
    """Events whose session is gone (by its key: a deleted session's id finds no key)."""
    row = await db.fetchone(
        "SELECT count(*) FROM events e WHERE NOT EXISTS"
        " (SELECT 1 FROM sessions s WHERE s.session_key = e.session_key)"
    )
    return int(row[0])


async def _seqs(db: Database, session_id: str) -> list[int]:
    return [e.seq for e in await EventStore(db).after(session_id, 0)]


async def test_old_finished_sessions_lose_what_their_rules_say_and_nothing_else(
    open_db: Any,
) -> None:
    db = await open_db()
    old = await finished_session(db, "acme")
    recent = await finished_session(db, "acme")
    live = await finished_session(db, "zeta")
    ancient = await finished_session(db, "zeta")
    await archive(db, old, days_ago=40)
    await archive(db, recent, days_ago=5)
    await archive(db, ancient, days_ago=200)
    # The live session is old too: its rows were written long ago, it was never archived.
    await db.write(
        NO_SESSION,
        lambda conn: conn.execute(
            f"UPDATE events SET created_at = ? WHERE session_key = {SESSION_KEY}",
            (NOW - 400 * DAY, live),
        ),
    )
    before = {s: await _count(db, "events", s) for s in (old, recent, live)}
    live_seqs = await _seqs(db, live)
    assert all(before.values())

    report = await Purger(db, POLICY).purge(now=NOW)

    for table in ("events", "steps", "tool_calls"):
        assert await _count(db, table, old) == 0, table
        assert await _count(db, table, recent) > 0, table
        assert await _count(db, table, live) > 0, table
    # Messages and the session stay for 180 days; the 200-day-old session is gone whole.
    assert await _count(db, "messages", old) == 4
    assert await SessionStore(db).find("acme", old) is not None
    assert await SessionStore(db).find("zeta", ancient) is None
    for table in ("messages", "turns", "session_snapshots"):
        assert await _count(db, table, ancient) == 0, table
    assert await _orphan_events(db) == 0  # the ancient session's went with it
    # Replay of the live session is whole: every event from 1 on.
    assert await _seqs(db, live) == live_seqs and len(live_seqs) == before[live]

    assert report.by_table()["events"] == before[old] + report.deleted[("events", "zeta")]
    assert report.by_table()["sessions"] == 1
    # Audited per tenant, counts only.
    acme = await AuditStore(db).list("acme", action="retention.purged")
    zeta = await AuditStore(db).list("zeta", action="retention.purged")
    assert acme[0].details["rows"]["events"] == before[old]
    assert zeta[0].details["rows"]["sessions"] == 1
    assert "events" not in zeta[0].details["rows"] or zeta[0].details["rows"]["events"] > 0


async def test_batches_stay_under_their_bound_and_a_second_run_finds_nothing(
    open_db: Any,
) -> None:
    db = await open_db()
    sessions = [await finished_session(db, "acme", turns=3) for _ in range(3)]
    for s in sessions:
        await archive(db, s, days_ago=31)
    total = sum([await _count(db, "events", s) for s in sessions])
    purger = Purger(db, replace(POLICY, batch_rows=7, pause_s=0))

    report = await purger.purge(now=NOW)

    assert report.by_table()["events"] == total
    assert 0 < report.max_batch_rows <= 7
    assert report.batches >= total // 7
    again = await purger.purge(now=NOW)
    assert again.rows == 0
    assert again.batches == len(POLICY.cutoffs(NOW))  # one look per rule


async def test_a_resumed_session_keeps_its_rows_until_archived_again(open_db: Any) -> None:
    db = await open_db()
    session_id = await finished_session(db, "acme")
    await archive(db, session_id, days_ago=40)
    await db.write(
        NO_SESSION,
        lambda conn: conn.execute(
            "UPDATE sessions SET status = 'active' WHERE id = ?", (session_id,)
        ),
    )
    await Purger(db, POLICY).purge(now=NOW)
    assert await _count(db, "events", session_id) > 0

    await archive(db, session_id, days_ago=35)  # archived again, a while ago
    await Purger(db, POLICY).purge(now=NOW)
    assert await _count(db, "events", session_id) == 0


async def test_old_audit_rows_go_recent_ones_stay_and_zero_keeps_for_ever(
    open_db: Any,
) -> None:
    db = await open_db()
    store = Store(db)

    def rows(tx: Tx) -> None:
        for days in (400, 10):
            tx.now = NOW - days * DAY
            audit.record(tx, tenant_id="acme", actor="op", role="operator", action=f"x.{days}")

    await store.transact(NO_SESSION, rows)
    await Purger(db, replace(POLICY, audit_days=0)).purge(now=NOW)
    assert len(await AuditStore(db).list("acme")) == 2

    report = await Purger(db, POLICY).purge(now=NOW)
    assert report.by_table() == {"audit_log": 1}
    left = [e.action for e in await AuditStore(db).list("acme")]
    assert left == ["x.10", "retention.purged"]


async def desk_sign_in(db: Database, tenant: str, ends_in_s: float) -> str:
    """A stored desk sign-in that ends `ends_in_s` after NOW (before it, when negative)."""
    session_id = f"dsk_{tenant}{ends_in_s:+.0f}"
    session = DeskSession(
        session_id, tenant, "agent", "key_x", None, "0" * 64, NOW, NOW + ends_in_s
    )
    await DeskSessionStore(db).create(session)
    return session_id


async def test_desk_sign_ins_go_once_they_have_ended_in_bounded_batches(open_db: Any) -> None:
    db = await open_db()
    store = DeskSessionStore(db)
    ended = [await desk_sign_in(db, tenant, -s) for tenant in ("acme", "zeta") for s in (1, 9)]
    ended.append(await desk_sign_in(db, "acme", -86400))
    live = await desk_sign_in(db, "acme", 60)

    report = await Purger(db, replace(POLICY, batch_rows=2, pause_s=0)).purge(now=NOW)

    assert report.by_tenant() == {"acme": {"desk_sessions": 3}, "zeta": {"desk_sessions": 2}}
    assert report.max_batch_rows == 2
    assert [await store.get(s) for s in ended] == [None] * len(ended)
    assert await store.get(live) is not None
    # Kept as long as it stands, whatever the other rules keep or not.
    days = ("events", "steps", "idempotency", "approvals", "messages", "audit")
    nothing = replace(POLICY, **{f"{rule}_days": 0 for rule in days})  # all kept for ever
    assert (await Purger(db, nothing).purge(now=NOW + 59)).rows == 0
    assert (await Purger(db, nothing).purge(now=NOW + 61)).by_table() == {"desk_sessions": 1}


def test_the_purge_knows_every_table_of_a_session() -> None:
    # A session table the purge did not know would go only by the session's cascade, in one
    # unbounded statement; erasure (`SESSION_TABLES`) and retention must name the same tables.
    assert set(SESSION_RULES["sessions"]) == set(SESSION_TABLES)
