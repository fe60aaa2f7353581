"""The agent loop alone, inside a real turn: rounds, the cap, tool order, refusals, model
failures and resuming, with the in-process scripted model and a real SQLite file."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from app.conversation.loop import MAX_ROUNDS_REPLY, Resume
from app.errors import UpstreamLLMError
from app.llm.gateway import RequestedToolCall
from app.llm.testing import BreakStream, Fail, Reply, ToolCall, ToolCalls
from tests.conversation.core import RAN, Core, open_core, streamed_text, types


@pytest.fixture
async def core(tmp_path: Path) -> AsyncIterator[Core]:
    async with open_core(tmp_path, max_rounds=3) as opened:
        yield opened


def tool_messages(messages: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """(call id, parsed content) of each `tool` message, in conversation order."""
    return [(m["tool_call_id"], json.loads(m["content"])) for m in messages if m["role"] == "tool"]


def error_code(content: dict[str, Any]) -> str:
    return str(content["error"]["code"])


def offered_names(request: Any) -> list[str]:
    return [t["function"]["name"] for t in request.tools or []]


async def test_a_text_reply_ends_the_turn_after_one_model_call(core: Core) -> None:
    core.model.enqueue(Reply("Hello, how can I help?", usage=(12, 7)))
    turn = await core.running_turn("hi")

    result = await core.run_loop(turn, user_text="hi")

    outcome = result.outcome
    assert (outcome.text, outcome.stopped, outcome.rounds) == ("Hello, how can I help?", "final", 0)
    assert (outcome.model, outcome.prompt_tokens, outcome.completion_tokens) == ("scripted", 12, 7)
    [request] = core.model.requests
    assert request.phase == "tools"
    assert sorted(offered_names(request)) == ["lookup", "refund", "save_note"]
    log = await core.log(turn.session_id)
    assert set(types(log, turn_id=turn.id)) == {"turn.started", "message.delta"}
    assert streamed_text(log) == "Hello, how can I help?"
    assert [m.role for m in await core.history(turn.session_id)] == ["user"]  # the pipeline adds


async def test_one_tool_round_feeds_the_result_back_to_the_model(core: Core) -> None:
    core.model.enqueue(
        ToolCalls(ToolCall("lookup", {"key": "colour"}, id="c1")),
        Reply("It is value of colour.", chunks=1),
    )
    turn = await core.running_turn()

    result = await core.run_loop(turn)

    assert (result.outcome.stopped, result.outcome.rounds) == ("final", 1)
    assert RAN == [("lookup", {"key": "colour"})]
    first, second = core.model.requests
    assert [m["role"] for m in first.messages] == ["system", "user"]
    assert [m["role"] for m in second.messages] == ["system", "user", "assistant", "tool"]
    assert second.messages[2]["tool_calls"][0]["id"] == "c1"
    [(call_id, content)] = tool_messages(second.messages)
    assert call_id == "c1"
    assert content == {"status": "success", "data": {"key": "colour", "value": "value of colour"}}
    log = await core.log(turn.session_id)
    assert types(log, turn_id=turn.id) == [
        "turn.started",
        "tool.started",
        "tool.completed",
        "message.delta",
    ]
    completed = next(e for e in log if e.type == "tool.completed")
    assert (completed.data["call_id"], completed.data["status"]) == ("c1", "success")
    stored = await core.history(turn.session_id)
    assert [(m.role, m.tool_call_id) for m in stored] == [
        ("user", None),
        ("assistant", None),
        ("tool", "c1"),
    ]
    assert stored[1].tool_calls is not None and stored[1].tool_calls[0]["id"] == "c1"


async def test_tools_of_one_round_run_reads_first_and_report_in_the_models_order(
    core: Core,
) -> None:
    core.model.enqueue(
        ToolCalls(
            ToolCall("save_note", {"text": "first"}, id="c1"),
            ToolCall("lookup", {"key": "k"}, id="c2"),
            ToolCall("save_note", {"text": "second"}, id="c3"),
        ),
        Reply("Done."),
    )
    turn = await core.running_turn()

    result = await core.run_loop(turn)

    assert result.outcome.rounds == 1
    # Reads run first (concurrently), then writes one at a time in the model's order ...
    assert RAN == [
        ("lookup", {"key": "k"}),
        ("save_note", {"text": "first"}),
        ("save_note", {"text": "second"}),
    ]
    # ... and the model gets the results back in the order it asked for them.
    assert [c for c, _ in tool_messages(core.model.requests[1].messages)] == ["c1", "c2", "c3"]
    stored = await core.history(turn.session_id)
    assert [m.tool_call_id for m in stored if m.role == "tool"] == ["c1", "c2", "c3"]
    log = await core.log(turn.session_id)
    completed = [e.data["call_id"] for e in log if e.type == "tool.completed"]
    assert completed == ["c2", "c1", "c3"]  # as they ran


async def test_the_round_cap_ends_the_turn_with_a_graceful_reply(core: Core) -> None:
    core.model.enqueue(*(ToolCalls(ToolCall("lookup", {"key": f"k{i}"})) for i in range(5)))
    turn = await core.running_turn()

    result = await core.run_loop(turn, user_text="check everything")

    outcome = result.outcome
    assert (outcome.stopped, outcome.rounds) == ("max_rounds", 3)
    assert outcome.text == MAX_ROUNDS_REPLY["en"]
    assert len(core.model.requests) == 3  # no fourth model call
    assert [args["key"] for _, args in RAN] == ["k0", "k1", "k2"]
    assert (outcome.prompt_tokens, outcome.completion_tokens) == (30, 15)


async def test_the_cap_reply_speaks_the_customers_language(core: Core) -> None:
    core.model.enqueue(*(ToolCalls(ToolCall("lookup", {"key": "k"})) for _ in range(3)))
    turn = await core.running_turn()

    result = await core.run_loop(turn, user_text="帮我查一下所有订单")

    assert result.outcome.text == MAX_ROUNDS_REPLY["zh"]


async def test_a_tool_not_offered_this_turn_is_refused_before_it_runs(core: Core) -> None:
    lookup = [t for t in core.registry.offered() if t.name == "lookup"]
    core.model.enqueue(
        ToolCalls(
            ToolCall("save_note", {"text": "sneaky"}, id="c1"),
            ToolCall("no_such_tool", {}, id="c2"),
        ),
        Reply("I can only look things up."),
    )
    turn = await core.running_turn()

    result = await core.run_loop(turn, tools=lookup, offered=frozenset({"lookup"}))

    assert RAN == []
    assert offered_names(core.model.requests[0]) == ["lookup"]
    [(_, not_offered), (_, unknown)] = tool_messages(result.messages)
    assert error_code(not_offered) == "tool_not_offered"
    assert "lookup" in not_offered["error"]["hint"]
    assert error_code(unknown) == "unknown_tool"
    assert result.outcome.text == "I can only look things up."


async def test_bad_arguments_go_back_to_the_model_as_a_fix_hint(core: Core) -> None:
    core.model.enqueue(
        ToolCalls(
            ToolCall("lookup", {"key": ""}, id="c1"),
            ToolCall("lookup", '{"key": "unterminated', id="c2"),
            ToolCall("save_note", {}, id="c3"),
        ),
        ToolCalls(ToolCall("lookup", {"key": "fixed"}, id="c4")),
        Reply("Found it."),
    )
    turn = await core.running_turn()

    result = await core.run_loop(turn)

    assert RAN == [("lookup", {"key": "fixed"})]  # only the corrected call ran
    # (two failures: a third would have given lookup up for the rest of the turn)
    results = dict(tool_messages(result.messages))
    assert error_code(results["c1"]) == "invalid_arguments"
    assert error_code(results["c2"]) == "malformed_arguments"
    assert error_code(results["c3"]) == "invalid_arguments"
    assert results["c4"]["status"] == "success"
    assert result.outcome.rounds == 2


async def test_a_business_rule_refuses_the_call_and_says_why(core: Core) -> None:
    core.model.enqueue(
        ToolCalls(ToolCall("refund", {"amount": 500}, id="c1")),
        ToolCalls(ToolCall("refund", {"amount": 80}, id="c2")),
        Reply("I refunded 80."),
    )
    turn = await core.running_turn()

    result = await core.run_loop(turn)

    assert RAN == [("refund", {"amount": 80})]
    results = dict(tool_messages(result.messages))
    assert error_code(results["c1"]) == "business_rule"
    assert "above the limit of 100" in results["c1"]["error"]["message"]
    assert results["c2"] == {"status": "success", "data": {"refunded": 80}}


async def test_a_tool_that_keeps_failing_is_no_longer_offered(core: Core) -> None:
    core.model.enqueue(
        ToolCalls(*(ToolCall("lookup", {"key": ""}, id=f"c{i}") for i in range(3))),
        Reply("Lookups are not available right now."),
    )
    turn = await core.running_turn()

    result = await core.run_loop(turn)

    first, second = core.model.requests
    assert "lookup" in offered_names(first)
    assert "lookup" not in offered_names(second)
    last = tool_messages(result.messages)[-1][1]
    assert "Do not call it again" in last["error"]["hint"]


async def test_a_model_failure_propagates_and_keeps_what_the_turn_recorded(core: Core) -> None:
    core.model.enqueue(
        ToolCalls(ToolCall("save_note", {"text": "kept"}, id="c1")), Fail(503, "down")
    )
    turn = await core.running_turn()

    with pytest.raises(UpstreamLLMError) as raised:
        await core.run_loop(turn)

    assert raised.value.code == "llm_unavailable"
    assert RAN == [("save_note", {"text": "kept"})]
    stored = await core.history(turn.session_id)
    assert [(m.role, m.tool_call_id) for m in stored] == [
        ("user", None),
        ("assistant", None),
        ("tool", "c1"),
    ]
    model_steps = [
        s for s in await core.steps.for_session(turn.tenant_id, turn.session_id)
        if s.action_type == "generate_response"
    ]  # fmt: skip
    assert [s.status for s in model_steps] == ["succeeded", "failed"]


async def test_text_streamed_before_a_broken_stream_is_stored(core: Core) -> None:
    core.model.enqueue(BreakStream("Let me check "))
    turn = await core.running_turn()

    with pytest.raises(UpstreamLLMError) as raised:
        await core.run_loop(turn)

    assert raised.value.code == "llm_stream_interrupted"
    assert streamed_text(await core.log(turn.session_id)) == "Let me check "


async def test_a_resumed_turn_answers_its_open_calls_before_asking_the_model(core: Core) -> None:
    core.model.enqueue(Reply("Here is z."))
    turn = await core.running_turn()
    open_call = RequestedToolCall("c9", "lookup", '{"key": "z"}')
    messages = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "look z up"},
        {"role": "assistant", "content": None, "tool_calls": [open_call.as_message_part()]},
    ]

    result = await core.run_loop(
        turn, messages=messages, resume=Resume(pending_calls=[open_call], rounds_used=1)
    )

    assert RAN == [("lookup", {"key": "z"})]
    [request] = core.model.requests
    assert [m["role"] for m in request.messages] == ["system", "user", "assistant", "tool"]
    assert tool_messages(request.messages)[0][0] == "c9"
    assert (result.outcome.text, result.outcome.rounds) == ("Here is z.", 1)


async def test_rounds_used_before_the_resume_count_towards_the_cap(core: Core) -> None:
    core.model.enqueue(ToolCalls(ToolCall("lookup", {"key": "a"})), Reply("never asked"))
    turn = await core.running_turn()

    result = await core.run_loop(turn, resume=Resume(pending_calls=[], rounds_used=2))

    assert (result.outcome.stopped, result.outcome.rounds) == ("max_rounds", 3)
    assert len(core.model.requests) == 1
