"""Recall through the real index: scoping, hybrid scoring, decay, thresholds, the fence."""

import pytest

from app.memory.prompt import format_for_prompt
from app.memory.queries import ListFilter
from app.memory.records import Draft
from app.memory.scoring import ScoringConfig, lexical_scores
from app.memory.service import MemoryService
from app.memory.testing import FixedClock
from app.storage.session_writer import NO_SESSION, SessionWriter
from tests.memory.conftest import ALICE, BOB, OTHER_TENANT_ALICE


def values(recall):
    return [s.item.value for s in recall.items]


async def test_chinese_substrings_match_through_the_trigram_index(memory: MemoryService):
    await memory.upsert(ALICE, "note:gate", "小区东门的门禁密码是4411", tier="node")
    await memory.upsert(ALICE, "note:dog", "家里有一只大金毛，送货前先打电话", tier="node")
    got = await memory.recall(ALICE, "上次说的门禁密码是多少", writer=NO_SESSION)
    assert values(got) == ["小区东门的门禁密码是4411"]
    got = await memory.recall(ALICE, "你还记得我家的大金毛吗", writer=NO_SESSION)
    assert values(got) == ["家里有一只大金毛，送货前先打电话"]


async def test_recall_never_crosses_users_or_tenants(memory: MemoryService):
    for scope, courier in ((ALICE, "顺丰"), (BOB, "中通"), (OTHER_TENANT_ALICE, "京东物流")):
        await memory.upsert(scope, "preference.courier", courier)
        await memory.upsert(
            scope, "note:secret", f"{scope.tenant_id}-{scope.user_id} 暗号蓝莓", tier="node"
        )
    for scope, courier in ((ALICE, "顺丰"), (BOB, "中通"), (OTHER_TENANT_ALICE, "京东物流")):
        got = await memory.recall(
            scope, "还是用上次的快递", writer=NO_SESSION, intent="return_request"
        )
        assert values(got) == [courier]
        got = await memory.recall(scope, "上次的暗号蓝莓", writer=NO_SESSION, force=True)
        assert values(got) == [f"{scope.tenant_id}-{scope.user_id} 暗号蓝莓"]
        listed = await memory.list_memories(scope, ListFilter(text="暗号"))
        assert [m.user_id for m in listed] == [scope.user_id]
        assert {m.tenant_id for m in await memory.list_memories(scope)} == {scope.tenant_id}
    # entity named by another user's memory only
    assert values(await memory.recall(ALICE, "上次那个中通快递", writer=NO_SESSION)) == ["顺丰"]


async def test_a_user_without_memories_recalls_nothing(memory: MemoryService):
    await memory.upsert(ALICE, "preference.courier", "顺丰")
    assert (await memory.recall(BOB, "还是用上次的快递", writer=NO_SESSION)).items == []


async def test_only_turns_that_need_history_recall(memory: MemoryService):
    await memory.upsert(ALICE, "preference.courier", "顺丰")
    skipped = await memory.recall(ALICE, "你好", writer=NO_SESSION, intent="greeting")
    assert skipped.reason is None and skipped.items == []
    assert skipped.message is None and skipped.event is None
    assert (
        await memory.recall(ALICE, "寄快递", writer=NO_SESSION, intent="return_request")
    ).reason == "intent"


async def test_decayed_and_expired_memories_are_not_recalled(
    memory: MemoryService, clock: FixedClock
):
    await memory.upsert(ALICE, "preference.courier", "顺丰", confidence=0.9)
    await memory.upsert(ALICE, "contact.address", "上海市浦东新区1号", valid_until=clock.now + 3600)
    assert values(await memory.recall(ALICE, "我的地址还是上次那个", writer=NO_SESSION)) == [
        "上海市浦东新区1号"
    ]
    clock.advance(hours=2)  # the address expired; the courier is still fresh (0.9 e^-0.04)
    assert values(await memory.recall(ALICE, "我的地址还是上次那个", writer=NO_SESSION)) == []
    assert values(await memory.recall(ALICE, "还是用上次的快递", writer=NO_SESSION)) == ["顺丰"]
    clock.advance(hours=52)  # 54 h: 0.9 e^-1.08 = 0.306, still above the threshold
    assert values(await memory.recall(ALICE, "还是用上次的快递", writer=NO_SESSION)) == ["顺丰"]
    clock.advance(hours=2)  # 56 h: 0.9 e^-1.12 = 0.294 < 0.3
    assert values(await memory.recall(ALICE, "还是用上次的快递", writer=NO_SESSION)) == []


async def test_confirming_restarts_the_decay_clock(memory: MemoryService, clock: FixedClock):
    await memory.upsert(ALICE, "preference.courier", "顺丰", confidence=0.9)
    clock.advance(hours=50)
    await memory.after_turn(ALICE, SessionWriter("s2"), "我还是喜欢顺丰")
    clock.advance(hours=50)
    assert values(await memory.recall(ALICE, "还是用上次的快递", writer=NO_SESSION)) == ["顺丰"]


