"""CI's load stage: how the locustfile reads a turn (against the real service), the gate, and one
tiny run of `bench/load_ci.py` end to end (fake model, `hermes serve`, locust) whose p95
threshold no turn can meet, so the stage must fail and say why."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import requests

from app.llm.testing import FakeLLMServer, Hang, Reply
from app.testing import LiveService, serve
from bench._locust_turns import TurnReading, read_turn
from bench.load_ci import Entry, verdict
from tests.bench.test_load_users import dead_model
from tests.conftest import new_session

ROOT = Path(__file__).resolve().parents[2]


def post_turn(svc: LiveService, session_id: str, text: str, timeout_s: float) -> TurnReading:
    """The locustfile's way: a blocking `requests` stream, read line by line."""
    import time

    start = time.perf_counter()
    with requests.post(
        f"{svc.base_url}/v1/sessions/{session_id}/messages",
        json={"content": text},
        headers={"Accept": "text/event-stream"},
        stream=True,
        timeout=(5, 30),
    ) as response:
        assert response.status_code == 200
        return read_turn(response.iter_lines(decode_unicode=True), start, timeout_s)


async def test_a_turn_is_timed_to_turn_completed_and_its_first_delta_is_reported(
    make_settings: Any, fake_llm: FakeLLMServer
) -> None:
    fake_llm.enqueue(Reply("one two three four", chunks=4, chunk_delay=0.3, delay=0.2))
    async with serve(make_settings(delta_flush_ms=0)) as svc:
        session_id = await new_session(svc, "cust_0001")
        reading = await asyncio.to_thread(post_turn, svc, session_id, "hello", 10)
    assert reading.failure is None
    assert reading.first_delta_s is not None and 0.2 <= reading.first_delta_s
    assert reading.seconds >= reading.first_delta_s + 0.8  # three more pieces, 0.3 s apart


async def test_a_failed_turn_and_a_turn_that_never_ends_are_failures(
    make_settings: Any, fake_llm: FakeLLMServer
) -> None:
    async with serve(dead_model(make_settings)) as svc:
        session_id = await new_session(svc, "cust_0001")
        reading = await asyncio.to_thread(post_turn, svc, session_id, "hello", 10)
        assert reading.failure == "turn.failed: llm_unreachable"
    fake_llm.enqueue(Hang(30))
    # Keep-alive comments every 0.2 s: the stream stays open while the model hangs.
    async with serve(make_settings(llm_timeout_s=5, sse_keepalive_s=0.2)) as svc:
        session_id = await new_session(svc, "cust_0001")
        reading = await asyncio.to_thread(post_turn, svc, session_id, "hello", 1)
        assert reading.failure == "no terminal frame within 1s"
        assert 1 <= reading.seconds < 3


def entry(name: str, p95: float, failures: int = 0, requests: int = 10) -> Entry:
    return Entry(name, requests, failures, p95 / 2, p95, p95, 1.0)


def test_the_gate_fails_on_any_failure_and_on_a_slow_turn_p95_only() -> None:
    fine = [entry("turn order_status", 900), entry("ttfd order_status", 5000), entry("/v1", 20)]
    assert verdict(fine, 1000) == []  # time to first delta is reported, not gated
    assert verdict([*fine, entry("turn shipment", 1200)], 1000) == [
        "turn shipment: p95 1200 ms > 1000 ms"
    ]
    assert verdict([*fine, entry("/v1/sessions", 10, failures=1)], 1000) == [
        "/v1/sessions: 1 of 10 failed"
    ]
    assert verdict([entry("/v1/sessions", 10)], 1000) == ["no turn ran"]


@pytest.mark.slow
def test_the_stage_runs_locust_against_hermes_and_fails_a_threshold_no_turn_meets() -> None:
    args = ["bench/load_ci.py", "--users", "6", "--duration", "6", "--spawn-s", "1"]
    done = subprocess.run(
        [sys.executable, *args, "--max-p95-ms", "1"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=110,
    )
    assert done.returncode == 1, done.stdout + done.stderr[-3000:]
    rows = {
        " ".join(line.split()[:2]): line.split()
        for line in done.stdout.splitlines()
        if line.startswith(("turn ", "ttfd "))
    }
    assert "turn order_status" in rows and "ttfd order_status" in rows, done.stdout
    assert all(row[3] == "0" for row in rows.values()), done.stdout  # no failed request
    assert "FAIL  turn order_status: p95 " in done.stdout
    assert "PASS" not in done.stdout
