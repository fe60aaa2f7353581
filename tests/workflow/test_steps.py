"""The step machine through the service: traces, batches, queue depth, watchdog, ask_user
timeouts, and resuming a failed turn from a step without repeating side effects."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from app.llm.testing import Fail, FakeLLMServer, Reply, ToolCall, ToolCalls
from app.observability import metrics
from app.testing import LiveService, serve, stream_turn
from tests.api.test_sessions import assert_error
from tests.conftest import FIXTURE_TOOLS, new_session
from tests.tools.fixture_tools import REC


@pytest.fixture(autouse=True)
def _reset() -> None:
    REC.reset()


@pytest.fixture
def svc(tools_service: LiveService) -> LiveService:
    return tools_service


async def steps_of(svc: LiveService, session_id: str) -> list[dict[str, Any]]:
    response = await svc.client.get(f"/v1/sessions/{session_id}/steps")
    assert response.status_code == 200, response.text
    return list(response.json()["items"])


async def post(svc: LiveService, session_id: str, content: str) -> Any:
    return await svc.client.post(f"/v1/sessions/{session_id}/messages", json={"content": content})


async def test_traces_and_the_batch_of_parallel_reads(
    svc: LiveService, fake_llm: FakeLLMServer
) -> None:
    fake_llm.enqueue(
        ToolCalls(
            ToolCall("slow_read", {"key": "a"}, id="r1"),
            ToolCall("write_note", {"text": "n"}, id="w1"),
            ToolCall("slow_read", {"key": "b"}, id="r2"),
        ),
        Reply("done", usage=(40, 3)),
    )
    session_id = await new_session(svc)
    # Not a question ("what are a and b?" may read as one about a rule, which offers no write).
    assert (await post(svc, session_id, "look up a and b, and note n")).status_code == 200
    steps = await steps_of(svc, session_id)
    by_key = {s["key"]: s for s in steps}
    assert [s["key"] for s in steps] == [
        "model:0",
        "batch:0",
        "tool:r1",
        "tool:w1",
        "tool:r2",
        "model:1",
    ]
    assert all(s["status"] == "succeeded" for s in steps)
    batch = by_key["batch:0"]
    assert batch["action_type"] == "batch" and batch["input_context"]["calls"] == ["r1", "r2"]
    assert by_key["tool:r1"]["parent_id"] == batch["id"] == by_key["tool:r2"]["parent_id"]
    assert by_key["tool:w1"]["parent_id"] is None
    read = by_key["tool:r1"]
    assert read["action_type"] == "call_tool" and read["name"] == "slow_read"
    assert read["trace"]["tool_duration_ms"] >= 100  # the handler sleeps 150 ms
    assert read["result"]["data"] == {"key": "a", "value": "value of a"}
    answer = by_key["model:1"]
    assert answer["action_type"] == "generate_response"
    assert answer["trace"]["model"] == "test-model"
    assert answer["trace"]["input_tokens"] == 40 and answer["trace"]["output_tokens"] == 3
    assert answer["trace"]["validation"] == {"valid": True, "errors": []}
    assert by_key["model:0"]["result"]["tool_calls"][0]["name"] == "slow_read"
    # The batch started before the write, and the write ran after both reads ended.
    assert batch["trace"]["started_at"] <= by_key["tool:w1"]["trace"]["started_at"]
    assert by_key["tool:w1"]["trace"]["started_at"] >= max(
        by_key["tool:r1"]["trace"]["finished_at"], by_key["tool:r2"]["trace"]["finished_at"]
    )


async def test_the_queue_refuses_depth_over_its_limit(
    make_settings: Any, fake_llm: FakeLLMServer
) -> None:
    fake_llm.enqueue(
        ToolCalls(*[ToolCall("write_note", {"text": f"n{i}"}, id=f"w{i}") for i in range(5)]),
        Reply("some were refused"),
    )
    async with serve(make_settings(tools_file=FIXTURE_TOOLS, step_queue_max_depth=3)) as svc:
        session_id = await new_session(svc)
        assert (await post(svc, session_id, "five notes")).status_code == 200
        steps = await steps_of(svc, session_id)
    tool_steps = [s for s in steps if s["action_type"] == "call_tool"]
    assert [s["key"] for s in tool_steps] == ["tool:w0", "tool:w1", "tool:w2"]
    assert [s["text"] for s in REC.side_effects] == ["n0", "n1", "n2"]
    results = [
        json.loads(m["content"]) for m in fake_llm.requests[1].messages if m["role"] == "tool"
    ]
    assert [r.get("error", {}).get("code") for r in results][3:] == [
        "step_queue_full",
        "step_queue_full",
    ]


async def test_the_watchdog_ends_a_turn_stuck_in_a_hanging_tool(
    make_settings: Any, fake_llm: FakeLLMServer
) -> None:
    REC.hang = True
    fake_llm.enqueue(ToolCalls(ToolCall("hang_write", {"text": "x"}, id="h1")))
    settings = make_settings(
        tools_file=FIXTURE_TOOLS, step_stuck_after_s=0.3, watchdog_interval_s=0.05
    )
    stuck_before = metrics.STUCK_STEPS._value.get()
    async with serve(settings) as svc:
        session_id = await new_session(svc)
        events = await asyncio.wait_for(stream_turn(svc.client, session_id, "save it"), 20)
        assert events[-1].event == "turn.failed"
        assert events[-1].data["code"] == "step_stuck"
        steps = {s["key"]: s for s in await steps_of(svc, session_id)}
        assert steps["tool:h1"]["status"] == "stuck"
        assert metrics.STUCK_STEPS._value.get() == stuck_before + 1
        fake_llm.enqueue(Reply("still here"))
        assert (await post(svc, session_id, "hello?")).json()["message"]["content"] == "still here"


async def test_an_unanswered_question_times_out_into_its_fallback(
    make_settings: Any, fake_llm: FakeLLMServer
) -> None:
    fake_llm.enqueue(Reply("请问您的订单号是多少？"))
    settings = make_settings(
        tools_file=FIXTURE_TOOLS, ask_user_timeout_s=0.2, watchdog_interval_s=0.05
    )
    async with serve(settings) as svc:
        session_id = await new_session(svc)
        await post(svc, session_id, "我的订单到哪了")
        deadline = asyncio.get_running_loop().time() + 10
        while True:  # (the step times out, then its follow-up is written: two transactions)
            asks = [s for s in await steps_of(svc, session_id) if s["action_type"] == "ask_user"]
            url = f"/v1/sessions/{session_id}/messages"
            messages = (await svc.client.get(url)).json()["items"]
            if asks and asks[0]["status"] == "timed_out" and len(messages) == 3:
                break
            assert asyncio.get_running_loop().time() < deadline, (asks, messages)
            await asyncio.sleep(0.05)
        assert messages[-1]["role"] == "assistant"
        assert messages[-1]["metadata"]["kind"] == "ask_user_timeout"
        assert "人工客服" in messages[-1]["content"]


async def test_answering_a_question_completes_the_ask_user_step(
    svc: LiveService, fake_llm: FakeLLMServer
) -> None:
    fake_llm.enqueue(Reply("What is your order number?"), Reply("Thanks."))
    session_id = await new_session(svc)
    await post(svc, session_id, "where is my order")
    asks = [s for s in await steps_of(svc, session_id) if s["action_type"] == "ask_user"]
    assert asks[0]["status"] == "running" and asks[0]["trace"]["deadline_at"]
    second = (await post(svc, session_id, "202405201234")).json()
    asks = [s for s in await steps_of(svc, session_id) if s["action_type"] == "ask_user"]
    assert asks[0]["status"] == "succeeded"
    assert asks[0]["result"] == {"message_id": second["user_message_id"]}


async def test_retry_from_a_failed_model_step_reuses_recorded_tool_results(
    svc: LiveService, fake_llm: FakeLLMServer
) -> None:
    fake_llm.enqueue(
        ToolCalls(ToolCall("write_note", {"text": "refund approved"}, id="w1")),
        Fail(500),
        Fail(500),  # llm_retries=1: the second model call fails for good
    )
    session_id = await new_session(svc)
    failed = await post(svc, session_id, "write this down")
    assert_error(failed, 502, "llm_unavailable")
    steps = {s["key"]: s for s in await steps_of(svc, session_id)}
    assert steps["tool:w1"]["status"] == "succeeded"
    assert steps["model:1"]["status"] == "failed"
    assert steps["model:1"]["error"]["code"] == "llm_unavailable"

    fake_llm.enqueue(Reply("Your note is saved."))
    url = f"/v1/sessions/{session_id}/steps/{steps['model:1']['id']}/retry"
    events = []
    async with svc.client.stream("POST", url, headers={"Accept": "text/event-stream"}) as response:
        assert response.status_code == 200
        from app.testing import read_events

        async for event in read_events(response, until="turn.completed"):
            events.append(event)
    assert events[0].event == "turn.started"
    assert events[0].data["resumed_from_step"] == steps["model:1"]["id"]
    assert events[-1].data["turn_id"] == failed.json()["error"]["details"]["turn_id"]
    assert len(REC.side_effects) == 1  # the write was not repeated
    retried = fake_llm.requests[-1].messages
    assert retried[-1]["role"] == "tool" and retried[-1]["tool_call_id"] == "w1"
    steps = {s["key"]: s for s in await steps_of(svc, session_id)}
    assert steps["model:1"]["status"] == "succeeded" and steps["model:1"]["attempts"] == 2
    messages = (await svc.client.get(f"/v1/sessions/{session_id}/messages")).json()["items"]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant"]
    assert messages[-1]["content"] == "Your note is saved."
    # The session continues normally.
    fake_llm.enqueue(Reply("Anything else?"))
    assert (await post(svc, session_id, "thanks")).status_code == 200


async def tool_results(svc: LiveService, session_id: str) -> dict[int, Any]:
    """The session's `tool.completed` events as stored: seq -> the result they carry."""
    rows = await svc.runtime.db.fetchall(
        "SELECT seq, data FROM events WHERE session_key = (SELECT session_key FROM sessions"
        " WHERE id = ?) AND type = 'tool.completed'",
        (session_id,),
    )
    return {int(seq): json.loads(data)["result"] for seq, data in rows}


