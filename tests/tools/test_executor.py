"""The executor on real parts: tools from a YAML file, a real SQLite file for idempotency and
approvals, and real handlers that record what ran."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from app.conversation.bus import EventBus
from app.llm.gateway import RequestedToolCall
from app.llm.testing import FakeLLMServer, Reply, ToolCall, ToolCalls
from app.resilience.breaker import BreakerPolicy
from app.settings import PROJECT_ROOT, ToolSettings
from app.storage.port import Database
from app.storage.session_writer import SessionWriter
from app.storage.sessions import SessionStore
from app.storage.sqlite import SqliteDatabase
from app.testing import LiveService
from app.tools.approvals import ApprovalBroker
from app.tools.context import TurnScope, idempotency_key
from app.tools.executor import ToolExecutor
from app.tools.handlers import build_runner
from app.tools.loader import load_tools, resolve_python
from app.tools.registry import ToolRegistry
from app.tools.results import ToolResult
from tests.conftest import a_turn, new_session
from tests.tools.executors import executor_on, local_guards
from tests.tools.fixture_tools import REC

HERE = Path(__file__).parent


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Recorded:
    """ToolReports that keeps what it was told."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []

    async def started(self, call: RequestedToolCall) -> None:
        self.events.append(("started", call.id, call.name))

    async def completed(self, call: RequestedToolCall, result: ToolResult) -> None:
        self.events.append(("completed", call.id, result.status))

    async def approval_requested(self, call: RequestedToolCall, approval: Any) -> None:
        return None

    async def approval_resolved(self, call: RequestedToolCall, approval: Any) -> None:
        return None


def registry_from(path: Path, http: httpx.AsyncClient | None = None) -> ToolRegistry:
    registry = ToolRegistry()
    client = http or httpx.AsyncClient()
    for spec in load_tools(path, resolve=resolve_python):
        registry.register(spec, build_runner(spec, http_client=lambda: client))
    return registry


@pytest.fixture(autouse=True)
def _reset() -> None:
    REC.reset()


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[Database]:
    database = await SqliteDatabase(
        tmp_path / "x.db", migrations_dir=PROJECT_ROOT / "migrations"
    ).open()
    yield database
    await database.close()


@pytest.fixture
async def scope(db: Database) -> TurnScope:
    session = await SessionStore(db).create("default", "u1", {})
    turn_id = await a_turn(db, "default", session.id)
    return TurnScope(
        "default", "u1", session.id, turn_id, "trace_1", writer=SessionWriter(session.id)
    )


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def executor(db: Database, clock: Clock) -> ToolExecutor:
    return executor_on(
        db,
        registry_from(HERE / "fixture_tools.yaml"),
        guards=local_guards(BreakerPolicy(5, 3, 600), clock),
        config=ToolSettings(result_max_tokens=300, max_failures_per_turn=3),
        publish=EventBus().publish,
    )


def breaker_of(executor: ToolExecutor, name: str, tenant: str = "default") -> Any:
    tool = executor.registry.get(name)
    assert tool is not None
    return executor.guards.breaker(tool.spec, tenant)


def call(name: str, args: dict[str, Any] | str, call_id: str = "c1") -> RequestedToolCall:
    text = args if isinstance(args, str) else json.dumps(args)
    return RequestedToolCall(call_id, name, text)


async def test_reads_run_together_then_writes_in_model_order(
    executor: ToolExecutor, scope: TurnScope
) -> None:
    calls = [
        call("write_note", {"text": "first"}, "w1"),
        call("slow_read", {"key": "a"}, "r1"),
        call("write_note", {"text": "second"}, "w2"),
        call("slow_read", {"key": "b"}, "r2"),
    ]
    events = Recorded()
    results = await executor.run_calls(calls, scope, events)
    assert [r.status for r in results] == ["success"] * 4
    assert results[0].data["text"] == "first" and results[1].data["key"] == "a"  # model order
    order = [(name, what) for name, what, _t in REC.log]
    starts = {name: t for name, what, t in REC.log if what == "start"}
    ends = {name: t for name, what, t in REC.log if what == "end"}
    # The two reads overlapped...
    assert (
        starts["slow_read:b"] < ends["slow_read:a"] and starts["slow_read:a"] < ends["slow_read:b"]
    )
    # ...and both writes ran after both reads, one at a time, first before second.
    assert max(ends["slow_read:a"], ends["slow_read:b"]) <= starts["write_note:first"]
    assert ends["write_note:first"] <= starts["write_note:second"]
    assert order[-4:] == [
        ("write_note:first", "start"),
        ("write_note:first", "end"),
        ("write_note:second", "start"),
        ("write_note:second", "end"),
    ]
    assert [e[0] for e in events.events].count("completed") == 4


