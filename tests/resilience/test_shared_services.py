"""Two live Hermes services on their own SQLite files, sharing one Redis (HERMES_REDIS_URL and
a test prefix): tool and model breakers and rate limits hold across both, and a Redis cut
leaves each working on its own state until Redis is back."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from app.errors import ConfigError
from app.llm.chain import ModelChain
from app.llm.testing import Fail, FakeLLMServer, Reply, ToolCall, ToolCalls
from app.runtime import open_runtime
from app.testing import LiveService, SseEvent, serve, stream_turn
from tests.conftest import FIXTURE_TOOLS, copy_demo, new_session
from tests.redis_util import REDIS_URL, proxied_redis, redis_prefix
from tests.serve_util import free_port
from tests.tools.fixture_tools import REC

__all__ = ["redis_prefix"]

Pair = tuple[LiveService, LiveService]


@contextlib.asynccontextmanager
async def two_services(
    make_settings: Any,
    tmp_path: Path,
    demo_template: Path,
    urls: tuple[str, str],
    **common: Any,
) -> AsyncIterator[Pair]:
    first = make_settings(redis_url=urls[0], **common)
    second = make_settings(
        redis_url=urls[1],
        db_path=tmp_path / "b.db",
        demo_db_path=copy_demo(demo_template, tmp_path / "demo-b.db"),
        **common,
    )
    async with serve(first) as a, serve(second) as b:
        yield a, b


@pytest.fixture
def services(
    make_settings: Any, tmp_path: Path, demo_template: Path, redis_prefix: str
) -> Callable[..., contextlib.AbstractAsyncContextManager[Pair]]:
    """`two_services` for this test: its database files and Redis prefix; both processes on
    the shared Redis unless `urls` says otherwise."""

    def pair(
        urls: tuple[str, str] = (REDIS_URL, REDIS_URL), **common: Any
    ) -> contextlib.AbstractAsyncContextManager[Pair]:
        return two_services(
            make_settings, tmp_path, demo_template, urls, redis_prefix=redis_prefix, **common
        )

    return pair


@pytest.fixture(autouse=True)
def _reset() -> Any:
    REC.reset()
    yield
    REC.reset()


def results(events: list[SseEvent]) -> list[dict[str, Any]]:
    return [e.data["result"] for e in events if e.event == "tool.completed"]


async def call_tool(svc: LiveService, fake_llm: FakeLLMServer, name: str) -> dict[str, Any]:
    """One turn in which the model calls `name` once; that call's result."""
    fake_llm.enqueue(ToolCalls(ToolCall(name, {"n": 1})), Reply("done"))
    events = await stream_turn(svc.client, await new_session(svc), "please check")
    (result,) = results(events)
    return result


def flaky_runs() -> int:
    return sum(1 for name, what, _ in REC.log if name == "flaky" and what == "start")


async def eventually(check: Callable[[], Awaitable[bool]], within_s: float = 10.0) -> None:
    deadline = time.monotonic() + within_s
    while not await check():
        assert time.monotonic() < deadline, "the condition did not hold in time"
        await asyncio.sleep(0.02)


async def tool_state(svc: LiveService, name: str = "flaky") -> str:
    response = await svc.client.get("/v1/tools")
    health = {t["name"]: t["health"] for t in response.json()["items"]}
    return str(health[name]["state"])


async def test_a_tool_breaker_opened_on_one_service_is_open_on_the_other(
    fake_llm: FakeLLMServer,
    services: Callable[..., Any],
) -> None:
    async with services(
        tools_file=FIXTURE_TOOLS,
        tool_breaker_failures=2,
    ) as (a, b):
        REC.fail_with = "backend_down"
        for _ in range(2):
            result = await call_tool(a, fake_llm, "flaky")
            assert result["error"]["code"] == "backend_down"
        assert await tool_state(b) == "open"  # B never called it
        REC.fail_with = None
        runs = flaky_runs()
        result = await call_tool(b, fake_llm, "flaky")
        assert result["metadata"]["fallback_reason"] == "circuit_open"
        assert flaky_runs() == runs  # B did not touch the tool