async def stored_step_result(svc: LiveService, step_id: str) -> Any:
    row = await svc.runtime.db.fetchone("SELECT result FROM steps WHERE id = ?", (step_id,))
    return json.loads(row[0])


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_a_retry_after_a_tool_call_reuses_the_result_its_event_holds(
    svc: LiveService, fake_llm: FakeLLMServer
) -> None:
    """The tool step's result is stored once, as a reference to its `tool.completed` event:
    the steps API shows it whole, before and after a retry that does not run the tool again."""
    fake_llm.enqueue(
        ToolCalls(ToolCall("write_note", {"text": "call back at 5"}, id="w1")),
        Fail(500),
        Fail(500),
    )
    session_id = await new_session(svc)
    failed = await post(svc, session_id, "note: call back at 5")
    assert_error(failed, 502, "llm_unavailable")
    steps = {s["key"]: s for s in await steps_of(svc, session_id)}
    [(seq, result)] = (await tool_results(svc, session_id)).items()
    assert result["data"] == {"note_id": "note-1", "text": "call back at 5"}
    assert await stored_step_result(svc, steps["tool:w1"]["id"]) == {"$event": seq}
    assert steps["tool:w1"]["result"] == result  # resolved by the steps API

    fake_llm.enqueue(Reply("Noted."))
    retry = f"/v1/sessions/{session_id}/steps/{steps['model:1']['id']}/retry"
    assert (await svc.client.post(retry)).status_code == 202
    deadline = asyncio.get_running_loop().time() + 10
    while steps["model:1"]["status"] != "succeeded":
        assert asyncio.get_running_loop().time() < deadline, steps
        await asyncio.sleep(0.05)
        steps = {s["key"]: s for s in await steps_of(svc, session_id)}
    assert len(REC.side_effects) == 1  # the write was not repeated
    assert list(await tool_results(svc, session_id)) == [seq]  # nor announced again
    # The resumed model call saw the tool's result the event holds.
    [seen] = [m for m in fake_llm.requests[-1].messages if m["role"] == "tool"]
    assert json.loads(seen["content"])["data"] == result["data"]
    assert steps["tool:w1"]["result"] == result and steps["tool:w1"]["attempts"] == 1