async def test_arguments_are_checked_before_anything_runs(
    executor: ToolExecutor, scope: TurnScope
) -> None:
    tools = executor.for_turn(scope, Recorded())
    missing = await tools.run_one(call("write_note", {}))
    assert missing.error is not None and missing.error.code == "invalid_arguments"
    assert "text" in missing.error.message and "missing" in missing.error.message
    extra = await tools.run_one(call("write_note", {"text": "x", "colour": "red"}))
    assert extra.error is not None and "colour" in extra.error.message
    wrong = await tools.run_one(call("flaky", {"n": "many"}))
    assert wrong.error is not None
    assert "n: expected integer" in wrong.error.message and '"many"' in wrong.error.message
    coerced = await tools.run_one(call("flaky", {"n": "5"}))
    assert coerced.status == "success" and coerced.data["n"] == 5
    malformed = await tools.run_one(call("write_note", '{"text": "unterminated'))
    assert malformed.error is not None and malformed.error.code == "malformed_arguments"
    assert REC.side_effects == []  # none of the bad write calls ran


async def test_timeouts_open_the_breaker_then_fallback_then_half_open_recovery(
    executor: ToolExecutor, scope: TurnScope, clock: Clock
) -> None:
    breaker = breaker_of(executor, "flaky")
    REC.hang = True
    for i in range(3):  # each in its own turn: the per-turn give-up is a separate mechanism
        result = await executor.for_turn(scope, Recorded()).run_one(call("flaky", {}, f"t{i}"))
        assert result.status == "fallback"
        assert result.error is not None and result.error.code == "timeout"
    assert breaker.state == "open"
    REC.hang = False
    runs_before = len(REC.log)
    result = await executor.for_turn(scope, Recorded()).run_one(call("flaky", {}))
    assert result.status == "fallback"
    assert result.error is not None and result.error.code == "circuit_open"
    assert result.data == {
        "ok": False,
        "message": "The backend is unavailable; showing cached data.",
    }
    assert len(REC.log) == runs_before  # the handler was not touched while open
    clock.now += 601  # the cool-down passes: one probe may go through
    assert breaker.state == "half_open"
    result = await executor.for_turn(scope, Recorded()).run_one(call("flaky", {"n": 1}))
    assert result.status == "success"
    assert breaker.state == "closed"


async def test_a_failed_probe_reopens(
    executor: ToolExecutor, scope: TurnScope, clock: Clock
) -> None:
    breaker = breaker_of(executor, "flaky")
    REC.fail_with = "backend_down"
    for i in range(5):
        result = await executor.for_turn(scope, Recorded()).run_one(call("flaky", {}, f"f{i}"))
        assert result.status == "fallback"
    assert breaker.state == "open"
    clock.now += 601
    result = await executor.for_turn(scope, Recorded()).run_one(call("flaky", {}))
    assert result.status == "fallback" and result.error and result.error.code == "backend_down"
    assert breaker.state == "open"


async def test_rate_limit(executor: ToolExecutor, scope: TurnScope) -> None:
    tools = executor.for_turn(scope, Recorded())
    first = await tools.run_one(call("limited", {"n": 1}, "l1"))
    second = await tools.run_one(call("limited", {"n": 2}, "l2"))
    assert first.status == "success"
    assert second.status == "error" and second.error and second.error.code == "rate_limited"


