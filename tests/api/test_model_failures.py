"""Model failures over HTTP against the real fake-LLM server: masked errors, no retries that
can't help, a per-model breaker that skips a failing primary, steps that name who answered."""

from __future__ import annotations

import asyncio
import logging
import socket
from typing import Any

import pytest

from app.llm.testing import BreakStream, Fail, FakeLLMServer, Hang, MalformedStream, Reply
from app.testing import LiveService, serve, stream_turn
from tests.api.test_sessions import assert_error
from tests.conftest import new_session
from tests.llm import paths
from tests.llm.paths import BOTH_PATHS

# Settings on the path a test is parametrized with (the default path otherwise).
model_api = paths.model_api
make_settings = paths.settings_on_path

pytestmark = BOTH_PATHS  # every test here holds on the direct path and on LiteLLM's

KEY = "sk-live-abcdef1234567890"
GATEWAY = "llm-gw-07.corp.internal:8443"
LEAKY_401 = Fail(401, f"Incorrect API key provided: {KEY}, gateway {GATEWAY}")


async def post(svc: LiveService, session_id: str, content: str) -> Any:
    return await svc.client.post(f"/v1/sessions/{session_id}/messages", json={"content": content})


async def model_steps(svc: LiveService, session_id: str) -> list[dict[str, Any]]:
    response = await svc.client.get(f"/v1/sessions/{session_id}/steps")
    assert response.status_code == 200, response.text
    return [s for s in response.json()["items"] if s["action_type"] == "generate_response"]


def no_secrets(text: str) -> None:
    for secret in (KEY, GATEWAY, "llm-gw-07", "corp.internal", "8443"):
        assert secret not in text