def stuck_settings(make_settings: Any) -> Any:
    return make_settings(tools_file=FIXTURE_TOOLS, step_stuck_after_s=0.3, watchdog_interval_s=0.05)


async def stuck_write(svc: LiveService) -> tuple[str, dict[str, Any]]:
    """A session whose turn ended with its `hang_write` call (id h1) stuck; and that step."""
    session_id = await new_session(svc)
    await asyncio.wait_for(stream_turn(svc.client, session_id, "save it"), 20)
    return session_id, {s["key"]: s for s in await steps_of(svc, session_id)}["tool:h1"]


async def retried(
    svc: LiveService, session_id: str, step_id: str
) -> tuple[str, dict[str, dict[str, Any]]]:
    """Retry the step and wait until the resumed turn's model answered: its id, the steps."""
    response = await svc.client.post(f"/v1/sessions/{session_id}/steps/{step_id}/retry")
    assert response.status_code == 202
    deadline = asyncio.get_running_loop().time() + 10
    while True:
        steps = {s["key"]: s for s in await steps_of(svc, session_id)}
        if steps.get("model:1", {}).get("status") == "succeeded":
            return str(response.json()["turn_id"]), steps
        assert asyncio.get_running_loop().time() < deadline, steps
        await asyncio.sleep(0.05)


