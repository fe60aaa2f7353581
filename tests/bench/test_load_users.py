"""The load generator's verdict on a turn, against the real service: a completed turn is timed
to its `turn.completed` frame; a failed turn, an error answer or a silent stream is a failure."""

from __future__ import annotations

import socket
from typing import Any

from app.llm.testing import FakeLLMServer, Hang, Reply
from app.llm.testing_rules import RuleModel
from app.settings import Settings
from app.testing import serve
from bench._load_users import take_turn
from tests.conftest import new_session


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def dead_model(make_settings: Any) -> Settings:
    """Settings whose model is a closed port, tried once: every turn fails `llm_unreachable`."""
    settings: Settings = make_settings(
        model_api_base=f"http://127.0.0.1:{closed_port()}/v1", llm_retries=0
    )
    return settings


async def test_a_completed_turn_is_timed_to_its_last_frame(
    make_settings: Any, fake_llm: FakeLLMServer
) -> None:
    fake_llm.responder = RuleModel()
    fake_llm.enqueue(Reply("slow", chunks=2, chunk_delay=0.3))  # headers come long before
    async with serve(make_settings()) as svc:
        session_id = await new_session(svc, "cust_0001")
        task, _, seconds, failure, tools = await take_turn(
            svc.client, session_id, "password_reset", "hello", 10
        )
        assert (task, failure, tools) == ("password_reset", None, [])
        assert seconds >= 0.3
        turn = await take_turn(
            svc.client, session_id, "order_status", "where is my order 202405201234?", 10
        )
        assert turn[3] is None and turn[4] == [("query_order_status", "success")]
        missing = await take_turn(
            svc.client, session_id, "order_status", "where is my order 202405209999?", 10
        )
        assert missing[3] is None  # the turn went fine; the tool said no
        assert missing[4] == [("query_order_status", "error: order_not_found")]


async def test_failed_turns_error_answers_and_silence_are_failures(
    make_settings: Any, fake_llm: FakeLLMServer
) -> None:
    async with serve(dead_model(make_settings)) as svc:
        session_id = await new_session(svc, "cust_0001")
        turn = await take_turn(svc.client, session_id, "complaint", "hello", 10)
        assert turn[3] == "turn.failed: llm_unreachable"
        turn = await take_turn(svc.client, "ses_" + "0" * 24, "complaint", "hello", 10)
        assert turn[3] == "http 404"
    fake_llm.enqueue(Hang(30))
    async with serve(make_settings(llm_timeout_s=1)) as svc:  # ends the hung call after us
        session_id = await new_session(svc, "cust_0001")
        turn = await take_turn(svc.client, session_id, "complaint", "hello", 0.5)
        assert turn[3] == "no terminal frame within 0.5s"
