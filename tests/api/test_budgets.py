"""Budgets and limits over HTTP, on both storage engines, with usage as the fake model server
reports it: token and cost caps per turn, per session and per tenant per day, the turn rate per
key (shared through Redis) and the open-stream cap per key."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import re
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.llm.testing import FakeLLMServer, Reply, ToolCall, ToolCalls
from app.runtime import REDIS_DEGRADED
from app.storage.usage import seconds_to_next_day
from app.testing import LiveService, read_events, serve, stream_turn
from tests.api.test_health import health_until
from tests.api.test_sessions import assert_error
from tests.redis_util import REDIS_URL, RedisServer, redis_prefix  # noqa: F401 (a fixture)

AGENT_A = "acme-agent-key-0001"
AGENT_A2 = "acme-agent-key-0002"
AGENT_B = "zeta-agent-key-0001"
DEFAULT_STREAM_CAP = 16  # HERMES_MAX_STREAMS_PER_PRINCIPAL's default (README)
KEYS = [f"acme:agent:{AGENT_A}", f"acme:agent:{AGENT_A2}", f"zeta:agent:{AGENT_B}"]


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


async def session(svc: LiveService, key: str = AGENT_A) -> str:
    response = await svc.client.post("/v1/sessions", json={"user_id": "u1"}, headers=auth(key))
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


async def post(svc: LiveService, session_id: str, content: str, key: str = AGENT_A) -> Any:
    return await svc.client.post(
        f"/v1/sessions/{session_id}/messages", json={"content": content}, headers=auth(key)
    )


async def refusals(svc: LiveService) -> dict[str, float]:
    scraped = await svc.client.get("/metrics", headers=auth(AGENT_A))
    assert scraped.status_code == 200, scraped.text
    text = scraped.text
    found = re.findall(r'^hermes_budget_refusals_total\{kind="(\w+)"\} (\S+)$', text, re.M)
    return {kind: float(value) for kind, value in found}


def moved(before: dict[str, float], after: dict[str, float], kind: str) -> float:
    return after.get(kind, 0.0) - before.get(kind, 0.0)


@pytest.fixture
def budget_settings(make_settings: Any) -> Any:
    def make(**overrides: Any) -> Any:
        return make_settings(auth="api_key", api_keys=KEYS, **overrides)

    return make


@pytest.fixture
async def usage_rows() -> Any:
    async def rows(svc: LiveService, tenant: str) -> list[tuple[Any, ...]]:
        found = await svc.runtime.db.fetchall(
            "SELECT tokens, cost, turns FROM tenant_usage WHERE tenant_id = ?", (tenant,)
        )
        return [tuple(r) for r in found]

    return rows


async def test_a_turn_over_its_token_cap_ends_after_the_round_that_crossed_it(
    budget_settings: Any, fake_llm: FakeLLMServer, usage_rows: Any
) -> None:
    async with serve(budget_settings(budget_turn_tokens=40)) as svc:
        session_id = await session(svc)
        fake_llm.enqueue(
            ToolCalls(ToolCall("get_current_time", {"timezone": "UTC"}), usage=(30, 15))
        )
        svc.client.headers.update(auth(AGENT_A))
        before = await refusals(svc)
        events = await stream_turn(svc.client, session_id, "what time is it?")
        failed = events[-1]
        assert failed.event == "turn.failed"
        assert failed.data["code"] == "budget_exceeded"
        assert "turn tokens" in failed.data["message"]
        # The round that crossed the cap was the last: no tool ran, no second model call.
        assert len(fake_llm.requests) == 1
        assert not [e for e in events if e.event == "tool.started"]
        assert moved(before, await refusals(svc), "turn_tokens") == 1
        # What it used is counted, with the failed turn's end.
        assert await usage_rows(svc, "acme") == [(45, 0.0, 1)]
        # A turn within the cap runs; waiting for one over it answers 429.
        fake_llm.enqueue(Reply("ok", usage=(10, 5)))
        assert (await post(svc, session_id, "hi")).status_code == 200
        fake_llm.enqueue(Reply("too long", usage=(30, 20)))
        answer = await post(svc, session_id, "hi again")
        # A final reply over the cap is kept: its tokens are spent, nothing more is asked.
        assert answer.status_code == 200
        fake_llm.enqueue(
            ToolCalls(ToolCall("get_current_time", {"timezone": "UTC"}), usage=(40, 1))
        )
        answer = await post(svc, session_id, "time?")
        assert_error(answer, 429, "budget_exceeded")
        assert "turn_id" in answer.json()["error"]["details"]


async def test_a_session_over_its_cap_is_refused_before_any_model_call(
    budget_settings: Any, fake_llm: FakeLLMServer
) -> None:
    async with serve(budget_settings(budget_session_tokens=20)) as svc:
        session_id = await session(svc)
        fake_llm.enqueue(Reply("first", usage=(15, 10)))
        assert (await post(svc, session_id, "hello")).status_code == 200
        asked = len(fake_llm.requests)
        before = await refusals(svc)
        refused = await post(svc, session_id, "and again")
        assert_error(refused, 429, "budget_exceeded")
        details = refused.json()["error"]["details"]
        assert details["kind"] == "session_tokens" and details["used"] == 25
        assert details["limit"] == 20
        assert "Retry-After" not in refused.headers  # a session's cap never starts again
        assert len(fake_llm.requests) == asked
        assert moved(before, await refusals(svc), "session_tokens") == 1
        # No turn was recorded for the refused message.
        messages = (
            await svc.client.get(f"/v1/sessions/{session_id}/messages", headers=auth(AGENT_A))
        ).json()["items"]
        assert [m["content"] for m in messages if m["role"] == "user"] == ["hello"]
        # Another session of the tenant has a cap of its own.
        other = await session(svc)
        fake_llm.enqueue(Reply("fine"))
        assert (await post(svc, other, "hello")).status_code == 200
        # A session of another tenant is a 404, not a 429: existence does not leak.
        assert_error(await post(svc, session_id, "x", key=AGENT_B), 404, "session_not_found")


async def test_a_tenant_daily_cap_is_shared_by_its_sessions(
    budget_settings: Any, fake_llm: FakeLLMServer, usage_rows: Any
) -> None:
    async with serve(budget_settings(budget_tenant_daily_tokens=30)) as svc:
        first, second = await session(svc), await session(svc, AGENT_A2)
        fake_llm.enqueue(Reply("one", usage=(15, 10)), Reply("two", usage=(10, 10)))
        assert (await post(svc, first, "hello")).status_code == 200
        assert (await post(svc, second, "hello", key=AGENT_A2)).status_code == 200
        assert await usage_rows(svc, "acme") == [(45, 0.0, 2)]
        before = await refusals(svc)
        asked = len(fake_llm.requests)
        for session_id, key in ((first, AGENT_A), (second, AGENT_A2)):
            refused = await post(svc, session_id, "more", key=key)
            assert_error(refused, 429, "budget_exceeded")
            assert refused.json()["error"]["details"]["kind"] == "tenant_tokens"
            retry_after = int(refused.headers["Retry-After"])
            assert abs(retry_after - seconds_to_next_day(time.time())) < 5
        assert len(fake_llm.requests) == asked
        assert moved(before, await refusals(svc), "tenant_tokens") == 2
        # Another tenant's day is its own.
        other = await session(svc, AGENT_B)
        fake_llm.enqueue(Reply("hi"))
        assert (await post(svc, other, "hello", key=AGENT_B)).status_code == 200


async def test_a_running_turn_stops_at_the_tenant_cap_between_rounds(
    budget_settings: Any, fake_llm: FakeLLMServer
) -> None:
    async with serve(budget_settings(budget_tenant_daily_tokens=100)) as svc:
        session_id = await session(svc)
        fake_llm.enqueue(Reply("warm-up", usage=(50, 20)))
        assert (await post(svc, session_id, "hello")).status_code == 200
        fake_llm.enqueue(
            ToolCalls(ToolCall("get_current_time", {"timezone": "UTC"}), usage=(20, 10))
        )
        asked = len(fake_llm.requests)
        answer = await post(svc, session_id, "time?")
        assert_error(answer, 429, "budget_exceeded")
        assert len(fake_llm.requests) == asked + 1


async def test_cost_caps_use_the_configured_price(
    budget_settings: Any, fake_llm: FakeLLMServer, usage_rows: Any
) -> None:
    # 1000 and 2000 per million tokens: 0.001 per prompt token, 0.002 per completion token.
    prices = ["openai/test-model=1000/2000"]
    settings = budget_settings(model_prices=prices, budget_turn_cost=0.25, budget_session_cost=0.3)
    async with serve(settings) as svc:
        session_id = await session(svc)
        fake_llm.enqueue(
            ToolCalls(ToolCall("get_current_time", {"timezone": "UTC"}), usage=(100, 50)),
            Reply("the time", usage=(20, 10)),
        )
        # 0.2, then 0.04: under the turn's cap of 0.25.
        assert (await post(svc, session_id, "time?")).status_code == 200
        [(tokens, cost, turns)] = await usage_rows(svc, "acme")
        assert (tokens, turns) == (180, 1) and cost == pytest.approx(0.24)
        fake_llm.enqueue(
            ToolCalls(ToolCall("get_current_time", {"timezone": "UTC"}), usage=(200, 50))
        )
        svc.client.headers.update(auth(AGENT_A))
        events = await stream_turn(svc.client, session_id, "again")
        assert events[-1].event == "turn.failed"
        assert events[-1].data["code"] == "budget_exceeded"
        assert "turn cost" in events[-1].data["message"]
        refused = await post(svc, session_id, "once more")
        assert_error(refused, 429, "budget_exceeded")
        details = refused.json()["error"]["details"]
        assert details["kind"] == "session_cost" and details["used"] == pytest.approx(0.54)


async def test_the_turn_rate_per_key_answers_429_with_retry_after(
    budget_settings: Any, fake_llm: FakeLLMServer
) -> None:
    async with serve(budget_settings(turn_rate_per_minute=2)) as svc:
        session_id = await session(svc)
        fake_llm.enqueue(Reply("a"), Reply("b"), Reply("c"))
        for text in ("one", "two"):
            assert (await post(svc, session_id, text)).status_code == 200
        before = await refusals(svc)
        refused = await post(svc, session_id, "three")
        assert_error(refused, 429, "rate_limited")
        assert 1 <= int(refused.headers["Retry-After"]) <= 60
        assert moved(before, await refusals(svc), "turn_rate") == 1
        # Per key: another key of the same tenant has its own.
        other = await session(svc, AGENT_A2)
        assert (await post(svc, other, "hello", key=AGENT_A2)).status_code == 200


async def test_a_retried_message_is_answered_not_refused(
    budget_settings: Any, fake_llm: FakeLLMServer
) -> None:
    async with serve(budget_settings(turn_rate_per_minute=1)) as svc:
        session_id = await session(svc)
        fake_llm.enqueue(Reply("once"))
        body = {"content": "hello", "client_message_id": "m-1"}
        url = f"/v1/sessions/{session_id}/messages"
        first = await svc.client.post(url, json=body, headers=auth(AGENT_A))
        assert first.status_code == 200
        again = await svc.client.post(url, json=body, headers=auth(AGENT_A))
        assert again.status_code == 200 and again.headers["Idempotent-Replayed"] == "true"
        assert again.json()["turn_id"] == first.json()["turn_id"]


async def test_the_turn_rate_is_shared_between_processes_through_redis(
    budget_settings: Any,
    fake_llm: FakeLLMServer,
    redis_prefix: str,  # noqa: F811
) -> None:
    settings = budget_settings(
        turn_rate_per_minute=2,
        budget_tenant_daily_tokens=40,
        redis_url=REDIS_URL,
        redis_prefix=redis_prefix,
    )
    async with serve(settings) as a, serve(settings) as b:
        first, second = await session(a), await session(b)
        fake_llm.enqueue(Reply("a", usage=(10, 5)), Reply("b", usage=(10, 5)))
        assert (await post(a, first, "one")).status_code == 200
        assert (await post(b, second, "two")).status_code == 200
        assert_error(await post(a, first, "three"), 429, "rate_limited")
        # The tenant's day is counted in the database both share: 30 of 40 used, then 45.
        fake_llm.enqueue(Reply("c", usage=(10, 5)))
        assert (await post(b, second, "four", key=AGENT_A2)).status_code == 200
        refused = await post(a, first, "five", key=AGENT_A2)
        assert_error(refused, 429, "budget_exceeded")
        assert refused.json()["error"]["details"]["kind"] == "tenant_tokens"


async def test_while_redis_restarts_the_turn_rate_is_per_process_then_shared_again(
    budget_settings: Any, fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    """docs/operations.md, Redis: while it is away each process counts a key's turns itself
    (the limit holds per process); once it answers, the count is shared again, in the restarted
    (empty) Redis."""
    with RedisServer(tmp_path / "redis") as server:
        settings = budget_settings(turn_rate_per_minute=2, redis_url=server.url)
        async with serve(settings) as a, serve(settings) as b:
            both = [(a, await session(a)), (b, await session(b))]
            fake_llm.enqueue(*(Reply("ok") for _ in range(6)))
            server.kill()
            for svc, _ in both:
                await health_until(svc, REDIS_DEGRADED)
            for svc, session_id in both:  # two each: neither sees the other's
                assert (await post(svc, session_id, "one")).status_code == 200
                assert (await post(svc, session_id, "two")).status_code == 200
                refused = await post(svc, session_id, "three")
                assert_error(refused, 429, "rate_limited")
                assert int(refused.headers["Retry-After"]) >= 1

            server.start()
            for svc, _ in both:
                await health_until(svc, "ok")
            # Shared again: two in all, whichever process takes them (each one's own count
            # of the outage is full and no longer asked).
            for svc, session_id in both:
                assert (await post(svc, session_id, "four")).status_code == 200
            for svc, session_id in both:
                assert_error(await post(svc, session_id, "five"), 429, "rate_limited")


@pytest.fixture
async def capped(budget_settings: Any) -> AsyncIterator[LiveService]:
    async with serve(budget_settings(max_streams_per_principal=1)) as svc:
        yield svc


def subject(key: str) -> str:
    """The principal's subject for a key from HERMES_API_KEYS (app.api.auth)."""
    return "key_" + hashlib.sha256(key.encode()).hexdigest()[:12]


