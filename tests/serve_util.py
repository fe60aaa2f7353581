"""`hermes serve` as a real child process, for the tests that need processes (a `kill -9`, several
processes on one database, `--workers`): a free port, the child's environment, starting it with
its stderr in a log file, waiting until it answers, and stopping it."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path

import httpx


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def hermes_env(model_api_base: str, **settings: str) -> dict[str, str]:
    """The test runner's environment without any `HERMES_` variable of its own, answering with
    `openai/test-model` from the fake model at `model_api_base`, logging warnings only, plus
    `settings` (full `HERMES_…` names)."""
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith("HERMES_")},
        "HERMES_MODEL": "openai/test-model",
        "HERMES_MODEL_API_BASE": model_api_base,
        "HERMES_MODEL_API_KEY": "sk-test",
        "HERMES_LOG_LEVEL": "WARNING",
        **settings,
    }


def spawn_hermes(args: Iterable[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """`hermes <args>` in a child process; its stderr goes to `log` (appended)."""
    with log.open("ab") as sink:  # the child keeps its own copy of the descriptor
        return subprocess.Popen(
            [sys.executable, "-m", "app.cli", *args],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=sink,
        )


async def wait_healthy(
    base: str, proc: subprocess.Popen[bytes], log: Path, timeout_s: float = 60
) -> None:
    """Until `GET /healthz` answers 200; fails with the child's log if it exits first."""
    deadline = time.monotonic() + timeout_s
    async with httpx.AsyncClient(base_url=base) as client:
        while time.monotonic() < deadline:
            assert proc.poll() is None, log.read_text()  # noqa: ASYNC240
            try:
                if (await client.get("/healthz")).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.1)
    raise AssertionError(f"server did not become healthy; its log:\n{log.read_text()}")  # noqa: ASYNC240


def stop(procs: Iterable[subprocess.Popen[bytes]], timeout_s: float = 30) -> None:
    """SIGTERM to every child still running (a graceful shutdown), then wait for each; one that
    does not stop within `timeout_s` is killed."""
    running = [p for p in procs if p.poll() is None]
    for proc in running:
        proc.send_signal(signal.SIGTERM)
    for proc in running:
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout_s)