async def test_same_key_returns_the_stored_result_without_a_second_side_effect(
    executor: ToolExecutor, scope: TurnScope
) -> None:
    first = await executor.for_turn(scope, Recorded()).run_one(call("write_note", {"text": "x"}))
    again = await executor.for_turn(scope, Recorded()).run_one(call("write_note", {"text": "x"}))
    assert first.status == again.status == "success"
    assert again.data == first.data and again.metadata.get("replayed") is True
    assert len(REC.side_effects) == 1
    other_call = await executor.for_turn(scope, Recorded()).run_one(
        call("write_note", {"text": "x"}, "c2")
    )
    assert other_call.metadata.get("replayed") is None and len(REC.side_effects) == 2
    keys = {s["key"] for s in REC.side_effects}
    assert len(keys) == 2 and all(k.startswith("idem_") for k in keys)


async def test_business_rules_reject_or_ask_for_approval(
    executor: ToolExecutor, scope: TurnScope, db: Database
) -> None:
    tools = executor.for_turn(scope, Recorded())
    refused = await tools.run_one(call("notify_partner", {"to": "x@evil.example", "message": "hi"}))
    assert refused.error is not None and refused.error.code == "business_rule"
    assert "evil.example" in refused.error.message
    assert REC.side_effects == []
    # Inside the allow-list: runs without asking.
    ok = await tools.run_one(call("notify_partner", {"to": "a@example.com", "message": "hi"}, "c2"))
    assert ok.status == "success"
    # Outside the first list but inside the second: a human decides.
    broker = executor.approvals
    assert broker is not None
    pending = asyncio.create_task(
        tools.run_one(call("notify_partner", {"to": "b@partner.example", "message": "hi"}, "c3"))
    )
    approval = await _pending_approval(broker, scope)
    assert approval.tool == "notify_partner" and "partner.example" in approval.reason
    await broker.decide(_operator(), scope.session_id, approval.id, "approve", "fine")
    result = await pending
    assert result.status == "success"
    assert [s["to"] for s in REC.side_effects] == ["a@example.com", "b@partner.example"]


async def test_rejected_and_expired_approvals(
    executor: ToolExecutor, scope: TurnScope, db: Database
) -> None:
    broker = executor.approvals
    assert broker is not None
    tools = executor.for_turn(scope, Recorded())
    pending = asyncio.create_task(
        tools.run_one(call("notify_partner", {"to": "b@partner.example", "message": "1"}, "r1"))
    )
    approval = await _pending_approval(broker, scope)
    await broker.decide(_operator(), scope.session_id, approval.id, "reject", "not today")
    result = await pending
    assert result.error is not None and result.error.code == "approval_rejected"
    assert "not today" in result.error.message
    broker.timeout_s = 0.2
    result = await tools.run_one(
        call("notify_partner", {"to": "b@partner.example", "message": "2"}, "r2")
    )
    assert result.error is not None and result.error.code == "approval_expired"
    assert REC.side_effects == []
    stored = await broker.store.list_for_session("default", scope.session_id)
    assert [a.status for a in stored] == ["rejected", "expired"]


async def test_masking_and_truncation(executor: ToolExecutor, scope: TurnScope) -> None:
    tools = executor.for_turn(scope, Recorded())
    result = await tools.run_one(call("customer_record", {"customer_id": "cust_0001"}))
    text = json.dumps(result.to_dict(), ensure_ascii=False)
    for secret in (
        "13800138000",
        "li.lei@example.com",
        "110101199003074512",
        "6222021234567890123",
        "sk-abcdefghijklmnopqrstuvwx",
    ):
        assert secret not in text
    assert result.data["phone"] == "138****8000"
    assert result.data["email"] == "l***@example.com"
    assert result.data["id_card"] == "****"  # a sensitive key: masked whole
    REC.big = True
    big = await tools.run_one(call("customer_record", {"customer_id": "cust_0001"}, "c2"))
    assert big.metadata["truncated"] is True and big.metadata["original_tokens"] > 300
    content = big.model_content()
    assert "truncated" in content and "13800138000" not in content
    assert '"call 599' in big.data  # the tail is kept as well as the head
    assert big.data.startswith('{"customer_id"')


async def test_output_schema_mismatch_is_an_error(executor: ToolExecutor, scope: TurnScope) -> None:
    result = await executor.for_turn(scope, Recorded()).run_one(call("bad_output", {}))
    assert result.status == "error" and result.error and result.error.code == "invalid_output"
    assert "answer" in (result.error.hint or "")