def warnings_of(caplog: pytest.LogCaptureFixture, logger: str = "app.llm.chain") -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == logger and r.levelname == "WARNING"]


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_a_refused_key_reaches_clients_masked_is_not_retried_and_locks_nothing_out(
    service: LiveService, fake_llm: FakeLLMServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    session_id = await new_session(service)

    fake_llm.enqueue(LEAKY_401)
    events = await stream_turn(service.client, session_id, "hello?")
    failed = events[-1]
    assert failed.event == "turn.failed"
    assert failed.data["code"] == "llm_auth_failed"
    assert "the model provider rejected the credentials" in failed.data["message"]
    assert "HERMES_MODEL_API_KEY" in failed.data["message"]
    no_secrets(failed.raw)
    assert len(fake_llm.requests) == 1  # a 401 is not retried

    fake_llm.enqueue(LEAKY_401)
    response = await post(service, session_id, "and now?")
    err = assert_error(response, 502, "llm_auth_failed")
    no_secrets(response.text)
    assert err["message"].startswith("the model provider rejected the credentials")
    assert len(fake_llm.requests) == 2

    steps = await model_steps(service, session_id)
    assert [s["error"]["code"] for s in steps] == ["llm_auth_failed", "llm_auth_failed"]
    assert steps[0]["error"]["models"] == [
        {"model": "openai/test-model", "outcome": "llm_auth_failed", "tries": 1}
    ]
    no_secrets(str(steps))
    no_secrets(caplog.text)
    assert any("llm_auth_failed" in m for m in warnings_of(caplog))

    # The provider takes the key again: the very next turn is tried, and answered.
    fake_llm.enqueue(Reply("welcome back"))
    body = (await post(service, session_id, "third time?")).json()
    assert body["message"]["content"] == "welcome back"
    assert len(fake_llm.requests) == 3


async def test_a_missing_key_names_hermes_own_variable(
    make_settings: Any, fake_llm: FakeLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    async with serve(make_settings(model_api_key=None)) as svc:
        session_id = await new_session(svc)
        err = assert_error(await post(svc, session_id, "hi"), 502, "llm_no_api_key")
    assert "set HERMES_MODEL_API_KEY" in err["message"]
    assert "OPENAI_API_KEY" not in err["message"]
    assert fake_llm.requests == []


async def test_a_failing_primary_opens_its_breaker_and_turns_go_to_local_at_once(
    make_settings: Any, fake_llm: FakeLLMServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    fake_llm.enqueue(*[Fail(500, f"boom at {GATEWAY}")] * 10, model="test-model")
    settings = make_settings(
        local_fallback=True, model_breaker_failures=2, llm_retry_backoff_s=0.01
    )
    async with serve(settings) as svc:
        session_id = await new_session(svc, "cust_0001")
        first = (await post(svc, session_id, "hello")).json()
        assert first["model"] == "hermes/local"
        assert len(fake_llm.requests_for("test-model")) == 2  # llm_retries=1: two tries
        opened = [m for m in warnings_of(caplog) if "breaker opened" in m]
        assert opened and "openai/test-model" in opened[0] and "llm_unavailable" in opened[0]

        for text in ("hello again", "where is my order 202405201234"):
            body = (await post(svc, session_id, text)).json()
            assert body["status"] == "completed" and body["model"] == "hermes/local"
        assert len(fake_llm.requests_for("test-model")) == 2  # skipped: never asked again
        steps = await model_steps(svc, session_id)
    no_secrets(caplog.text)
    assert {s["name"] for s in steps} == {"hermes/local"}
    assert {s["trace"]["model"] for s in steps} == {"hermes/local"}
    assert steps[0]["result"]["models"] == [
        {"model": "openai/test-model", "outcome": "llm_unavailable", "tries": 2},
        {"model": "hermes/local", "outcome": "answered", "tries": 1},
    ]
    assert steps[-1]["result"]["models"] == [
        {"model": "openai/test-model", "outcome": "skipped", "tries": 0},
        {"model": "hermes/local", "outcome": "answered", "tries": 1},
    ]


async def test_an_unreachable_primary_answers_from_local_and_is_skipped_after(
    make_settings: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    settings = make_settings(
        model_api_base=f"http://127.0.0.1:{closed_port()}/v1",
        local_fallback=True,
        model_breaker_failures=2,
        llm_retry_backoff_s=0.01,
    )
    async with serve(settings) as svc:
        session_id = await new_session(svc)
        events = await stream_turn(svc.client, session_id, "hello")
        assert events[-1].event == "turn.completed"
        assert events[-1].data["model"] == "hermes/local"
        second = (await post(svc, session_id, "hello")).json()
        steps = await model_steps(svc, session_id)
    assert second["model"] == "hermes/local"
    assert [s["name"] for s in steps] == ["hermes/local", "hermes/local"]
    assert [m["outcome"] for m in steps[0]["result"]["models"]] == ["llm_unreachable", "answered"]
    assert [m["outcome"] for m in steps[1]["result"]["models"]] == ["skipped", "answered"]
    warnings = warnings_of(caplog)
    assert any("breaker opened" in m and "llm_unreachable" in m for m in warnings)
    assert any("could not be reached" in m and "trying hermes/local" in m for m in warnings)
    assert "127.0.0.1" not in caplog.text


async def test_after_the_open_period_one_probe_lets_the_primary_back_in(
    make_settings: Any, fake_llm: FakeLLMServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    fake_llm.enqueue(Fail(500), Fail(500), Reply("the primary is back"), model="test-model")
    settings = make_settings(
        local_fallback=True,
        model_breaker_failures=2,
        model_breaker_open_s=0.3,
        llm_retry_backoff_s=0.01,
    )
    async with serve(settings) as svc:
        session_id = await new_session(svc)
        assert (await post(svc, session_id, "hello")).json()["model"] == "hermes/local"
        assert any("breaker opened" in m for m in warnings_of(caplog))
        deadline = asyncio.get_running_loop().time() + 10
        while True:  # turns go to local until the open period is over and a probe succeeds
            body = (await post(svc, session_id, "hello")).json()
            if body["model"] == "test-model":
                break
            assert asyncio.get_running_loop().time() < deadline, "the primary never came back"
            await asyncio.sleep(0.05)
        assert body["message"]["content"] == "the primary is back"
        assert len(fake_llm.requests_for("test-model")) == 3  # two failures, one probe
        steps = await model_steps(svc, session_id)
    assert steps[-1]["name"] == "openai/test-model"
    assert steps[-1]["result"]["models"] == [
        {"model": "openai/test-model", "outcome": "answered", "tries": 1}
    ]
    closed = [m for m in warnings_of(caplog) if "breaker closed" in m]
    assert len(closed) == 1 and "openai/test-model" in closed[0]


async def test_a_failed_probe_opens_the_breaker_again(
    make_settings: Any, fake_llm: FakeLLMServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    fake_llm.enqueue(*[Fail(503)] * 3, model="test-model")
    settings = make_settings(
        local_fallback=True,
        model_breaker_failures=2,
        model_breaker_open_s=0.3,
        llm_retry_backoff_s=0.01,
    )
    async with serve(settings) as svc:
        session_id = await new_session(svc)
        await post(svc, session_id, "hello")
        deadline = asyncio.get_running_loop().time() + 10
        while len(fake_llm.requests_for("test-model")) < 3:  # until the probe was made
            assert asyncio.get_running_loop().time() < deadline, "no probe was made"
            assert (await post(svc, session_id, "hello")).json()["model"] == "hermes/local"
            await asyncio.sleep(0.05)
        # The probe failed: one try only, the breaker is open again and the next turn skips.
        assert (await post(svc, session_id, "hello")).json()["model"] == "hermes/local"
        assert len(fake_llm.requests_for("test-model")) == 3
    assert len([m for m in warnings_of(caplog) if "breaker opened" in m]) == 2
    assert not [m for m in warnings_of(caplog) if "breaker closed" in m]


async def test_the_only_model_is_always_tried(
    service: LiveService, fake_llm: FakeLLMServer
) -> None:
    """With nowhere to fall over to, a breaker would only turn failures into lock-outs."""
    session_id = await new_session(service)
    for _ in range(3):
        fake_llm.enqueue(Fail(500), Fail(500))
        assert_error(await post(service, session_id, "hi"), 502, "llm_unavailable")
    assert len(fake_llm.requests) == 6
    fake_llm.enqueue(Reply("up again"))
    body = (await post(service, session_id, "hi")).json()
    assert body["message"]["content"] == "up again"


async def test_a_break_after_text_does_not_fall_over(
    make_settings: Any, fake_llm: FakeLLMServer
) -> None:
    fake_llm.enqueue(BreakStream("half an ans"), model="test-model")
    async with serve(make_settings(fallback_models=["openai/backup-model"])) as svc:
        session_id = await new_session(svc)
        events = await stream_turn(svc.client, session_id, "tell me")
        steps = await model_steps(svc, session_id)
    deltas = "".join(e.data["text"] for e in events if e.event == "message.delta")
    assert deltas == "half an ans"
    assert events[-1].event == "turn.failed"
    assert events[-1].data["code"] == "llm_stream_interrupted"
    assert fake_llm.requests_for("backup-model") == []
    assert steps[0]["error"]["models"] == [
        {"model": "openai/test-model", "outcome": "llm_stream_interrupted", "tries": 1}
    ]


async def test_fallbacks_are_tried_in_order_and_hermes_local_last(
    make_settings: Any, fake_llm: FakeLLMServer
) -> None:
    fake_llm.enqueue(Fail(500), Fail(500), model="test-model")
    fake_llm.enqueue(Fail(401), model="backup-model")
    settings = make_settings(
        fallback_models=["openai/backup-model"], local_fallback=True, llm_retry_backoff_s=0.01
    )
    async with serve(settings) as svc:
        session_id = await new_session(svc)
        body = (await post(svc, session_id, "hello")).json()
        steps = await model_steps(svc, session_id)
    assert body["status"] == "completed" and body["model"] == "hermes/local"
    assert steps[0]["result"]["models"] == [
        {"model": "openai/test-model", "outcome": "llm_unavailable", "tries": 2},
        {"model": "openai/backup-model", "outcome": "llm_auth_failed", "tries": 1},
        {"model": "hermes/local", "outcome": "answered", "tries": 1},
    ]
    first, backup = fake_llm.requests_for("test-model"), fake_llm.requests_for("backup-model")
    assert len(first) == 2 and len(backup) == 1 and first[-1].at <= backup[0].at


async def test_a_rate_limit_is_retried_after_the_time_the_provider_asks_for(
    make_settings: Any, fake_llm: FakeLLMServer
) -> None:
    fake_llm.enqueue(
        Fail(429, "slow down", headers={"retry-after": "0.4"}),
        Reply("patience pays"),
        model="test-model",
    )
    async with serve(make_settings(llm_retry_backoff_s=0.001)) as svc:
        session_id = await new_session(svc)
        body = (await post(svc, session_id, "hi")).json()
    assert body["message"]["content"] == "patience pays"
    first, second = fake_llm.requests_for("test-model")
    assert second.at - first.at >= 0.35  # not the 1 ms backoff: the provider's Retry-After


async def test_a_hung_primary_times_out_and_the_fallback_answers(
    make_settings: Any, fake_llm: FakeLLMServer
) -> None:
    fake_llm.enqueue(Hang(30), model="test-model")
    fake_llm.enqueue(Reply("the backup is awake"), model="backup-model")
    settings = make_settings(
        fallback_models=["openai/backup-model"], llm_timeout_s=0.4, llm_retries=0
    )
    async with serve(settings) as svc:
        session_id = await new_session(svc)
        body = (await post(svc, session_id, "anyone?")).json()
        steps = await model_steps(svc, session_id)
    assert body["message"]["content"] == "the backup is awake"
    assert [m["outcome"] for m in steps[0]["result"]["models"]] == ["llm_timeout", "answered"]


async def test_a_malformed_stream_falls_over_before_any_text_and_fails_after(
    make_settings: Any, fake_llm: FakeLLMServer
) -> None:
    fake_llm.enqueue(MalformedStream(), model="test-model")
    fake_llm.enqueue(Reply("clean answer"), model="backup-model")
    settings = make_settings(fallback_models=["openai/backup-model"], llm_retries=0)
    async with serve(settings) as svc:
        session_id = await new_session(svc)
        body = (await post(svc, session_id, "first")).json()
        assert body["message"]["content"] == "clean answer"

        fake_llm.enqueue(MalformedStream("half a sen"), model="test-model")
        events = await stream_turn(svc.client, session_id, "second")
        steps = await model_steps(svc, session_id)
    assert [m["outcome"] for m in steps[0]["result"]["models"]] == ["llm_unavailable", "answered"]
    deltas = "".join(e.data["text"] for e in events if e.event == "message.delta")
    assert deltas == "half a sen"
    assert events[-1].event == "turn.failed"
    assert events[-1].data["code"] == "llm_stream_interrupted"
    assert len(fake_llm.requests_for("backup-model")) == 1  # the break after text stayed final