async def until_released(svc: LiveService, key: str) -> None:
    deadline = time.monotonic() + 10
    while svc.runtime.streams.held(key):
        assert time.monotonic() < deadline, "the stream's slot was never given back"
        await asyncio.sleep(0.01)


async def test_open_streams_per_key_are_capped(
    capped: LiveService, fake_llm: FakeLLMServer
) -> None:
    svc = capped
    session_id = await session(svc)
    url = f"/v1/sessions/{session_id}/events"
    before = await refusals(svc)
    async with svc.client.stream("GET", url, headers=auth(AGENT_A)) as held:
        assert held.status_code == 200
        refused = await svc.client.get(url, headers=auth(AGENT_A))
        assert_error(refused, 429, "too_many_streams")
        assert int(refused.headers["Retry-After"]) >= 1
        # A streamed message is refused before its turn is accepted.
        streamed = await svc.client.post(
            f"/v1/sessions/{session_id}/messages",
            json={"content": "hello"},
            headers={**auth(AGENT_A), "Accept": "text/event-stream"},
        )
        assert_error(streamed, 429, "too_many_streams")
        assert not fake_llm.requests
        # Other keys have streams of their own; a JSON turn needs none.
        other = await session(svc, AGENT_A2)
        async with svc.client.stream(
            "GET", f"/v1/sessions/{other}/events", headers=auth(AGENT_A2)
        ) as mine:
            assert mine.status_code == 200
        fake_llm.enqueue(Reply("hi"))
        assert (await post(svc, session_id, "hello")).status_code == 200
    assert moved(before, await refusals(svc), "streams") == 2
    await until_released(svc, f"acme:{subject(AGENT_A)}")
    fake_llm.enqueue(Reply("streamed"))
    async with svc.client.stream(
        "POST",
        f"/v1/sessions/{session_id}/messages",
        json={"content": "again"},
        headers={**auth(AGENT_A), "Accept": "text/event-stream"},
    ) as response:
        assert response.status_code == 200
        events = [e async for e in read_events(response, until="turn.completed")]
    assert events[-1].event == "turn.completed"