async def test_a_tool_failing_three_times_in_a_turn_is_given_up(
    executor: ToolExecutor, scope: TurnScope
) -> None:
    tools = executor.for_turn(scope, Recorded())
    REC.fail_with = "backend_down"
    results = [await tools.run_one(call("flaky", {}, f"g{i}")) for i in range(3)]
    assert [r.status for r in results] == ["fallback"] * 3
    assert "Do not call it again" in (results[2].error.hint or "")  # type: ignore[union-attr]
    runs = len(REC.log)
    fourth = await tools.run_one(call("flaky", {}, "g4"))
    assert fourth.error is not None and fourth.error.code == "tool_gave_up"
    assert len(REC.log) == runs and "flaky" in tools.given_up


async def test_unknown_tool(executor: ToolExecutor, scope: TurnScope) -> None:
    result = await executor.for_turn(scope, Recorded()).run_one(call("nope", {}))
    assert result.error is not None and result.error.code == "unknown_tool"
    assert "slow_read" in (result.error.hint or "")


async def test_http_tool_against_a_local_server(
    db: Database, scope: TurnScope, tmp_path: Path
) -> None:
    seen: list[dict[str, Any]] = []

    async def order(request: Request) -> JSONResponse:
        seen.append(
            {
                "path": request.url.path,
                "query": dict(request.query_params),
                "test": request.headers.get("x-test"),
                "idem": request.headers.get("idempotency-key"),
            }
        )
        order_id = request.path_params["order_id"]
        if order_id == "500000000000":
            return JSONResponse({"error": "boom"}, status_code=500)
        if order_id == "404000000000":
            return JSONResponse({"error": "no such order"}, status_code=404)
        return JSONResponse({"order_id": order_id, "status": "shipped"})

    app = Starlette(routes=[Route("/orders/{order_id}", order)])
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
    task = asyncio.create_task(server.serve())
    while not server.started:  # noqa: ASYNC110
        await asyncio.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    yaml_text = (
        (HERE / "fixture_tools.yaml").read_text().replace("127.0.0.1:1/", f"127.0.0.1:{port}/")
    )
    (tmp_path / "tools.yaml").write_text(yaml_text)
    try:
        async with httpx.AsyncClient() as client:
            executor = executor_on(db, registry_from(tmp_path / "tools.yaml", client))
            tools = executor.for_turn(scope, Recorded())
            ok = await tools.run_one(
                call("lookup_http", {"order_id": "202405201234", "verbose": True})
            )
            assert ok.status == "success" and ok.data == {
                "order_id": "202405201234",
                "status": "shipped",
            }
            assert seen[0]["path"] == "/orders/202405201234"
            assert seen[0]["query"] == {"verbose": "true"} and seen[0]["test"] == "yes"
            assert seen[0]["idem"].startswith("idem_")
            down = await tools.run_one(call("lookup_http", {"order_id": "500000000000"}, "c2"))
            assert down.error is not None and down.error.code == "upstream_error"
            missing = await tools.run_one(call("lookup_http", {"order_id": "404000000000"}, "c3"))
            assert missing.error is not None and missing.error.code == "upstream_rejected"
            assert breaker_of(executor, "lookup_http").snapshot()["consecutive_failures"] == 0
    finally:
        server.should_exit = True
        await task


def _operator() -> Any:
    from app.principal import Principal

    return Principal("default", "operator", "op1")


async def _pending_approval(broker: ApprovalBroker, scope: TurnScope) -> Any:
    deadline = asyncio.get_running_loop().time() + 5
    while True:
        pending = await broker.store.list_for_session("default", scope.session_id, "pending")
        if pending:
            return pending[0]
        assert asyncio.get_running_loop().time() < deadline, "no approval was requested"
        await asyncio.sleep(0.01)


# -- repeated tool-call ids, through HTTP and the fake model server -----------------------------


async def _note_turn(svc: LiveService, content: str) -> dict[str, Any]:
    session_id = await new_session(svc)
    response = await svc.client.post(
        f"/v1/sessions/{session_id}/messages", json={"content": content}
    )
    assert response.status_code == 200, response.text
    return dict(response.json())


