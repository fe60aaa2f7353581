"""The model chain against the real fake-LLM server, on the direct path and through LiteLLM:
which failures are tried again, when a call falls over to the next model, timeouts, and the
route it reports."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from app.llm.build import build_chain
from app.llm.catalog import ModelConfig
from app.llm.chain import ModelChain
from app.llm.failures import ModelsFailed
from app.llm.gateway import ModelRequest, ModelRoute, StreamEnd, collect, tap_route
from app.llm.retry import RetryPolicy
from app.llm.testing import BreakStream, Fail, FakeLLMServer, Hang, Reply
from app.resilience.breaker import BreakerPolicy
from tests.llm.paths import MODEL_APIS, chain_options

REQUEST = ModelRequest(messages=[{"role": "user", "content": "hi"}])
FAST = RetryPolicy(retries=1, backoff_s=0.001, backoff_max_s=1.0)


Chain = Callable[..., ModelChain]


@pytest.fixture(params=MODEL_APIS)
async def chain(fake_llm: FakeLLMServer, request: pytest.FixtureRequest) -> AsyncIterator[Chain]:
    """`chain("a", "b", **options)`: openai/a then openai/b on the fake server, on the path
    the test is parametrized with; closed after the test."""
    built: list[ModelChain] = []

    def make(*names: str, **options: Any) -> ModelChain:
        configs = [ModelConfig(f"openai/{n}", fake_llm.url, "sk-test") for n in names]
        options.setdefault("retry", FAST)
        built.append(build_chain(configs, chain_options(request.param, **options)))
        return built[-1]

    yield make
    for model in built:
        await model.aclose()


async def answer(model: ModelChain) -> tuple[str, ModelRoute]:
    routes: list[ModelRoute] = []
    reply = await collect(tap_route(model.stream(REQUEST), routes))
    return reply.text, routes[-1]


@pytest.mark.parametrize(
    ("status", "tries"),
    [(400, 1), (401, 1), (403, 1), (404, 1), (408, 2), (409, 2), (429, 2), (500, 2), (503, 2)],
)
async def test_only_failures_a_retry_can_fix_are_retried(
    fake_llm: FakeLLMServer, chain: Chain, status: int, tries: int
) -> None:
    fake_llm.enqueue(Fail(status), Fail(status), model="m")
    with pytest.raises(ModelsFailed) as info:
        await answer(chain("m"))
    assert len(fake_llm.requests_for("m")) == tries
    assert info.value.route.attempts[0].tries == tries


async def test_a_retry_that_succeeds_answers(fake_llm: FakeLLMServer, chain: Chain) -> None:
    fake_llm.enqueue(Fail(429, headers={"retry-after": "0"}), Reply("second time"), model="m")
    text, route = await answer(chain("m"))
    assert text == "second time"
    assert route.answered_by == "openai/m"
    assert route.trace() == [{"model": "openai/m", "outcome": "answered", "tries": 2}]


async def test_falls_over_in_order_before_anything_was_passed_on(
    fake_llm: FakeLLMServer, chain: Chain
) -> None:
    fake_llm.enqueue(Fail(401), model="a")
    fake_llm.enqueue(Fail(500), Fail(500), model="b")
    fake_llm.enqueue(Reply("from c"), model="c")
    text, route = await answer(chain("a", "b", "c"))
    assert text == "from c"
    assert route.trace() == [
        {"model": "openai/a", "outcome": "llm_auth_failed", "tries": 1},
        {"model": "openai/b", "outcome": "llm_unavailable", "tries": 2},
        {"model": "openai/c", "outcome": "answered", "tries": 1},
    ]


async def test_once_text_has_been_passed_on_a_break_is_final(
    fake_llm: FakeLLMServer, chain: Chain
) -> None:
    fake_llm.enqueue(BreakStream("half "), model="a")
    seen: list[str] = []

    async def on_text(piece: str) -> None:
        seen.append(piece)

    with pytest.raises(ModelsFailed) as info:
        await collect(chain("a", "b").stream(REQUEST), on_text)
    assert seen == ["half "]
    assert info.value.code == "llm_stream_interrupted"
    assert fake_llm.requests_for("b") == []


async def test_a_model_that_does_not_answer_in_time_times_out_and_trips_its_breaker(
    fake_llm: FakeLLMServer, chain: Chain, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    fake_llm.enqueue(Hang(30), Hang(30), model="slow")
    fake_llm.enqueue(Reply("quick answer"), Reply("quick answer"), model="quick")
    model = chain(
        "slow",
        "quick",
        timeout_s=0.3,
        breaker=BreakerPolicy(max_failures=5, max_timeouts=2, open_seconds=60),
    )
    text, route = await answer(model)
    assert text == "quick answer"
    assert route.trace()[0] == {"model": "openai/slow", "outcome": "llm_timeout", "tries": 2}
    assert await model.breaker_states() == {"openai/slow": "open"}
    assert any("breaker opened" in r.getMessage() for r in caplog.records)
    _, route = await answer(model)
    assert route.trace()[0] == {"model": "openai/slow", "outcome": "skipped", "tries": 0}
    assert len(fake_llm.requests_for("slow")) == 2


async def test_a_request_the_provider_refuses_does_not_count_against_the_model(
    fake_llm: FakeLLMServer, chain: Chain
) -> None:
    fake_llm.enqueue(Fail(500), Fail(400), Fail(500), model="a")
    model = chain(
        "a",
        "b",
        retry=RetryPolicy(retries=0, backoff_s=0, backoff_max_s=0),
        breaker=BreakerPolicy(max_failures=2, max_timeouts=3, open_seconds=60),
    )
    for _ in range(3):
        await answer(model)
    assert await model.breaker_states() == {"openai/a": "closed"}  # 500, 400 (healthy), 500


async def test_the_end_of_the_stream_names_the_configured_model(
    fake_llm: FakeLLMServer, chain: Chain
) -> None:
    fake_llm.enqueue(Reply("hi"), model="m")
    items = [item async for item in chain("m").stream(REQUEST)]
    end = items[-1]
    assert isinstance(end, StreamEnd)
    assert end.model == "m"  # what the provider reported
    assert end.route is not None and end.route.answered_by == "openai/m"


def test_a_chain_needs_a_model() -> None:
    with pytest.raises(ValueError, match="at least one"):
        ModelChain([], retry=FAST, breaker=BreakerPolicy(3, 2, 30), timeout_s=1.0)