async def test_by_default_a_key_holds_at_most_16_streams_and_closing_one_frees_a_slot(
    budget_settings: Any,
) -> None:
    async with serve(budget_settings()) as svc, contextlib.AsyncExitStack() as held:
        url = f"/v1/sessions/{await session(svc)}/events"
        streams = []
        for _ in range(DEFAULT_STREAM_CAP):
            opened = await held.enter_async_context(
                svc.client.stream("GET", url, headers=auth(AGENT_A))
            )
            assert opened.status_code == 200
            streams.append(opened)
        async with svc.client.stream("GET", url, headers=auth(AGENT_A)) as refused:
            assert refused.status_code == 429, "one more stream than the cap was let through"
            await refused.aread()
        assert_error(refused, 429, "too_many_streams")
        assert refused.json()["error"]["details"]["limit"] == DEFAULT_STREAM_CAP
        assert int(refused.headers["Retry-After"]) >= 1

        await streams[0].aclose()  # the tab closes one
        deadline = time.monotonic() + 10
        while True:  # the slot is free once the service has seen the stream go
            async with svc.client.stream("GET", url, headers=auth(AGENT_A)) as again:
                if again.status_code == 200:
                    break
                assert again.status_code == 429
            assert time.monotonic() < deadline, "closing a stream never freed its slot"
            await asyncio.sleep(0.05)


