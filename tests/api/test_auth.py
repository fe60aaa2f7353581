"""`hermes serve` and HERMES_AUTH=off: refused in one line on an address other than loopback,
allowed on loopback with a warning line at start-up."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import httpx

from app.api.auth import is_loopback
from tests.serve_util import free_port, hermes_env, spawn_hermes, wait_healthy


def _serve(tmp_path: Path, host: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "app.cli", "serve", "--host", host, "--port", str(free_port())],
        env=hermes_env(
            "http://127.0.0.1:9",
            HERMES_DB_PATH=str(tmp_path / "h.db"),
            HERMES_DEMO_DB_PATH=str(tmp_path / "demo.db"),
            **env,
        ),
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_auth_off_is_refused_off_loopback_in_one_line(tmp_path: Path) -> None:
    for host in ("0.0.0.0", "::", "192.0.2.10"):
        result = _serve(tmp_path, host, HERMES_AUTH="off")
        assert result.returncode == 2, result.stderr
        assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
        assert result.stderr.startswith("hermes: cannot start: HERMES_AUTH: is off")
        assert host in result.stderr and "hermes keys create" in result.stderr
    assert not (tmp_path / "h.db").exists()


async def test_auth_off_on_loopback_starts_with_a_warning(tmp_path: Path) -> None:
    port = free_port()
    env = hermes_env("http://127.0.0.1:9", HERMES_DB_PATH=str(tmp_path / "h.db"), HERMES_AUTH="off")
    log = tmp_path / "serve.log"
    proc = spawn_hermes(["serve", "--host", "127.0.0.1", "--port", str(port)], env, log)
    try:
        base = f"http://127.0.0.1:{port}"
        await wait_healthy(base, proc, log)
        async with httpx.AsyncClient(base_url=base) as client:
            assert (await client.get("/v1/sessions")).status_code == 200  # no key needed
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    warnings = [line for line in log.read_text().splitlines() if "HERMES_AUTH=off" in line]
    assert len(warnings) == 1 and warnings[0].startswith("hermes: warning:")
    assert "tenant default with the admin role" in warnings[0]


def test_what_counts_as_loopback() -> None:
    assert all(is_loopback(h) for h in ("127.0.0.1", "127.8.0.1", "::1", "[::1]", "localhost"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "::", "10.0.0.1", "example.com", ""))
