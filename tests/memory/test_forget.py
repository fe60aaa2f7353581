"""Forgetting for good: rows, history, index postings; an audit row without content."""

import sqlite3

import psycopg
import pytest

from app.errors import MemoryNotFound
from app.memory.queries import ListFilter
from app.memory.service import MemoryService
from app.storage.audit import AuditStore
from app.storage.port import Database
from app.storage.session_writer import NO_SESSION, SessionWriter
from tests.memory.conftest import ALICE, BOB, OTHER_TENANT_ALICE

SECRET = "门禁密码qzxjv81"


async def index_traces(db: Database, secret: str) -> int:
    """SQLite: trigrams of `secret` found anywhere in the FTS index's pages and page index.
    PostgreSQL: rows the trigram index finds for it (the plan must use that index)."""
    if db.dialect == "postgres":
        sql = "SELECT count(*) FROM memories WHERE search_text ILIKE %s"
        with psycopg.connect(db.url, autocommit=True) as conn:  # type: ignore[attr-defined]
            conn.execute("SET enable_seqscan = off")  # a tiny table: make the planner show it
            plan = conn.execute("EXPLAIN " + sql, (f"%{secret}%",)).fetchall()
            assert "memories_search_trgm" in " ".join(str(r[0]) for r in plan)
            return int(conn.execute(sql, (f"%{secret}%",)).fetchone()[0])
    grams = [secret[i : i + 3].encode() for i in range(len(secret) - 2)]
    conn = sqlite3.connect(f"file:{db.path}?mode=ro", uri=True)
    try:
        blobs = [bytes(r[0]) for r in conn.execute("SELECT block FROM memory_fts_data")]
        blobs += [str(r[0]).encode() for r in conn.execute("SELECT term FROM memory_fts_idx")]
    finally:
        conn.close()
    return sum(1 for g in grams for b in blobs if g in b)


def vacuums(db: Database) -> int:
    """PostgreSQL: how often `memories` was vacuumed by hand (what drops deleted rows' index
    entries at once)."""
    with psycopg.connect(db.url, autocommit=True) as conn:  # type: ignore[attr-defined]
        row = conn.execute(
            "SELECT vacuum_count FROM pg_stat_user_tables WHERE relname = 'memories'"
        ).fetchone()
        return int(row[0]) if row else 0


async def indexed_docs(db: Database) -> int:
    if db.dialect == "postgres":
        return int((await db.fetchall("SELECT count(*) FROM memories"))[0][0])
    conn = sqlite3.connect(f"file:{db.path}?mode=ro", uri=True)
    try:
        return int(conn.execute("SELECT count(*) FROM memory_fts_docsize").fetchone()[0])
    finally:
        conn.close()


async def test_delete_removes_row_history_and_index_and_audits_without_content(
    memory: MemoryService, db: Database
):
    kept = await memory.upsert(ALICE, "preference.courier", "顺丰")
    gone = await memory.upsert(ALICE, "note:gate", f"小区东门{SECRET}", tier="node")
    await memory.upsert(ALICE, "note:gate", f"小区北门{SECRET}", tier="node")  # some history
    assert (await memory.recall(ALICE, f"上次的{SECRET}", writer=NO_SESSION)).items
    assert await index_traces(db, SECRET) > 0  # the check below can see postings
    vacuumed = vacuums(db) if db.dialect == "postgres" else 0

    await memory.delete(ALICE, gone.item.id, actor="op:9", reason="gdpr_request")

    if db.dialect == "postgres":  # the deleted row's index entries were dropped at once
        assert vacuums(db) == vacuumed + 1

    assert (await memory.recall(ALICE, f"上次的{SECRET}", writer=NO_SESSION)).items == []
    assert await memory.list_memories(ALICE, ListFilter(text="qzxjv81")) == []
    with pytest.raises(MemoryNotFound):
        await memory.history(ALICE, gone.item.id)
    assert await index_traces(db, SECRET) == 0
    assert await indexed_docs(db) == 1
    rows = await db.fetchall(
        "SELECT count(*) FROM memory_history WHERE memory_pk = ?", (gone.item.pk,)
    )
    assert rows[0][0] == 0
    (audit,) = await memory.queries.audit(ALICE)
    assert (audit["memory_id"], audit["action"], audit["actor"], audit["reason"]) == (
        gone.item.id, "deleted", "op:9", "gdpr_request",
    )  # fmt: skip
    assert (
        len(audit["key_hash"]) == 64 and "note:gate" not in str(audit) and SECRET not in str(audit)
    )
    assert (await memory.get(ALICE, kept.item.id)).value == "顺丰"