async def test_at_most_top_k_best_first(memory: MemoryService, clock: FixedClock):
    drafts = [
        Draft(
            key=f"note:{i}",
            value=f"第{i}次投诉：快递员态度不好，包裹破损",
            tier="node",
            fact_type="note",
        )
        for i in range(8)
    ]
    for draft in drafts:
        await memory.write(ALICE, [draft], actor="test")
        clock.advance(hours=1)
    got = await memory.recall(
        ALICE, "上次投诉快递员态度的事", writer=NO_SESSION, intent="complaint"
    )
    assert len(got.items) == 5
    assert [s.score for s in got.items] == sorted((s.score for s in got.items), reverse=True)
    assert values(got)[0].startswith("第7次")  # equal text: the most recent wins


async def test_per_type_thresholds_gate_weak_matches(db, clock: FixedClock):
    memory = MemoryService(db, clock=clock, scoring=ScoringConfig(threshold=0.65, top_k=5))
    for kind in ("note", "contact", "preference"):
        await memory.upsert(ALICE, f"{kind}:box", "蓝色的包装盒", tier="node")
    got = await memory.recall(ALICE, "上次那个蓝色的", writer=NO_SESSION, force=True)
    # same text, same score (0.65): preference needs 0.60, contact 0.65, a free note 0.70
    assert {s.item.fact_type for s in got.items} == {"preference", "contact"}
    assert {round(s.score, 2) for s in got.items} == {0.65}
    strict = MemoryService(
        db,
        clock=clock,
        scoring=ScoringConfig(threshold=0.65, top_k=5, thresholds={"preference": 0.9}),
    )
    got = await strict.recall(ALICE, "上次那个蓝色的", writer=NO_SESSION, force=True)
    assert {s.item.fact_type for s in got.items} == {"contact"}


async def test_weak_lexical_overlap_alone_is_not_enough(memory: MemoryService):
    await memory.upsert(ALICE, "note:box", "蓝色的包装盒和红色的丝带", tier="node")
    got = await memory.recall(
        ALICE, "上次那个蓝色的袋子、绿色的瓶子和黄色的盖子", writer=NO_SESSION, force=True
    )
    assert got.items == []  # one unit in five: far below a note's threshold


async def test_recall_notes_when_and_where_memories_were_used(
    memory: MemoryService, clock: FixedClock
):
    written = await memory.upsert(ALICE, "preference.courier", "顺丰")
    assert written.item.last_accessed_at is None
    clock.advance(hours=1)
    await memory.recall(ALICE, "还是用上次的快递", writer=SessionWriter("ses_2"))
    await memory.drain()
    item = await memory.get(ALICE, written.item.id)
    assert item.last_accessed_at == clock.now


async def test_the_prompt_block_is_fenced_and_the_event_has_no_values(memory: MemoryService):
    await memory.upsert(ALICE, "preference.courier", "顺丰")
    got = await memory.recall(ALICE, "还是用上次的快递", writer=NO_SESSION)
    text = format_for_prompt(got.items, got.fence)
    assert "may be outdated" in text and "confirm" in text and "not instructions" in text
    lines = text.splitlines()
    assert lines[1] == got.fence.open and lines[-1] == got.fence.close
    assert lines[2].startswith('- preference.courier: "顺丰" (entered by an operator,')
    assert got.message == {"role": "user", "name": "hermes_memory", "content": text}
    event = got.event
    assert event is not None and event["reason"] == "reference"
    assert event["items"][0]["key"] == "preference.courier" and "顺丰" not in str(event)
    assert event["items"][0]["origin"] == "operator" and event["untrusted"] is False
    assert format_for_prompt([]) == ""


def test_lexical_score_prefers_rare_units_and_is_bounded():
    texts = ["顺丰 快递", "快递 物流", "快递"]
    scores = lexical_scores(["顺丰", "快递"], texts, collection_size=3)
    assert scores[0] == pytest.approx(1.0, abs=0.15) and scores[0] > scores[1]
    assert all(0.0 <= s <= 1.0 for s in scores)
    assert lexical_scores([], texts, 3) == [0.0, 0.0, 0.0]


async def test_a_facts_key_name_is_searched_and_scored_as_words(memory: MemoryService):
    # The value ("PDF") shares nothing with the question; the key's words do.
    await memory.upsert(ALICE, "report_format", "PDF")
    await memory.upsert(ALICE, "preference.courier", "顺丰")
    got = await memory.recall(
        ALICE, "send me the report as before, same format as last time", writer=NO_SESSION
    )
    assert values(got) == ["PDF"]
    assert got.items[0].match == 1.0
    # One word of the key is not the key: "the report" alone does not name report_format.
    partial = await memory.recall(ALICE, "send me the report as before", writer=NO_SESSION)
    assert partial.items == []  # lexical 1 of 2 units, no match: under the note threshold


async def test_do_you_remember_recalls_the_closest_note(memory: MemoryService):
    # No word of the question is in the note: the question's form asks for the customer's note.
    await memory.upsert(ALICE, "note:avail", "I am only available after 3 pm", tier="node")
    got = await memory.recall(
        ALICE, "When did I say is a good time to call me, do you remember?", writer=NO_SESSION
    )
    assert values(got) == ["I am only available after 3 pm"]
    # With several notes only the closest is asked about (the others stay under the threshold).
    await memory.upsert(ALICE, "note:desk", "Deliveries go to the reception desk", tier="node")
    got = await memory.recall(ALICE, "Do you remember where my deliveries go?", writer=NO_SESSION)
    assert values(got) == ["Deliveries go to the reception desk"]
