"""A turn over HTTP against the real fake-LLM server: JSON and SSE, tools, idempotency,
busy policies, failures and fallbacks."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from app.conversation.loop import MAX_ROUNDS_REPLY
from app.llm.testing import BreakStream, Fail, FakeLLMServer, Hang, Reply, ToolCall, ToolCalls
from app.principal import LOCAL
from app.settings import Settings
from app.storage.session_writer import SessionWriter
from app.storage.sessions import SessionStore
from app.storage.turns import TurnStore
from app.testing import LiveService, serve, stream_turn
from tests.api.test_sessions import assert_error
from tests.conftest import new_session
from tests.llm import paths
from tests.llm.paths import BOTH_PATHS

# Settings on the path a test is parametrized with (the default path otherwise).
model_api = paths.model_api
make_settings = paths.settings_on_path


async def post(svc: LiveService, session_id: str, content: str, **extra: Any) -> Any:
    return await svc.client.post(
        f"/v1/sessions/{session_id}/messages", json={"content": content, **extra}
    )


async def test_json_turn_returns_the_final_message(
    service: LiveService, fake_llm: FakeLLMServer
) -> None:
    fake_llm.enqueue(Reply("您好，有什么可以帮您？"))
    session_id = await new_session(service)
    response = await post(service, session_id, "你好")
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["status"] == "completed"
    assert body["message"]["role"] == "assistant"
    assert body["message"]["content"] == "您好，有什么可以帮您？"
    assert body["model"] == "test-model"
    request = fake_llm.requests[-1]
    assert request.messages[0]["role"] == "system"
    assert request.messages[-1] == {"role": "user", "content": "你好"}
    listed = (await service.client.get(f"/v1/sessions/{session_id}/messages")).json()["items"]
    assert [(m["role"], m["content"]) for m in listed] == [
        ("user", "你好"),
        ("assistant", "您好，有什么可以帮您？"),
    ]


async def test_sse_turn_streams_typed_events(service: LiveService, fake_llm: FakeLLMServer) -> None:
    fake_llm.enqueue(
        ToolCalls(ToolCall("get_current_time", {"timezone": "UTC"}, id="call_1")),
        Reply("It is Sunday today.", chunks=4),
    )
    session_id = await new_session(service)
    everything = await stream_turn(service.client, session_id, "what day is it?")
    steps = [e.data for e in everything if e.event == "step.updated"]
    assert [(s["key"], s["status"]) for s in steps] == [
        ("model:0", "running"),
        ("model:0", "succeeded"),
        ("tool:call_1", "queued"),
        ("tool:call_1", "running"),
        ("tool:call_1", "succeeded"),
        ("model:1", "running"),
        ("model:1", "succeeded"),
    ]
    events = [e for e in everything if e.event != "step.updated"]
    types = [e.event for e in events]
    assert types[0] == "turn.started"
    assert types[1] == "intent.classified"
    assert {"intent", "confidence", "ranking", "slots", "turn_id"} <= set(events[1].data)
    assert types[2:4] == ["tool.started", "tool.completed"]
    # Four pieces streamed at once: the first goes out at once, the other three as one event.
    assert types.count("message.delta") == 2
    assert types[-2:] == ["message.completed", "turn.completed"]
    ids = [int(e.id) for e in everything if e.id is not None]
    assert ids == list(range(ids[0], ids[0] + len(everything)))
    turn_id = events[0].data["turn_id"]
    assert all(e.data["turn_id"] == turn_id for e in events)
    deltas = [e.data for e in events if e.event == "message.delta"]
    assert set(deltas[0]) == {"turn_id", "text"}
    assert "".join(d["text"] for d in deltas) == "It is Sunday today."
    started, completed = events[2].data, events[3].data
    assert started["call_id"] == completed["call_id"] == "call_1"
    assert started["tool"] == completed["tool"] == "get_current_time"
    assert started["status"] == "running" and completed["status"] == "success"
    assert events[-2].data["text"] == "It is Sunday today."
    # The second model call saw the tool result, tied to its call id.
    second = fake_llm.requests[-1].messages
    assert second[-2]["tool_calls"][0]["id"] == "call_1"
    assert second[-1]["role"] == "tool" and second[-1]["tool_call_id"] == "call_1"
    assert json.loads(second[-1]["content"])["status"] == "success"


@BOTH_PATHS
async def test_malformed_tool_arguments_go_back_to_the_model(
    service: LiveService, fake_llm: FakeLLMServer
) -> None:
    fake_llm.enqueue(
        ToolCalls(ToolCall("get_current_time", '{"timezone": "UTC"', id="c1")),
        ToolCalls(ToolCall("get_current_time", {"timezone": 42, "extra": 1}, id="c2")),
        Reply("done"),
    )
    session_id = await new_session(service)
    response = await post(service, session_id, "time?")
    assert response.json()["message"]["content"] == "done"
    first_result = json.loads(fake_llm.requests[1].messages[-1]["content"])
    assert first_result["error"]["code"] == "malformed_arguments"
    assert "JSON" in first_result["error"]["message"]
    second_result = json.loads(fake_llm.requests[2].messages[-1]["content"])
    assert second_result["error"]["code"] == "invalid_arguments"
    assert "extra" in second_result["error"]["message"]
    assert "timezone" in second_result["error"]["message"]


async def test_unknown_tool_is_reported_not_crashed(
    service: LiveService, fake_llm: FakeLLMServer
) -> None:
    fake_llm.enqueue(ToolCalls(ToolCall("launch_rockets", {})), Reply("sorry"))
    session_id = await new_session(service)
    assert (await post(service, session_id, "go")).json()["message"]["content"] == "sorry"
    result = json.loads(fake_llm.requests[1].messages[-1]["content"])
    assert result["error"]["code"] == "unknown_tool"
    assert "get_current_time" in result["error"]["hint"]


async def test_max_tool_rounds_ends_gracefully(make_settings: Any, fake_llm: FakeLLMServer) -> None:
    fake_llm.enqueue(*[ToolCalls(ToolCall("get_current_time", {})) for _ in range(5)])
    async with serve(make_settings(max_tool_rounds=3)) as svc:
        session_id = await new_session(svc)
        body = (await post(svc, session_id, "loop forever")).json()
    assert body["status"] == "completed"
    assert body["rounds"] == 3
    assert body["message"]["content"] == MAX_ROUNDS_REPLY["en"]
    assert len(fake_llm.requests) == 3


async def test_retry_with_client_message_id_runs_nothing_twice(
    service: LiveService, fake_llm: FakeLLMServer
) -> None:
    fake_llm.enqueue(Reply("first and only"))
    session_id = await new_session(service)
    first = await post(service, session_id, "hello", client_message_id="cm-1")
    again = await post(service, session_id, "hello", client_message_id="cm-1")
    assert first.status_code == again.status_code == 200
    assert again.headers.get("idempotent-replayed") == "true"
    assert first.json()["turn_id"] == again.json()["turn_id"]
    assert again.json()["message"]["content"] == "first and only"
    streamed = await stream_turn(service.client, session_id, "hello", client_message_id="cm-1")
    assert streamed[0].event == "turn.started" and streamed[-1].event == "turn.completed"
    assert streamed[-1].data["turn_id"] == first.json()["turn_id"]
    assert len(fake_llm.requests) == 1
    messages = (await service.client.get(f"/v1/sessions/{session_id}/messages")).json()["items"]
    assert len(messages) == 2


async def test_a_replayed_message_of_an_interrupted_turn_resumes_it(
    settings: Settings, open_db: Any, fake_llm: FakeLLMServer
) -> None:
    # A process claimed the turn and stopped (or its database went away for longer than the
    # turn's time) before anything of it ran: the service ends it `interrupted` at start-up,
    # with a failed step to resume from, though none was open.
    db = await open_db("hermes.db")
    session = await SessionStore(db).create(LOCAL.tenant_id, "u1", {})
    accepted = await TurnStore(db).accept(
        SessionWriter(session.id),
        tenant_id=LOCAL.tenant_id,
        session_id=session.id,
        content="hello",
        token_estimate=1,
        client_message_id="cm-1",
        policy="reject",
        max_queued=10,
    )
    assert (
        accepted is not None
        and await TurnStore(db).claim_next(SessionWriter(session.id), session.id) is not None
    )
    await db.close()
    fake_llm.enqueue(Reply("the answer after all"))
    async with serve(settings) as svc:
        turn_id = accepted.turn.id

        async def interrupted() -> bool:
            turn = await svc.runtime.conversation.turns.get(session.id, turn_id)
            return turn is not None and turn.error_code == "interrupted"

        deadline = asyncio.get_running_loop().time() + 20
        while not await interrupted():  # (PostgreSQL: the lease sweep ends it, not start-up)
            assert asyncio.get_running_loop().time() < deadline
            await asyncio.sleep(0.02)
        steps = (await svc.client.get(f"/v1/sessions/{session.id}/steps")).json()["items"]
        assert [(s["action_type"], s["status"]) for s in steps] == [("generate_response", "failed")]

        # The customer's frontend sends the message again: the turn resumes, the reply comes.
        again = await post(svc, session.id, "hello", client_message_id="cm-1")
        assert again.status_code == 200, again.text
        assert again.json()["turn_id"] == turn_id
        assert again.json()["message"]["content"] == "the answer after all"
        assert again.headers.get("idempotent-replayed") == "true"
        steps = (await svc.client.get(f"/v1/sessions/{session.id}/steps")).json()["items"]
        assert [(s["action_type"], s["status"]) for s in steps] == [
            ("generate_response", "succeeded")
        ]
        # Once it has an answer, a replay is answered with it (nothing runs again).
        replayed = await post(svc, session.id, "hello", client_message_id="cm-1")
        assert replayed.json()["message"]["content"] == "the answer after all"
        assert len(fake_llm.requests) == 1


async def test_retry_while_the_turn_is_still_running(
    service: LiveService, fake_llm: FakeLLMServer
) -> None:
    fake_llm.enqueue(Reply("slow answer", delay=0.5))
    session_id = await new_session(service)
    first, again = await asyncio.gather(
        post(service, session_id, "hi", client_message_id="cm-x"),
        post(service, session_id, "hi", client_message_id="cm-x"),
    )
    assert first.json()["turn_id"] == again.json()["turn_id"]
    assert first.json()["message"]["content"] == again.json()["message"]["content"] == "slow answer"
    assert len(fake_llm.requests) == 1


async def test_busy_session_rejects_with_409(service: LiveService, fake_llm: FakeLLMServer) -> None:
    fake_llm.enqueue(Reply("slow", delay=0.6))
    session_id = await new_session(service)
    first = asyncio.create_task(post(service, session_id, "one"))
    await _wait_for_llm_requests(fake_llm, 1)
    err = assert_error(await post(service, session_id, "two"), 409, "session_busy")
    assert err["details"]["session_id"] == session_id
    assert (await first).status_code == 200
    fake_llm.enqueue(Reply("free again"))
    assert (await post(service, session_id, "three")).json()["message"]["content"] == "free again"


async def test_enqueue_policy_runs_turns_in_order(
    make_settings: Any, fake_llm: FakeLLMServer
) -> None:
    fake_llm.enqueue(Reply("a1", delay=0.3), Reply("a2"), Reply("a3"))
    async with serve(make_settings(busy_policy="enqueue")) as svc:
        session_id = await new_session(svc)
        first = asyncio.create_task(post(svc, session_id, "q1"))
        await _wait_for_llm_requests(fake_llm, 1)
        second = asyncio.create_task(post(svc, session_id, "q2"))
        await _wait_for_turns(svc, session_id, 2)  # q2 accepted before q3 is sent
        third = asyncio.create_task(post(svc, session_id, "q3"))
        results = [await t for t in (first, second, third)]
        assert [r.json()["message"]["content"] for r in results] == ["a1", "a2", "a3"]
        messages = (await svc.client.get(f"/v1/sessions/{session_id}/messages")).json()["items"]
    assert [m["content"] for m in messages] == ["q1", "a1", "q2", "a2", "q3", "a3"]
    # The second turn's context holds the first turn's answer, not the third question.
    second_context = [m.get("content") for m in fake_llm.requests[1].messages]
    assert second_context[-3:] == ["q1", "a1", "q2"]


@BOTH_PATHS
async def test_llm_failure_fails_the_turn_and_the_session_survives(
    service: LiveService, fake_llm: FakeLLMServer
) -> None:
    fake_llm.enqueue(Fail(500), Fail(500))  # llm_retries=1: two attempts, both fail
    session_id = await new_session(service)
    events = await stream_turn(service.client, session_id, "hello?")
    assert events[-1].event == "turn.failed"
    assert events[-1].data["code"] == "llm_unavailable"
    fake_llm.enqueue(Fail(500), Fail(500))
    err = assert_error(await post(service, session_id, "again?"), 502, "llm_unavailable")
    assert err["details"]["turn_id"]
    fake_llm.enqueue(Reply("back online"))
    assert (await post(service, session_id, "now?")).json()["message"]["content"] == "back online"


@BOTH_PATHS
async def test_retries_then_fallback_model(make_settings: Any, fake_llm: FakeLLMServer) -> None:
    fake_llm.enqueue(
        Fail(429, headers={"retry-after": "0"}), Reply("after a retry"), model="test-model"
    )
    async with serve(make_settings(fallback_models=["openai/backup-model"])) as svc:
        session_id = await new_session(svc)
        body = (await post(svc, session_id, "one")).json()
        assert body["message"]["content"] == "after a retry"
        fake_llm.enqueue(Fail(500), Fail(500), Fail(500), model="test-model")
        fake_llm.enqueue(Reply("from the backup"), model="backup-model")
        body = (await post(svc, session_id, "two")).json()
    assert body["message"]["content"] == "from the backup"
    assert body["model"] == "backup-model"


@BOTH_PATHS
async def test_hung_model_times_out(make_settings: Any, fake_llm: FakeLLMServer) -> None:
    fake_llm.enqueue(Hang(30), Hang(30))
    async with serve(make_settings(llm_timeout_s=0.5, llm_retries=0)) as svc:
        session_id = await new_session(svc)
        events = await stream_turn(svc.client, session_id, "anyone there?")
    assert events[-1].event == "turn.failed"
    assert events[-1].data["code"] == "llm_timeout"


@BOTH_PATHS
async def test_broken_stream_fails_cleanly(service: LiveService, fake_llm: FakeLLMServer) -> None:
    fake_llm.enqueue(BreakStream("half an ans"))
    session_id = await new_session(service)
    events = await stream_turn(service.client, session_id, "tell me")
    assert events[-1].event == "turn.failed"
    assert events[-1].data["code"] == "llm_stream_interrupted"
    fake_llm.enqueue(Reply("whole answer"))
    assert (await post(service, session_id, "again")).json()["message"]["content"] == "whole answer"


async def test_turn_timeout(make_settings: Any, fake_llm: FakeLLMServer) -> None:
    fake_llm.enqueue(Reply("too late", delay=5))
    async with serve(make_settings(turn_timeout_s=0.3)) as svc:
        session_id = await new_session(svc)
        err = assert_error(await post(svc, session_id, "quick!"), 504, "turn_timeout")
        assert err["details"]["session_id"] == session_id


async def _wait_for_llm_requests(fake_llm: FakeLLMServer, count: int) -> None:
    deadline = asyncio.get_running_loop().time() + 10
    while len(fake_llm.requests) < count:
        assert asyncio.get_running_loop().time() < deadline, "the model was never called"
        await asyncio.sleep(0.01)


async def _wait_for_turns(svc: LiveService, session_id: str, count: int) -> None:
    deadline = asyncio.get_running_loop().time() + 10
    while (await svc.client.get(f"/v1/sessions/{session_id}")).json()["turn_count"] < count:
        assert asyncio.get_running_loop().time() < deadline, "the message was never accepted"
        await asyncio.sleep(0.01)


async def test_deleting_a_session_while_its_turn_runs(
    service: LiveService, fake_llm: FakeLLMServer
) -> None:
    fake_llm.enqueue(Reply("never delivered", delay=5))
    session_id = await new_session(service)
    pending = asyncio.create_task(post(service, session_id, "long question"))
    await _wait_for_llm_requests(fake_llm, 1)
    assert (await service.client.delete(f"/v1/sessions/{session_id}")).status_code == 204
    response = await asyncio.wait_for(pending, 10)  # the waiting request ends, it does not hang
    assert response.status_code in (404, 410)
    assert response.json()["error"]["code"] in {"session_deleted", "turn_not_found"}
    assert_error(await service.client.get(f"/v1/sessions/{session_id}"), 404, "session_not_found")
    assert service.runtime.manager.active_sessions() == 0
