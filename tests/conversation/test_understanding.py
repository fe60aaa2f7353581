"""The dual channel: which tools an intent offers, what the model is told, failure tolerance."""

from __future__ import annotations

from app.conversation.understanding import Understander
from app.nlu.testing import ScriptedParser
from app.nlu.types import ParseResult
from app.tools.spec import PythonHandler, Risk, ToolSpec


def tool(
    name: str, intents: tuple[str, ...] = (), always_on: bool = False, risk: Risk = "read"
) -> ToolSpec:
    return ToolSpec(
        name=name,
        description="x" * 20,
        parameters={"type": "object", "properties": {}, "additionalProperties": False},
        handler=PythonHandler("m", "f"),
        intents=intents,
        always_on=always_on,
        risk=risk,
    )


TOOLS = [
    tool("query_order_status", ("order_status",)),
    tool("request_refund", ("refund_request",)),
    tool("get_current_time", always_on=True),
    tool("mcp__kb__search"),
    tool("mcp__crm__write_note", risk="write"),
]


def test_a_confident_intent_narrows_the_tools() -> None:
    channel = Understander(ScriptedParser().on("where is it", "order_status", 0.9), 0.5)
    understood = channel.understand("where is it")
    names = [t.name for t in channel.tools_for(TOOLS, understood)]
    assert names == ["query_order_status", "get_current_time"]


def test_low_confidence_offers_everything() -> None:
    channel = Understander(ScriptedParser().on("hmm", "order_status", 0.3), 0.5)
    assert channel.tools_for(TOOLS, channel.understand("hmm")) == TOOLS
    assert channel.tools_for(TOOLS, None) == TOOLS


def test_out_of_scope_offers_general_tools() -> None:
    channel = Understander(ScriptedParser().on("weather?", "out_of_scope", 0.9), 0.5)
    names = [t.name for t in channel.tools_for(TOOLS, channel.understand("weather?"))]
    assert names == ["get_current_time", "mcp__kb__search", "mcp__crm__write_note"]


def test_a_question_about_a_rule_offers_no_write_tool() -> None:
    channel = Understander(ScriptedParser().on("退货运费谁出", "policy_question", 0.9), 0.5)
    names = [t.name for t in channel.tools_for(TOOLS, channel.understand("退货运费谁出"))]
    assert names == ["get_current_time", "mcp__kb__search"]


def test_the_note_carries_this_turns_and_earlier_slots() -> None:
    parser = ScriptedParser().on("refund 120", "refund_request", 0.8, slots={"amount": "120.00"})
    channel = Understander(parser, 0.5)
    note = channel.context_note(
        channel.understand("refund 120"), {"order_id": "202405201235", "amount": "99.00"}
    )
    assert note is not None and note["role"] == "system"
    assert "refund_request (confidence 0.80)" in note["content"]
    assert "this message: amount=120.00" in note["content"]
    assert "earlier in this conversation: order_id=202405201235" in note["content"]
    assert "99.00" not in note["content"]  # the newer value wins


def test_a_failing_parser_does_not_stop_the_turn() -> None:
    class Broken:
        def parse(self, text: str) -> ParseResult:
            raise RuntimeError("onnx went away")

    channel = Understander(Broken(), 0.5)
    assert channel.understand("hello") is None
    assert Understander(None, 0.5).understand("hello") is None
