"""The turn-loop calls end to end on a real database: two sessions, evidence, proposals."""

from pathlib import Path

import pytest

from app.errors import MemoryNotFound
from app.memory import open_memory
from app.memory.extract import Proposal, ToolEvidence
from app.memory.queries import ListFilter
from app.memory.records import Draft
from app.memory.service import MemoryService
from app.memory.testing import FixedClock
from app.settings import Settings
from app.storage.session_writer import NO_SESSION, SessionWriter
from tests.memory.conftest import ALICE, BOB
from tests.storage.batches import beside_a_batchmate


async def test_a_preference_from_session_one_is_used_in_session_two(
    memory: MemoryService, clock: FixedClock
):
    after = await memory.after_turn(
        ALICE,
        SessionWriter("ses_1"),
        "以后都用简体中文回复我。我喜欢顺丰，今天想吃面。",
        final_text="好的，已记下。",
    )
    assert sorted(w.item.key for w in after.written) == [
        "preference.courier",
        "preference.language",
    ]
    clock.advance(hours=20)
    # a new session, same user; the user does not repeat the preference
    before = await memory.before_turn(
        ALICE, SessionWriter("ses_2"), "帮我把这件退回去", intent="return_request"
    )
    assert [s.item.value for s in before.recall.items] == ["顺丰"]
    message = before.recall.message
    assert message is not None and "顺丰" in message["content"]
    assert "may be outdated" in message["content"]
    # another user sees nothing of it
    other = await memory.before_turn(
        BOB, SessionWriter("ses_3"), "帮我把这件退回去", intent="return_request"
    )
    assert other.recall.items == []


async def test_small_talk_leaves_no_memory(memory: MemoryService):
    after = await memory.after_turn(
        ALICE, SessionWriter("ses_1"), "今天想吃面", final_text="祝您用餐愉快！"
    )
    assert after.written == []
    assert await memory.list_memories(ALICE) == []


async def test_a_tool_verified_phone_is_stored_with_full_confidence(memory: MemoryService):
    evidence = ToolEvidence(
        "verify_customer", True, {"customer_id": "c1", "phone": "13912345678", "verified": True}
    )
    after = await memory.after_turn(
        ALICE, SessionWriter("ses_1"), "帮我核实一下", tool_results=[evidence]
    )
    (written,) = after.written
    assert (written.item.key, written.item.value, written.item.source, written.item.confidence) == (
        "contact.phone", "13912345678", "tool", 1.0,
    )  # fmt: skip


async def test_model_proposal_pending_then_verified_by_a_tool_then_recalled(memory: MemoryService):
    after = await memory.after_turn(
        ALICE,
        SessionWriter("ses_1"),
        "帮我查下订单",
        proposals=[Proposal("contact.email", "li.lei@example.com")],
    )
    assert [w.item.status for w in after.written] == ["pending"]
    assert (await memory.recall(ALICE, "我的邮箱是哪个", writer=NO_SESSION)).items == []
    lookup = ToolEvidence("crm_lookup", True, {"customer": {"email": "Li.Lei@example.com"}})
    after = await memory.after_turn(ALICE, SessionWriter("ses_1"), "好的", tool_results=[lookup])
    assert len(after.verified) == 1
    recalled = await memory.recall(ALICE, "我的邮箱是哪个", writer=NO_SESSION)
    assert [s.item.value for s in recalled.items] == ["li.lei@example.com"]


async def test_model_proposal_verified_when_the_user_repeats_it(memory: MemoryService):
    await memory.propose(ALICE, "contact.phone", "13800001111", session_id="ses_1")
    after = await memory.after_turn(ALICE, SessionWriter("ses_1"), "嗯，13800001111 就是我的新号码")
    assert len(after.verified) == 1
    rows = await memory.list_memories(ALICE, ListFilter(key="contact.phone"))
    assert [(r.value, r.status) for r in rows] == [("13800001111", "active")]


async def test_model_proposal_rejected_when_the_user_denies_it(memory: MemoryService):
    await memory.propose(ALICE, "contact.phone", "13800001111", session_id="ses_1")
    after = await memory.after_turn(
        ALICE,
        SessionWriter("ses_1"),
        "不对，那不是我的号码",
        previous_assistant="您的手机号是 13800001111 吗？",
    )
    assert len(after.rejected) == 1
    (row,) = await memory.list_memories(ALICE)
    assert row.status == "rejected"
    assert (await memory.recall(ALICE, "我的手机号是多少", writer=NO_SESSION)).items == []


async def test_a_proposal_proven_in_the_same_turn_is_active_at_once(memory: MemoryService):
    after = await memory.after_turn(
        ALICE,
        SessionWriter("ses_1"),
        "我的新邮箱 new@example.com",
        proposals=[Proposal("contact.email", "new@example.com")],
    )
    assert {(w.item.key, w.item.status) for w in after.written} == {("contact.email", "active")}


async def test_open_memory_takes_its_parameters_from_settings(db, tmp_path: Path):
    settings = Settings(
        db_path=tmp_path / "x.db",
        memory_decay_lambda=0.05,
        memory_archive_below=0.4,
        memory_recall_threshold=0.6,
        memory_recall_top_k=3,
    )
    service = open_memory(db, settings)
    assert (service.policy.lam, service.policy.archive_below) == (0.05, 0.4)
    assert (service.scoring.threshold, service.scoring.top_k) == (0.6, 3)
    assert service.embedder is None
    with_model = open_memory(
        db, Settings(db_path=tmp_path / "x.db", embedding_model="openai/text-embedding-3-small")
    )
    assert with_model.embedder is not None
    assert with_model.embedder.model == "openai/text-embedding-3-small"


async def test_a_refused_change_leaves_the_other_jobs_of_its_batch_run_once(
    memory: MemoryService,
):
    """A "no such memory" is the job's answer, not a failure: raised inside it, the writer ran the
    whole batch again, each job in a savepoint, and so every other job of the batch twice."""
    (kept,) = await memory.write(ALICE, [Draft("preference.courier", "顺丰")], actor="operator")
    runs, refused = await beside_a_batchmate(
        memory,
        None,
        memory.verify(ALICE, "mem_missing", actor="operator", reason="checked"),
        memory.reject(ALICE, "mem_missing", actor="operator", reason="wrong"),
        memory.delete(ALICE, "mem_missing", actor="operator", reason="asked"),
    )
    for answer in refused:
        with pytest.raises(MemoryNotFound):
            await answer
    assert runs == 1
    assert [m.id for m in await memory.list_memories(ALICE)] == [kept.item.id]
