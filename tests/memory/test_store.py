"""Writes through the one writer: newer wins, history of every change, proposals."""

import pytest

from app.errors import MemoryNotFound
from app.memory.queries import ListFilter
from app.memory.service import MemoryService
from app.memory.testing import FixedClock
from app.storage.session_writer import NO_SESSION
from tests.memory.conftest import ALICE, BOB


async def test_a_second_insert_for_the_same_key_updates_the_email(memory: MemoryService):
    # The article's bug: a duplicate insert was silently dropped and the old email kept.
    first = await memory.upsert(ALICE, "contact.email", "a@old.com")
    second = await memory.upsert(ALICE, "contact.email", "a@new.com")
    assert (first.action, second.action) == ("created", "updated")
    assert second.item.id == first.item.id
    rows = await memory.list_memories(ALICE, ListFilter(key="contact.email"))
    assert [(r.value, r.status) for r in rows] == [("a@new.com", "active")]
    recalled = await memory.recall(ALICE, "我的邮箱是哪个", writer=NO_SESSION)
    assert [s.item.value for s in recalled.items] == ["a@new.com"]


async def test_every_change_is_in_the_history(memory: MemoryService, clock: FixedClock):
    created = await memory.upsert(ALICE, "preference.courier", "中通", actor="op:1")
    clock.advance(hours=1)
    await memory.upsert(ALICE, "preference.courier", "顺丰", actor="op:2")
    clock.advance(hours=1)
    confirmed = await memory.upsert(ALICE, "preference.courier", "顺丰", confidence=0.5)
    assert confirmed.action == "confirmed"
    assert confirmed.item.confidence == 1.0  # a repeat never lowers confidence
    assert confirmed.item.last_confirmed_at == clock.now
    history = await memory.history(ALICE, created.item.id)
    assert [(h.action, h.old_value, h.new_value, h.actor) for h in history] == [
        ("created", None, "中通", "op:1"),
        ("updated", "中通", "顺丰", "op:2"),
        ("confirmed", "顺丰", "顺丰", "operator"),
    ]


async def test_newer_value_wins_over_an_archived_one(memory: MemoryService):
    old = await memory.upsert(ALICE, "preference.language", "English")
    await memory.sweep(now=memory.clock() + 30 * 86400)  # decays and archives it
    assert (await memory.get(ALICE, old.item.id)).status == "archived"
    revived = await memory.upsert(ALICE, "preference.language", "简体中文")
    assert (revived.item.id, revived.item.status, revived.item.value) == (
        old.item.id, "active", "简体中文",
    )  # fmt: skip


async def test_a_proposal_waits_pending_and_is_never_recalled(memory: MemoryService):
    proposed = await memory.propose(ALICE, "contact.phone", "13800001111", session_id="s1")
    assert (proposed.action, proposed.item.status) == ("proposed", "pending")
    assert (await memory.recall(ALICE, "我的手机号是多少", writer=NO_SESSION)).items == []
    again = await memory.propose(ALICE, "contact.phone", "13800001111")
    assert again.action == "unchanged" and again.item.id == proposed.item.id


async def test_pending_then_verified_then_recalled(memory: MemoryService):
    proposed = await memory.propose(ALICE, "contact.phone", "13800001111", session_id="s1")
    verified = await memory.verify(ALICE, proposed.item.id, actor="agent:7", reason="read back")
    assert verified.item.status == "active" and verified.item.confidence == 0.95
    recalled = await memory.recall(ALICE, "我的手机号是多少", writer=NO_SESSION)
    assert [s.item.value for s in recalled.items] == ["13800001111"]
    actions = [h.action for h in await memory.history(ALICE, proposed.item.id)]
    assert actions == ["proposed", "verified"]


async def test_verifying_a_proposal_replaces_the_current_value(memory: MemoryService):
    current = await memory.upsert(ALICE, "contact.email", "a@old.com")
    proposed = await memory.propose(ALICE, "contact.email", "a@new.com")
    assert proposed.item.id != current.item.id
    verified = await memory.verify(ALICE, proposed.item.id, actor="agent", reason="confirmed")
    assert verified.item.id == current.item.id and verified.item.value == "a@new.com"
    with pytest.raises(MemoryNotFound):
        await memory.get(ALICE, proposed.item.id)  # folded into the current row
    actions = [h.action for h in await memory.history(ALICE, current.item.id)]
    assert actions == ["created", "proposed", "verified"]


async def test_an_active_write_proves_or_contradicts_proposals(memory: MemoryService):
    same = await memory.propose(ALICE, "contact.email", "a@b.com")
    other = await memory.propose(ALICE, "contact.email", "x@y.com")
    assert other.item.status == "pending"
    written = await memory.upsert(ALICE, "contact.email", "a@b.com", source="tool")
    assert written.action == "created"
    rows = await memory.list_memories(ALICE, ListFilter(key="contact.email"))
    assert sorted((r.value, r.status) for r in rows) == [
        ("a@b.com", "active"),
        ("x@y.com", "rejected"),
    ]
    assert same.item.id not in {r.id for r in rows}


async def test_rejected_proposals_are_kept_for_audit_and_not_proposed_again(memory: MemoryService):
    proposed = await memory.propose(ALICE, "preference.courier", "EMS")
    await memory.reject(ALICE, proposed.item.id, actor="agent", reason="customer said no")
    assert (await memory.get(ALICE, proposed.item.id)).status == "rejected"
    again = await memory.propose(ALICE, "preference.courier", "EMS")
    assert again.action == "unchanged" and again.item.status == "rejected"
    assert (
        await memory.recall(ALICE, "用什么快递", writer=NO_SESSION, intent="track_shipment")
    ).items == []


async def test_bulk_write_is_one_transaction(memory: MemoryService, db):
    from app.memory.records import Draft

    before = db.commits
    drafts = [Draft(key=f"profile.k{i}", value=f"v{i}") for i in range(50)]
    written = await memory.write(BOB, drafts, actor="import")
    assert len(written) == 50 and db.commits == before + 1
    assert len(await memory.list_memories(BOB, ListFilter(limit=500))) == 50