def _tool_messages(request_messages: list[dict[str, Any]]) -> list[tuple[str, Any]]:
    return [
        (m["tool_call_id"], json.loads(m["content"])["data"])
        for m in request_messages
        if m["role"] == "tool"
    ]


async def test_two_calls_sharing_an_id_in_one_response_each_run_with_their_own_result(
    tools_service: LiveService, fake_llm: FakeLLMServer
) -> None:
    fake_llm.enqueue(
        ToolCalls(
            ToolCall("write_note", {"text": "call back at 5"}, id="dup"),
            ToolCall("write_note", {"text": "send the invoice"}, id="dup"),
        ),
        Reply("Both noted."),
    )
    body = await _note_turn(tools_service, "note two things")
    assert body["message"]["content"] == "Both noted."
    assert [s["text"] for s in REC.side_effects] == ["call back at 5", "send the invoice"]
    assert len({s["key"] for s in REC.side_effects}) == 2
    # The model is answered per call, under distinct ids matching its (renamed) calls.
    second = fake_llm.requests[1].messages
    [assistant] = [m for m in second if m["role"] == "assistant"]
    ids = [c["id"] for c in assistant["tool_calls"]]
    assert ids[0] == "dup" and len(set(ids)) == 2
    results = _tool_messages(second)
    assert [call_id for call_id, _ in results] == ids
    assert [data["text"] for _, data in results] == ["call back at 5", "send the invoice"]


async def test_an_id_reused_for_a_different_call_in_a_later_round_runs_that_call(
    tools_service: LiveService, fake_llm: FakeLLMServer
) -> None:
    fake_llm.enqueue(
        ToolCalls(ToolCall("write_note", {"text": "call back at 5"}, id="c1")),
        ToolCalls(ToolCall("write_note", {"text": "send the invoice"}, id="c1")),
        # The same call (id, tool and arguments) again: a replay, not a second note.
        ToolCalls(ToolCall("write_note", {"text": "send the invoice"}, id="c1")),
        Reply("Noted."),
    )
    body = await _note_turn(tools_service, "note two things")
    assert body["message"]["content"] == "Noted."
    assert [s["text"] for s in REC.side_effects] == ["call back at 5", "send the invoice"]
    last = _tool_messages(fake_llm.requests[3].messages)
    assert [data["text"] for _, data in last] == [
        "call back at 5",
        "send the invoice",
        "send the invoice",
    ]
    assert [data["note_id"] for _, data in last] == ["note-1", "note-2", "note-2"]


def test_the_idempotency_key_follows_the_arguments() -> None:
    scope = TurnScope("default", "u1", "ses_1", "trn_1", writer=SessionWriter("ses_1"))
    key = idempotency_key(scope, "c1", "write_note", {"text": "a", "n": 1})
    assert key == idempotency_key(scope, "c1", "write_note", {"n": 1, "text": "a"})  # canonical
    assert key != idempotency_key(scope, "c1", "write_note", {"text": "b", "n": 1})
    assert key != idempotency_key(scope, "c2", "write_note", {"text": "a", "n": 1})
    assert key != idempotency_key(scope, "c1", "other_tool", {"text": "a", "n": 1})


async def test_an_approved_call_says_so_in_what_the_model_reads(
    executor: ToolExecutor, scope: TurnScope
) -> None:
    tools = executor.for_turn(scope, Recorded())
    plain = await tools.run_one(call("notify_partner", {"to": "a@example.com", "message": "hi"}))
    assert "approval" not in json.loads(plain.model_content())
    broker = executor.approvals
    assert broker is not None
    pending = asyncio.create_task(
        tools.run_one(call("notify_partner", {"to": "b@partner.example", "message": "hi"}, "c2"))
    )
    approval = await _pending_approval(broker, scope)
    await broker.decide(_operator(), scope.session_id, approval.id, "approve", None)
    result = await pending
    assert (
        result.metadata["approval"] == "approved" and result.metadata["approval_id"] == approval.id
    )
    assert json.loads(result.model_content())["approval"] == "approved"
