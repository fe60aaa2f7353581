"""`hermes serve` refuses to start on bad configuration, naming the problem."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.serve_util import free_port, hermes_env, spawn_hermes, wait_healthy


def run_hermes(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("HERMES_")}
    return subprocess.run(
        [sys.executable, "-m", "app.cli", *args],
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_bad_setting_stops_start_up_with_its_name(tmp_path: Path) -> None:
    result = run_hermes("serve", "--db", str(tmp_path / "x.db"), HERMES_MAX_TOOL_ROUNDS="lots")
    assert result.returncode == 2
    assert "HERMES_MAX_TOOL_ROUNDS" in result.stderr
    assert not (tmp_path / "x.db").exists()


def test_bad_tools_file_stops_start_up_with_the_line(tmp_path: Path) -> None:
    tools = tmp_path / "tools.yaml"
    tools.write_text(
        "version: 1\ntools:\n  - name: Bad-Name\n    description: a tool with a bad name here\n"
        "    risk: read\n"
        "    parameters: {type: object, properties: {}, additionalProperties: false}\n"
        "    handler: {python: 'app.tools.builtin.clock:current_time'}\n"
    )
    result = run_hermes("serve", "--db", str(tmp_path / "x.db"), HERMES_TOOLS_FILE=str(tools))
    assert result.returncode == 2
    assert f"{tools}:3" in result.stderr
    assert "name" in result.stderr


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("HERMES_MODEL", "bogus-model-xyz"),
        ("HERMES_MODEL", "hermes/bogus"),
        ("HERMES_FALLBACK_MODELS", "nope/x"),
    ],
)
def test_an_unknown_model_stops_start_up_in_one_line(
    tmp_path: Path, variable: str, value: str
) -> None:
    result = run_hermes("serve", "--db", str(tmp_path / "x.db"), **{variable: value})
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"hermes: cannot start: {variable}: ")
    assert repr(value) in lines[0]
    assert not (tmp_path / "x.db").exists()


def test_a_model_the_direct_path_cannot_serve_stops_start_up_when_only_it_is_allowed(
    tmp_path: Path,
) -> None:
    result = run_hermes(
        "serve",
        "--db",
        str(tmp_path / "x.db"),
        HERMES_MODEL="anthropic/claude-3-5-haiku",
        HERMES_MODEL_API="openai",
    )
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("hermes: cannot start: HERMES_MODEL: ")
    assert "OpenAI-compatible" in lines[0]


def test_help() -> None:
    result = run_hermes("--help")
    assert result.returncode == 0 and "serve" in result.stdout


def test_several_workers_without_postgresql_are_refused_in_one_line(tmp_path: Path) -> None:
    result = run_hermes("serve", "--workers", "2", "--db", str(tmp_path / "x.db"))
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert result.stderr.startswith("hermes: --workers 2 needs PostgreSQL")
    assert "HERMES_DATABASE_URL=postgresql://" in result.stderr
    assert "HERMES_REDIS_URL" in result.stderr
    assert not (tmp_path / "x.db").exists()


async def test_two_workers_on_postgresql_share_the_port_and_serve_turns(
    tmp_path: Path, pg_url: str, fake_llm: Any
) -> None:
    port = free_port()
    env = hermes_env(fake_llm.url, HERMES_DATABASE_URL=pg_url)
    log = tmp_path / "serve.log"
    proc = spawn_hermes(["serve", "--workers", "2", "--port", str(port)], env, log)
    try:
        base = f"http://127.0.0.1:{port}"
        await wait_healthy(base, proc, log)
        assert len(_workers(proc.pid)) == 2
        async with httpx.AsyncClient(base_url=base, timeout=30) as client:
            for n in range(4):
                session = await client.post("/v1/sessions", json={"user_id": f"u{n}"})
                assert session.status_code == 201, session.text
                turn = await client.post(
                    f"/v1/sessions/{session.json()['id']}/messages", json={"content": "hello"}
                )
                assert turn.status_code == 200, turn.text
        # The workers serve with the limited protocol: a head over the limit is refused.
        for _ in range(4):
            assert await asyncio.to_thread(_status_of_a_huge_head, port) == 431
    finally:
        proc.send_signal(signal.SIGTERM)
        await asyncio.to_thread(proc.wait, 30)
    assert proc.returncode == 0, log.read_text()


def _status_of_a_huge_head(port: int) -> int:
    with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
        try:
            conn.sendall(b"GET /healthz HTTP/1.1\r\nHost: t\r\nX-Big: " + b"a" * 65536)
        except OSError:
            pass  # closed before all of it was taken: the answer is already there to read
        return int(conn.recv(65536).split(b" ", 2)[1])


def _workers(pid: int) -> list[int]:
    """uvicorn's live worker processes under `pid` (Linux /proc; multiprocessing also starts a
    resource tracker, which is not one)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            cmdline = (stat.parent / "cmdline").read_bytes()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z" and b"spawn_main" in cmdline:
            found.append(int(stat.parent.name))
    return found


def test_redis_down_at_start_stops_start_up_in_one_line(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"redis://:secret@127.0.0.1:{port}/0"
    result = run_hermes("serve", "--db", str(tmp_path / "x.db"), HERMES_REDIS_URL=url)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("hermes: cannot start: HERMES_REDIS_URL: ")
    assert "secret" not in lines[0]
    assert not (tmp_path / "x.db").exists()


def test_the_settings_tables_are_printed_from_the_models() -> None:
    result = run_hermes("settings")
    assert result.returncode == 0, result.stderr
    assert "**`settings.storage`**" in result.stdout
    assert "| `HERMES_DB_SYNCHRONOUS` | `NORMAL` |" in result.stdout
