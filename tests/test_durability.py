"""Everything the API acknowledged survives `kill -9` of the server."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
from pathlib import Path

import httpx
import pytest

from app.llm.testing import FakeLLMServer, Reply
from app.testing import SseEvent, read_events
from tests.conftest import superseded
from tests.serve_util import free_port, hermes_env, spawn_hermes, wait_healthy

pytestmark = pytest.mark.slow

SESSIONS = int(os.environ.get("HERMES_TEST_DURABILITY_SESSIONS", "8"))
ACKS_BEFORE_KILL = int(os.environ.get("HERMES_TEST_DURABILITY_ACKS", "40"))


def _start(db: Path, port: int, llm: FakeLLMServer) -> subprocess.Popen[bytes]:
    env = hermes_env(llm.url, HERMES_BUSY_POLICY="enqueue")
    args = ["serve", "--port", str(port), "--db", str(db)]
    return spawn_hermes(args, env, db.with_suffix(".log"))


async def test_acknowledged_writes_survive_kill_9(tmp_path: Path) -> None:
    db = tmp_path / "durable.db"
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with FakeLLMServer(default=Reply("an answer in a few words", chunk_delay=0.002)) as llm:
        proc = _start(db, port, llm)
        acked_messages: list[tuple[str, str, str]] = []  # (session, user msg id, assistant id)
        acked_sessions: list[str] = []
        acked_events: dict[str, list[SseEvent]] = {}  # session -> what its streams got
        stop = asyncio.Event()
        try:
            await wait_healthy(base, proc, db.with_suffix(".log"))
            async with httpx.AsyncClient(base_url=base, timeout=30) as client:

                async def talk(n: int) -> None:
                    response = await client.post("/v1/sessions", json={"user_id": f"u{n}"})
                    session_id = response.json()["id"]
                    acked_sessions.append(session_id)
                    i = 0
                    while not stop.is_set():
                        i += 1
                        if i % 3 == 0:
                            await _stream_one(client, session_id, f"m{i}", acked_events)
                            continue
                        r = await client.post(
                            f"/v1/sessions/{session_id}/messages", json={"content": f"m{i}"}
                        )
                        body = r.json()
                        acked_messages.append(
                            (session_id, body["user_message_id"], body["message"]["id"])
                        )
                        if len(acked_messages) >= ACKS_BEFORE_KILL:
                            stop.set()

                tasks = [asyncio.create_task(talk(n)) for n in range(SESSIONS)]
                await asyncio.wait_for(stop.wait(), 120)
                proc.send_signal(signal.SIGKILL)  # mid-load: other requests are in flight
                proc.wait(30)
                await asyncio.gather(*tasks, return_exceptions=True)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(30)

        proc = _start(db, port, llm)
        try:
            await wait_healthy(base, proc, db.with_suffix(".log"))
            async with httpx.AsyncClient(base_url=base, timeout=30) as client:
                for session_id in acked_sessions:
                    assert (await client.get(f"/v1/sessions/{session_id}")).status_code == 200
                stored: dict[str, set[str]] = {}
                for session_id in acked_sessions:
                    items = (
                        await client.get(
                            f"/v1/sessions/{session_id}/messages", params={"limit": 500}
                        )
                    ).json()["items"]
                    stored[session_id] = {m["id"] for m in items}
                for session_id, user_id, assistant_id in acked_messages:
                    assert user_id in stored[session_id]
                    assert assistant_id in stored[session_id]
                for session_id, seen in acked_events.items():
                    # Each acknowledged turn completed: its end deleted its superseded events.
                    events = {
                        str(e.id): e.event
                        for i, e in enumerate(seen)
                        if not superseded(e, seen[i + 1 :])
                    }
                    last = max(int(k) for k in events)
                    async with client.stream(
                        "GET", f"/v1/sessions/{session_id}/events", params={"after": 0}
                    ) as response:
                        logged: dict[str, str] = {}
                        async for event in read_events(response):
                            logged[str(event.id)] = event.event
                            if int(event.id or 0) >= last:
                                break
                    for seq, event_type in events.items():
                        assert logged.get(seq) == event_type
                # The service is usable after the crash.
                session_id = acked_sessions[0]
                r = await client.post(
                    f"/v1/sessions/{session_id}/messages", json={"content": "ok?"}
                )
                assert r.status_code == 200, r.text
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)
    assert len(acked_messages) >= ACKS_BEFORE_KILL


async def _stream_one(
    client: httpx.AsyncClient, session_id: str, content: str, sink: dict[str, list[SseEvent]]
) -> None:
    async with client.stream(
        "POST",
        f"/v1/sessions/{session_id}/messages",
        json={"content": content},
        headers={"Accept": "text/event-stream"},
    ) as response:
        async for event in read_events(response, until="turn.completed"):
            sink.setdefault(session_id, []).append(event)
