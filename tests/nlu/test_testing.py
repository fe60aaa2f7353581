"""The scripted test double."""

from __future__ import annotations

import pytest

from app.nlu.testing import ScriptedParser
from app.nlu.types import Parser, Slot


def test_scripted_answers_by_text_then_queue_then_default() -> None:
    parser = ScriptedParser()
    parser.on("我的订单到哪了", "order_status", 0.93)
    parser.enqueue("refund_request", slots={"order_id": "202405201235"})

    first = parser.parse("我的订单到哪了")
    assert (first.intent, first.confidence, first.language) == ("order_status", 0.93, "zh")
    assert first.ranking[0].intent == "order_status"
    assert len(first.ranking) == 3

    queued = parser.parse("refund order 202405201235 please")
    assert queued.intent == "refund_request"
    (slot,) = queued.slots
    assert (slot.value, slot.start, slot.end, slot.text) == ("202405201235", 13, 25, slot.text)
    assert queued.slot("order_id") == "202405201235"

    fallback = parser.parse("anything")
    assert (fallback.intent, fallback.confidence) == ("out_of_scope", 0.0)
    assert parser.parse("我的订单到哪了").intent == "order_status"  # `on` answers every time
    assert parser.calls == ["我的订单到哪了", "refund order 202405201235 please", "anything",
                            "我的订单到哪了"]  # fmt: skip


def test_slots_can_be_given_whole_and_unknown_intents_are_refused() -> None:
    slot = Slot(name="date", value="2024-05-23", start=0, end=2, text="明天")
    parser: Parser = ScriptedParser().on("明天到吗", "track_shipment", slots=[slot])
    assert parser.parse("明天到吗").slots == [slot]
    with pytest.raises(ValueError, match="unknown intent"):
        ScriptedParser().enqueue("chit_chat")