async def test_retry_a_stuck_tool_step_runs_it_again_once(
    make_settings: Any, fake_llm: FakeLLMServer
) -> None:
    REC.hang = True
    fake_llm.enqueue(ToolCalls(ToolCall("hang_write", {"text": "x"}, id="h1")))
    async with serve(stuck_settings(make_settings)) as svc:
        session_id, stuck = await stuck_write(svc)
        REC.hang = False  # the downstream system is back
        fake_llm.enqueue(Reply("Saved now."))
        turn_id, steps = await retried(svc, session_id, stuck["id"])
        assert steps["tool:h1"]["status"] == "succeeded" and steps["tool:h1"]["attempts"] == 2
        assert [s["text"] for s in REC.side_effects] == ["x"]
        # The retried call's result is held by the event of its run, and read whole.
        [(seq, result)] = (await tool_results(svc, session_id)).items()
        assert await stored_step_result(svc, steps["tool:h1"]["id"]) == {"$event": seq}
        assert steps["tool:h1"]["result"] == result and result["status"] == "success"
        messages = (await svc.client.get(f"/v1/sessions/{session_id}/messages")).json()["items"]
        assert messages[-1]["content"] == "Saved now." and messages[-1]["turn_id"] == turn_id
        assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant"]


async def test_a_retried_call_runs_with_the_real_arguments_its_stored_copy_masks(
    make_settings: Any, fake_llm: FakeLLMServer
) -> None:
    """Stored tool calls are masked; the retry runs the call with what it started with (held
    in its idempotency row until it ends), under the same key, and then the row lets go."""
    REC.hang = True
    text = "call 13912345678 about card 6222021234567890123"
    fake_llm.enqueue(ToolCalls(ToolCall("hang_write", {"text": text}, id="h1")))
    async with serve(stuck_settings(make_settings)) as svc:
        session_id, stuck = await stuck_write(svc)
        assert "13912345678" not in json.dumps(stuck["input_context"])
        messages = (await svc.client.get(f"/v1/sessions/{session_id}/messages")).json()["items"]
        [stored] = next(m for m in messages if m["tool_calls"])["tool_calls"]
        masked = json.loads(stored["function"]["arguments"])["text"]
        assert masked == "call 139****5678 about card ****0123"
        [(held,)] = await svc.runtime.db.fetchall("SELECT arguments FROM tool_calls", ())
        assert json.loads(held) == {"text": text}

        REC.hang = False
        fake_llm.enqueue(Reply("Saved now."))
        await retried(svc, session_id, stuck["id"])
        assert [s["text"] for s in REC.side_effects] == [text]
        rows = await svc.runtime.db.fetchall("SELECT status, arguments FROM tool_calls", ())
        assert [tuple(r) for r in rows] == [("succeeded", None)]


async def test_retry_is_refused_when_it_makes_no_sense(
    svc: LiveService, fake_llm: FakeLLMServer
) -> None:
    fake_llm.enqueue(Reply("fine"))
    session_id = await new_session(svc)
    await post(svc, session_id, "hi")
    step = (await steps_of(svc, session_id))[0]
    url = f"/v1/sessions/{session_id}/steps/{step['id']}/retry"
    assert_error(await svc.client.post(url), 409, "step_not_retryable")
    assert_error(
        await svc.client.post(f"/v1/sessions/{session_id}/steps/stp_nope/retry"),
        404,
        "step_not_found",
    )
    other = await new_session(svc)
    assert_error(
        await svc.client.post(f"/v1/sessions/{other}/steps/{step['id']}/retry"),
        404,
        "step_not_found",
    )


