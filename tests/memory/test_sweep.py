"""The sweeper: archive decayed and expired memories, reject stale proposals, purge."""

import asyncio

from app.memory.queries import ListFilter
from app.memory.records import Draft
from app.memory.service import MemoryService
from app.memory.sweep import Retention
from app.memory.sweeper import MemorySweeper
from app.memory.testing import FixedClock
from app.storage.session_writer import NO_SESSION
from tests.memory.conftest import ALICE, BOB


async def statuses(memory: MemoryService, scope=ALICE) -> dict[str, str]:
    return {m.key: m.status for m in await memory.list_memories(scope, ListFilter(limit=500))}


async def test_sweep_archives_decayed_and_expired_and_keeps_the_rest(
    memory: MemoryService, clock: FixedClock
):
    await memory.upsert(ALICE, "preference.courier", "顺丰", confidence=0.9)  # decays at 54.9 h
    await memory.upsert(ALICE, "contact.email", "a@b.com", confidence=1.0)  # decays at 60.2 h
    await memory.upsert(ALICE, "contact.address", "北京", valid_until=clock.now + 3600)
    report = await memory.sweep(now=clock.now + 2 * 3600)
    assert (report.archived, report.expired) == (0, 1)
    report = await memory.sweep(now=clock.now + 57 * 3600)
    assert (report.archived, report.expired) == (1, 0)
    assert await statuses(memory) == {
        "preference.courier": "archived",
        "contact.email": "active",
        "contact.address": "archived",
    }
    reasons = [h.reason for h in await memory.history(ALICE, (await memory.list_memories(
        ALICE, ListFilter(key="contact.address")))[0].id)]  # fmt: skip
    assert reasons[-1] == "expired"
    # archived: listed, never recalled
    clock.advance(hours=3)
    assert (await memory.recall(ALICE, "还是用上次的快递", writer=NO_SESSION)).items == []


async def test_sweep_rejects_stale_proposals_and_purges_after_retention(db, clock: FixedClock):
    memory = MemoryService(
        db, clock=clock, retention=Retention(archived_days=10, rejected_days=5, pending_days=2)
    )
    proposal = await memory.propose(ALICE, "contact.phone", "13800000000")
    await memory.upsert(ALICE, "preference.courier", "顺丰")
    report = await memory.sweep(now=clock.now + 3 * 86400)
    assert (report.rejected, report.archived) == (1, 1)
    assert await statuses(memory) == {"contact.phone": "rejected", "preference.courier": "archived"}
    report = await memory.sweep(now=clock.now + 9 * 86400)  # rejected 6 days ago: purged
    assert report.purged_ids == [proposal.item.id] and report.index_steps >= 1
    report = await memory.sweep(now=clock.now + 14 * 86400)  # archived 11 days ago: purged
    assert report.purged == 1
    assert await statuses(memory) == {}
    audit = await memory.queries.audit(ALICE)
    assert [(a["action"], a["actor"], a["reason"]) for a in audit] == [
        ("purged", "sweeper", "retention"),
        ("purged", "sweeper", "retention"),
    ]


async def test_sweep_works_in_small_batches(db, clock: FixedClock):
    memory = MemoryService(db, clock=clock, retention=Retention(batch=7))
    drafts = [Draft(key=f"profile.k{i}", value=f"v{i}", confidence=0.5) for i in range(30)]
    await memory.write(ALICE, drafts[:15], actor="t")
    await memory.write(BOB, drafts[15:], actor="t")
    before = db.commits
    report = await memory.sweep(now=clock.now + 48 * 3600)
    assert report.archived == 30
    assert report.batches >= 30 // 7 + 1 + 2  # archive batches, then one reject, one purge pass
    # each its own write; PostgreSQL's index step is a VACUUM, outside the writer's commits
    index_commits = report.index_steps if db.dialect == "sqlite" else 0
    assert db.commits - before == report.batches + index_commits
    assert set((await statuses(memory, BOB)).values()) == {"archived"}


async def test_periodic_sweeper_runs_until_stopped(db, clock: FixedClock):
    memory = MemoryService(db, clock=clock)
    await memory.upsert(ALICE, "contact.address", "北京", valid_until=clock.now + 60)
    clock.advance(seconds=120)
    sweeper = MemorySweeper(memory, interval_s=0.01)
    sweeper.start()
    try:
        report = await asyncio.wait_for(sweeper.wait_for_passes(1), timeout=10)
        assert report is not None and report.expired == 1
        await asyncio.wait_for(sweeper.wait_for_passes(3), timeout=10)
    finally:
        await sweeper.stop()
    passes = sweeper.passes
    assert passes >= 3 and sweeper._task is None
    await sweeper.stop()  # stopping twice is harmless
    assert (await statuses(memory)) == {"contact.address": "archived"}