async def test_both_services_asking_at_once_get_exactly_one_half_open_probe(
    services: Callable[..., Any],
) -> None:
    async with services(
        tools_file=FIXTURE_TOOLS,
        tool_breaker_failures=1,
        tool_breaker_open_s=0.05,
    ) as (a, b):
        breakers = [
            svc.runtime.executor.guards.breaker(_spec(svc, "flaky"), "default") for svc in (a, b)
        ]
        await breakers[0].failed(error="backend_down")
        await eventually(lambda: _is(breakers[1], "half_open"))
        admitted = await asyncio.gather(*(breaker.admit() for breaker in breakers * 3))
        assert admitted.count(True) == 1


async def test_a_model_breaker_opened_on_one_service_is_open_on_the_other(
    fake_llm: FakeLLMServer,
    services: Callable[..., Any],
) -> None:
    async with services(
        fallback_models=["openai/backup"],
        model_breaker_failures=2,
        llm_retries=1,
        llm_retry_backoff_s=0.01,
    ) as (a, b):
        fake_llm.enqueue(Fail(500), Fail(500), model="test-model")
        fake_llm.enqueue(Reply("from the backup"), Reply("from the backup"), model="backup")
        body = await _post(a, "hello")
        assert body["message"]["content"] == "from the backup"
        assert len(fake_llm.requests_for("test-model")) == 2
        chain = b.runtime.model
        assert isinstance(chain, ModelChain)
        assert await chain.breaker_states() == {"openai/test-model": "open"}
        body = await _post(b, "hello again")
        assert body["message"]["content"] == "from the backup"
        assert len(fake_llm.requests_for("test-model")) == 2  # B skipped it


async def test_a_tool_rate_limit_is_counted_across_both_services(
    fake_llm: FakeLLMServer,
    services: Callable[..., Any],
) -> None:
    async with services(
        tools_file=FIXTURE_TOOLS,
    ) as (a, b):
        # `limited` allows one call per 5 s: A's call takes the slot, B's finds none.
        assert (await call_tool(a, fake_llm, "limited"))["status"] == "success"
        result = await call_tool(b, fake_llm, "limited")
        assert result["error"]["code"] == "rate_limited"


async def test_a_redis_cut_leaves_each_service_on_its_own_state_then_sharing_resumes(
    fake_llm: FakeLLMServer,
    caplog: pytest.LogCaptureFixture,
    services: Callable[..., Any],
) -> None:
    caplog.set_level(logging.WARNING, logger="app.resilience.redis_client")
    async with (
        proxied_redis() as (proxy, proxied),
        services(
            (proxied, REDIS_URL),
            tools_file=FIXTURE_TOOLS,
            tool_breaker_failures=1,
        ) as (a, b),
    ):
        await proxy.cut()
        for _ in range(3):  # A answers, its tools run
            assert (await call_tool(a, fake_llm, "flaky"))["status"] == "success"
        REC.fail_with = "backend_down"
        await call_tool(b, fake_llm, "flaky")  # opens the breaker in Redis...
        assert await tool_state(b) == "open"
        assert await tool_state(a) == "closed"  # ...which A can't see
        REC.fail_with = None
        assert (await call_tool(a, fake_llm, "flaky"))["status"] == "success"
        mine = [r for r in caplog.records if r.name == "app.resilience.redis_client"]
        assert len(mine) == 1, [r.getMessage() for r in mine]
        assert "HERMES_REDIS_URL" in mine[0].getMessage()

        await proxy.restore()
        await eventually(lambda: _open_on(a))
        runs = flaky_runs()
        result = await call_tool(a, fake_llm, "flaky")
        assert result["metadata"]["fallback_reason"] == "circuit_open"
        assert flaky_runs() == runs


async def test_redis_unreachable_at_start_stops_start_up_naming_the_variable(
    make_settings: Any,
) -> None:
    settings = make_settings(redis_url=f"redis://127.0.0.1:{free_port()}/0")
    with pytest.raises(ConfigError) as info:
        async with open_runtime(settings):
            pass
    assert info.value.source == "HERMES_REDIS_URL"
    assert not settings.storage.db_path.exists()  # nothing was opened before


def _spec(svc: LiveService, name: str) -> Any:
    tool = svc.runtime.registry.get(name)
    assert tool is not None
    return tool.spec


async def _is(breaker: Any, state: str) -> bool:
    return str((await breaker.inspect()).state) == state


async def _open_on(svc: LiveService) -> bool:
    return await tool_state(svc) == "open"


async def _post(svc: LiveService, content: str) -> dict[str, Any]:
    session_id = await new_session(svc)
    response = await svc.client.post(
        f"/v1/sessions/{session_id}/messages", json={"content": content}
    )
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body