async def test_approval_waits_are_steps(svc: LiveService, fake_llm: FakeLLMServer) -> None:
    fake_llm.enqueue(
        ToolCalls(
            ToolCall("notify_partner", {"to": "a@partner.example", "message": "hi"}, id="n1")
        ),
        Reply("ok"),
    )
    session_id = await new_session(svc)
    task = asyncio.create_task(post(svc, session_id, "tell them"))
    deadline = asyncio.get_running_loop().time() + 10
    while True:
        waits = [s for s in await steps_of(svc, session_id) if s["action_type"] == "wait_for_event"]
        if waits:
            break
        assert asyncio.get_running_loop().time() < deadline
        await asyncio.sleep(0.02)
    assert waits[0]["status"] == "running"
    call = next(s for s in await steps_of(svc, session_id) if s["key"] == "tool:n1")
    assert call["status"] == "queued"  # waiting for a person, not running
    approval_id = waits[0]["input_context"]["approval_id"]
    await svc.client.post(
        f"/v1/sessions/{session_id}/approvals/{approval_id}", json={"decision": "approve"}
    )
    assert (await task).status_code == 200
    steps = {s["key"]: s for s in await steps_of(svc, session_id)}
    assert steps[f"approval:{approval_id}"]["status"] == "succeeded"
    assert steps["tool:n1"]["status"] == "succeeded"


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_a_schema_is_stored_once_and_every_step_reads_it_whole(
    svc: LiveService, fake_llm: FakeLLMServer
) -> None:
    for n in (1, 2):
        fake_llm.enqueue(ToolCalls(ToolCall("flaky", {"n": n})), Reply("done"))
    session_id = await new_session(svc)
    for n in (1, 2):
        assert (await post(svc, session_id, f"check backend {n}")).status_code == 200
    steps = await steps_of(svc, session_id)
    calls = [s for s in steps if s["name"] == "flaky"]
    models = [s for s in steps if s["action_type"] == "generate_response"]
    assert len(calls) == 2 and len(models) == 4
    tool_schema = svc.runtime.registry.get("flaky").spec.output_schema  # type: ignore[union-attr]
    model_schema = models[0]["expected_output_schema"]
    assert all(s["expected_output_schema"] == tool_schema for s in calls)
    assert all(s["expected_output_schema"] == model_schema for s in models)
    assert model_schema["type"] == "object" and "tool_calls" in model_schema["properties"]
    # Stored: the tool's schema once, its two steps hold its digest.
    db = svc.runtime.db
    stored = [body for (body,) in await db.fetchall("SELECT body FROM step_schemas")]
    canonical = {json.dumps(json.loads(body), sort_keys=True) for body in stored}
    assert len(stored) == 1 and canonical == {json.dumps(tool_schema, sort_keys=True)}
    rows = await db.fetchall(
        "SELECT action_type, expected_output_schema, validation, result FROM steps"
        " WHERE session_id = ?",
        (session_id,),
    )
    digests = [json.loads(value) for action, value, _, _ in rows if action == "call_tool"]
    assert len(digests) == 2 and len(set(digests)) == 1 and len(digests[0]) == 16
    # A succeeded call's validation is implied by its schema: stored as nothing, read whole.
    assert [valid for action, _, valid, _ in rows if action == "call_tool"] == [None, None]
    assert all(s["trace"]["validation"] == {"schema": True, "valid": True} for s in calls)
    # A model step stores neither its schema (always the same) nor, when it is the usual one,
    # its validation or which models were tried: the API above had them all.
    model_rows = [row for row in rows if row[0] == "generate_response"]
    assert len(model_rows) == 4
    assert all(schema is None and valid is None for _, schema, valid, _ in model_rows)
    assert all("models" not in json.loads(result) for *_, result in model_rows)
    assert all(s["trace"]["validation"] == {"valid": True, "errors": []} for s in models)
    assert all(
        s["result"]["models"] == [{"model": s["name"], "outcome": "answered", "tries": 1}]
        for s in models
    )