async def test_with_auth_off_the_default_caps_no_streams(service: LiveService) -> None:
    """Every caller is the one local principal then (loopback only): a cap per key would be
    one on the whole process (app.runtime.stream_cap)."""
    async with contextlib.AsyncExitStack() as held:
        created = await service.client.post("/v1/sessions", json={"user_id": "u1"})
        url = f"/v1/sessions/{created.json()['id']}/events"
        for _ in range(DEFAULT_STREAM_CAP + 1):
            opened = await held.enter_async_context(service.client.stream("GET", url))
            assert opened.status_code == 200


async def test_defaults_count_usage_but_refuse_nothing(
    make_settings: Any, fake_llm: FakeLLMServer, usage_rows: Any
) -> None:
    async with serve(make_settings()) as svc:
        client: httpx.AsyncClient = svc.client
        created = await client.post("/v1/sessions", json={"user_id": "u1"})
        session_id = created.json()["id"]
        fake_llm.enqueue(Reply("a", usage=(10**6, 10**6)), Reply("b", usage=(10**6, 10**6)))
        for text in ("one", "two"):
            answer = await client.post(
                f"/v1/sessions/{session_id}/messages", json={"content": text}
            )
            assert answer.status_code == 200
        assert await usage_rows(svc, "default") == [(4 * 10**6, 0.0, 2)]
        row = await svc.runtime.db.fetchone(
            "SELECT used_tokens FROM sessions WHERE id = ?", (session_id,)
        )
        assert row is not None and row[0] == 4 * 10**6