async def test_foreign_and_missing_ids_are_not_found(memory: MemoryService):
    mine = await memory.upsert(ALICE, "preference.courier", "顺丰")
    for scope in (BOB, OTHER_TENANT_ALICE):
        with pytest.raises(MemoryNotFound):
            await memory.delete(scope, mine.item.id, actor="x", reason="y")
        with pytest.raises(MemoryNotFound):
            await memory.history(scope, mine.item.id)
    with pytest.raises(MemoryNotFound):
        await memory.delete(ALICE, "mem_nope", actor="x", reason="y")
    assert (await memory.get(ALICE, mine.item.id)).status == "active"


async def test_forget_by_key_or_query_touches_only_that_user(memory: MemoryService, db: Database):
    await memory.upsert(ALICE, "contact.email", "alice@example.com")
    await memory.propose(ALICE, "contact.email", "alice@typo.com")
    await memory.upsert(ALICE, "note:dog", f"家里有狗 {SECRET}", tier="node")
    await memory.upsert(ALICE, "preference.courier", "顺丰")
    await memory.upsert(BOB, "contact.email", "bob@example.com")
    await memory.upsert(BOB, "note:dog", f"家里有狗 {SECRET}", tier="node")

    by_key = await memory.forget(ALICE, key="contact.email", actor="op", reason="request")
    assert len(by_key) == 2  # the current value and the pending proposal
    by_query = await memory.forget(ALICE, query="qzxjv81", actor="op", reason="request")
    assert len(by_query) == 1
    assert [m.key for m in await memory.list_memories(ALICE)] == ["preference.courier"]
    assert {m.key for m in await memory.list_memories(BOB)} == {"contact.email", "note:dog"}
    assert (
        await memory.recall(BOB, f"上次说的{SECRET}", writer=NO_SESSION)
    ).items  # Bob's copy is untouched
    assert await memory.forget(ALICE, query="nothing like this", actor="op", reason="r") == []
    with pytest.raises(ValueError):
        await memory.forget(ALICE, key="a", query="b", actor="op", reason="r")


async def test_forget_that_in_conversation_deletes_what_was_last_stored(
    memory: MemoryService, clock
):
    await memory.after_turn(ALICE, SessionWriter("ses_1"), "以后都用简体中文")
    clock.advance(seconds=30)
    await memory.after_turn(ALICE, SessionWriter("ses_1"), "我喜欢顺丰")
    before = await memory.before_turn(ALICE, SessionWriter("ses_1"), "算了，忘掉这个")
    assert before.forget_command and len(before.forgotten) == 1
    assert [m.key for m in await memory.list_memories(ALICE)] == ["preference.language"]
    (audit,) = await memory.queries.audit(ALICE)
    assert (audit["action"], audit["actor"], audit["reason"]) == (
        "forgotten", "session:ses_1", "user_request",
    )  # fmt: skip
    # The tenant's audit trail has each change, by whom: the customer's own words.
    trail = await AuditStore(memory.db).list(ALICE.tenant_id, session_id="ses_1")
    assert [(e.action, e.actor, e.role) for e in trail] == [
        ("memory.written", "session:ses_1", "customer"),
        ("memory.written", "session:ses_1", "customer"),
        ("memory.forgotten", "session:ses_1", "customer"),
    ]
    assert trail[-1].details == {
        "user_id": "alice", "key": "preference.courier", "reason": "user_request",
    }  # fmt: skip


async def test_forget_that_deletes_what_was_last_recalled(memory: MemoryService, clock):
    await memory.after_turn(ALICE, SessionWriter("ses_1"), "我喜欢顺丰")
    await memory.after_turn(ALICE, SessionWriter("ses_1"), "以后都用简体中文")
    clock.advance(hours=1)
    recalled = await memory.before_turn(ALICE, SessionWriter("ses_2"), "还是用上次的快递吗")
    assert [s.item.key for s in recalled.recall.items] == ["preference.courier"]
    gone = await memory.forget_in_conversation(ALICE, SessionWriter("ses_2"), "Forget that.")
    assert gone == [recalled.recall.items[0].item.id]
    assert [m.key for m in await memory.list_memories(ALICE)] == ["preference.language"]
    # nothing else was stored or recalled in ses_2: a second "forget that" deletes nothing
    assert await memory.forget_in_conversation(ALICE, SessionWriter("ses_2"), "忘掉这个") == []
    assert await memory.forget_in_conversation(ALICE, SessionWriter("ses_2"), "我的订单呢") is None


async def test_forget_that_never_reaches_another_users_memories(memory: MemoryService):
    await memory.after_turn(BOB, SessionWriter("ses_shared"), "我喜欢中通")
    assert await memory.forget_in_conversation(ALICE, SessionWriter("ses_shared"), "别记这个") == []
    assert [m.value for m in await memory.list_memories(BOB)] == ["中通"]
