"""`kill -9` of the process that owns a session mid-turn: another process serving the same
database takes the session over; the turn ends `interrupted`, resumes from its failed step on
the new owner, and the tool call that had already succeeded is not run again."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.llm.testing import FakeLLMServer, Reply, ToolCall, ToolCalls
from app.testing import SseEvent, read_events
from tests.serve_util import free_port, hermes_env, spawn_hermes, stop, wait_healthy

pytestmark = pytest.mark.slow

TOOLS = """\
version: 1
tools:
  - name: record_visit
    description: Records that the customer called. Writes data; use once per call.
    risk: write
    always_on: true
    parameters:
      type: object
      additionalProperties: false
      required: [note]
      properties:
        note: {type: string, minLength: 1}
    handler: {python: "tests.takeover_tools:record_visit"}
"""


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _start(
    db: Path, port: int, llm: FakeLLMServer, tools: Path, effects: Path, url: str | None
) -> subprocess.Popen[bytes]:
    # On SQLite a gone process of this host frees its leases at once; on PostgreSQL (owners may
    # be on other machines) the survivor waits for the lease to expire.
    database = {"HERMES_DATABASE_URL": url} if url else {}
    env = hermes_env(
        llm.url,
        **database,
        HERMES_LOCAL_FALLBACK="false",
        HERMES_LLM_TIMEOUT_S="120",
        HERMES_TOOLS_FILE=str(tools),
        HERMES_SESSION_LEASE_S="2",
        HERMES_SESSION_LEASE_RENEW_S="0.5",
        HERMES_SESSION_LEASE_SWEEP_S="0.2",
    )
    env["LEASE_TEST_SIDE_EFFECTS"] = str(effects)
    args = ["serve", "--port", str(port), "--db", str(db)]
    return spawn_hermes(args, env, db.with_suffix(f".{port}.log"))


async def _session_events(
    client: httpx.AsyncClient, session_id: str, until: str, timeout_s: float = 60
) -> list[SseEvent]:
    """The session's events from the start up to the first `until`."""
    seen: list[SseEvent] = []

    async def follow() -> None:
        async with client.stream(
            "GET", f"/v1/sessions/{session_id}/events", params={"after": 0}
        ) as response:
            async for event in read_events(response, until=until):
                seen.append(event)

    await asyncio.wait_for(follow(), timeout_s)
    return seen


async def test_a_killed_owners_session_is_taken_over_and_no_side_effect_runs_twice(
    tmp_path: Path, database_url: str | None
) -> None:
    db, tools, effects = tmp_path / "shared.db", tmp_path / "tools.yaml", tmp_path / "effects"
    tools.write_text(TOOLS, encoding="utf-8")
    effects.touch()
    with FakeLLMServer() as llm:
        # The owner calls the tool, then its model answer never comes before it is killed.
        llm.enqueue(
            ToolCalls(ToolCall("record_visit", {"note": "called"}, id="call_1")),
            Reply("too late", delay=30),
            Reply("resumed after the takeover"),
        )
        port_a, port_b = free_port(), free_port()
        a = _start(db, port_a, llm, tools, effects, database_url)
        procs = [a]
        try:
            await wait_healthy(f"http://127.0.0.1:{port_a}", a, db.with_suffix(f".{port_a}.log"))
            b = _start(db, port_b, llm, tools, effects, database_url)
            procs.append(b)
            await wait_healthy(f"http://127.0.0.1:{port_b}", b, db.with_suffix(f".{port_b}.log"))
            async with (
                httpx.AsyncClient(base_url=f"http://127.0.0.1:{port_a}", timeout=30) as on_a,
                httpx.AsyncClient(base_url=f"http://127.0.0.1:{port_b}", timeout=30) as on_b,
            ):
                session_id = (await on_a.post("/v1/sessions", json={"user_id": "u1"})).json()["id"]
                posted = asyncio.create_task(_post(on_a, session_id))
                # (Polled: B does not see A's live events without Redis, only its log.)
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline:
                    if await _tool_succeeded(on_b, session_id) and len(llm.requests) >= 2:
                        break  # the owner is waiting for its model again
                    await asyncio.sleep(0.02)
                else:
                    raise AssertionError("the owner never got to its second model call")

                a.send_signal(signal.SIGKILL)
                await asyncio.to_thread(a.wait, 30)
                await asyncio.gather(posted, return_exceptions=True)

                ended = await _session_events(on_b, session_id, until="turn.failed")
                assert ended[-1].data["code"] == "interrupted"
                assert _lines(effects) == 1
                steps = (await on_b.get(f"/v1/sessions/{session_id}/steps")).json()["items"]
                failed = [s for s in steps if s["status"] == "failed"]
                assert [s["action_type"] for s in failed] == ["generate_response"]
                tool_steps = [s for s in steps if s["action_type"] == "call_tool"]
                assert [s["status"] for s in tool_steps] == ["succeeded"]

                retried = await on_b.post(
                    f"/v1/sessions/{session_id}/steps/{failed[0]['id']}/retry"
                )
                assert retried.status_code == 202, retried.text
                done = await _session_events(on_b, session_id, until="turn.completed")
                assert done[-1].event == "turn.completed"
                texts = [e.data.get("text") for e in done if e.event == "message.completed"]
                assert texts[-1] == "resumed after the takeover"
                assert _lines(effects) == 1  # the resumed turn reused the recorded result
        finally:
            await asyncio.to_thread(stop, procs)


async def _tool_succeeded(client: httpx.AsyncClient, session_id: str) -> bool:
    steps = (await client.get(f"/v1/sessions/{session_id}/steps")).json()["items"]
    return any(s["action_type"] == "call_tool" and s["status"] == "succeeded" for s in steps)


async def _post(client: httpx.AsyncClient, session_id: str) -> Any:
    return await client.post(f"/v1/sessions/{session_id}/messages", json={"content": "hello"})


def _lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())
