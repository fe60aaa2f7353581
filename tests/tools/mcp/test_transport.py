"""What a stdio server is given (an allow-listed environment plus its own `env`), and what
never comes back out: the secrets, in any log line or status field."""

from __future__ import annotations

import json
import logging
import socket
import sys

import pytest

from app.tools.mcp.secrets import MASK
from app.tools.mcp.transport import child_environment
from tests.mcp_servers.processes import scripted_stdio
from tests.tools.mcp.conftest import ManagerFactory
from tests.tools.mcp.helpers import CONNECT_S, call, connected

SECRET = "sk-live-0123456789abcdef"


def test_child_environment_is_the_allowlist_plus_declared() -> None:
    parent = {"PATH": "/usr/bin", "AWS_SECRET_ACCESS_KEY": "x", "TZ": "UTC"}
    env = child_environment({"TZ": "Asia/Shanghai", "MODE": "test"}, ["PATH", "TZ", "LANG"], parent)
    assert env == {"PATH": "/usr/bin", "TZ": "Asia/Shanghai", "MODE": "test"}


async def test_stdio_server_sees_only_allowed_and_declared_variables(
    make_manager: ManagerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HERMES_TEST_MCP_SECRET", SECRET)
    monkeypatch.setenv("HERMES_TEST_ALLOWED", "visible")
    monkeypatch.setenv("HERMES_TEST_PRIVATE", "hidden")
    server = scripted_stdio(
        trust="trusted", env={"API_TOKEN": "${HERMES_TEST_MCP_SECRET}", "MODE": "quiet"}
    )
    manager = await make_manager({"s": server}, mcp_env_allowlist=["PATH", "HERMES_TEST_ALLOWED"])
    await connected(manager, "s")

    async def env(name: str) -> str:
        return str((await call(manager, "mcp__s__get_env", name=name))["result"])

    # The server has the declared secret; what it returns has it masked, so a tool that
    # echoes it gives it to nobody (not the model, the stored messages, the logs).
    assert await env("API_TOKEN") == MASK
    assert await env("MODE") == "quiet"
    assert await env("HERMES_TEST_ALLOWED") == "visible"
    assert await env("HERMES_TEST_PRIVATE") == "<unset>"
    assert await env("HERMES_TEST_MCP_SECRET") == "<unset>"


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_secrets_never_reach_logs_or_status(
    make_manager: ManagerFactory,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("CRM_TOKEN", SECRET)
    leaky = (
        "import os, sys; print('starting with token', os.environ['TOKEN'], file=sys.stderr);"
        " sys.exit(2)"
    )
    manager = await make_manager(
        {
            "crm": {
                "url": f"http://127.0.0.1:{closed_port()}/mcp?token=${{CRM_TOKEN}}",
                "headers": {"Authorization": "Bearer ${CRM_TOKEN}"},
            },
            "leaky": {
                "command": sys.executable,
                "args": ["-c", leaky, "--token=${CRM_TOKEN}"],
                "env": {"TOKEN": "${CRM_TOKEN}"},
            },
        }
    )
    crm, leaky_conn = manager.connections["crm"], manager.connections["leaky"]
    await manager.wait_until(
        lambda: (
            crm.retries >= 2
            and leaky_conn.last_error is not None
            and "stderr" in leaky_conn.last_error
        ),
        CONNECT_S,
    )
    status = json.dumps(manager.status())
    assert SECRET not in status
    assert SECRET not in caplog.text
    assert "token=****" in manager.server_status("crm")["target"]
    assert "--token=****" in manager.server_status("leaky")["target"]
    assert "starting with token ****" in manager.server_status("leaky")["last_error"]
    assert "starting with token ****" in caplog.text  # the server's stderr, masked
