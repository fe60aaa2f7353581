"""One server's connection under failure: crashes, hangs, restarts, expired sessions, the
breaker. Every call ends with a result or a clear error, never a hung call."""

from __future__ import annotations

import sys

import pytest

from app.errors import ToolHandlerError
from tests.mcp_servers.processes import http_server, scripted_stdio
from tests.tools.mcp.conftest import ManagerFactory
from tests.tools.mcp.helpers import CONNECT_S, call, connected


async def failure(manager, tool: str, **args: object) -> ToolHandlerError:  # type: ignore[no-untyped-def]
    with pytest.raises(ToolHandlerError) as info:
        await call(manager, tool, **args)
    return info.value


async def test_crash_mid_call_is_an_error_then_the_server_is_restarted(
    make_manager: ManagerFactory,
) -> None:
    manager = await make_manager({"s": scripted_stdio(trust="trusted")})
    await connected(manager, "s")
    before = await call(manager, "mcp__s__pid")
    error = await failure(manager, "mcp__s__crash")
    assert error.code == "mcp_server_crashed" and error.retryable
    conn = manager.connections["s"]
    await manager.wait_until(lambda: conn.connected and conn.retries >= 1, CONNECT_S)
    after = await call(manager, "mcp__s__pid")
    assert after["result"] != before["result"]
    status = manager.server_status("s")
    assert status["state"] == "connected"
    assert status["last_error"].startswith("connection lost")
    assert status["breaker"]["consecutive_failures"] == 0  # the next call succeeded


async def test_a_call_while_disconnected_fails_at_once(make_manager: ManagerFactory) -> None:
    manager = await make_manager({"s": scripted_stdio(trust="trusted")})
    await connected(manager, "s")
    conn = manager.connections["s"]
    await failure(manager, "mcp__s__crash")
    assert not conn.connected
    error = await failure(manager, "mcp__s__echo", text="x")
    assert error.code == "mcp_unavailable" and error.retryable


async def test_hang_times_out_and_the_connection_stays_usable(
    make_manager: ManagerFactory,
) -> None:
    manager = await make_manager({"s": scripted_stdio(trust="trusted", timeout_s=1.0)})
    await connected(manager, "s")
    error = await failure(manager, "mcp__s__hang")
    assert error.code == "mcp_timeout" and error.retryable
    assert "within 1s" in error.message
    assert await call(manager, "mcp__s__echo", text="still here") == {"result": "still here"}
    assert manager.server_status("s")["state"] == "connected"


async def test_breaker_opens_after_timeouts_and_a_probe_closes_it(
    make_manager: ManagerFactory,
) -> None:
    now = [1000.0]
    manager = await make_manager(
        {"s": scripted_stdio(trust="trusted", timeout_s=1.0)},
        clock=lambda: now[0],
        tool_breaker_timeouts=2,
        tool_breaker_open_s=60,
    )
    await connected(manager, "s")
    for _ in range(2):
        assert (await failure(manager, "mcp__s__hang")).code == "mcp_timeout"
    error = await failure(manager, "mcp__s__echo", text="x")
    assert error.code == "mcp_circuit_open" and error.retryable
    assert manager.server_status("s")["breaker"]["state"] == "open"
    now[0] += 61  # the cool-down is over: one probe may go through
    assert manager.server_status("s")["breaker"]["state"] == "half_open"
    assert await call(manager, "mcp__s__echo", text="probe") == {"result": "probe"}
    assert manager.server_status("s")["breaker"]["state"] == "closed"


async def test_http_server_restart_re_initialises(make_manager: ManagerFactory) -> None:
    async with http_server() as server:
        manager = await make_manager({"web": {"url": server.url, "trust": "trusted"}})
        await connected(manager, "web")
        conn = manager.connections["web"]
        first = await call(manager, "mcp__web__pid")
        first_connect = conn.connected_at
        await server.restart()
        await manager.wait_until(
            lambda: conn.connected and conn.connected_at != first_connect, CONNECT_S
        )
        assert (await call(manager, "mcp__web__pid"))["result"] != first["result"]
        assert conn.retries >= 1


async def test_expired_http_session_is_renewed_and_the_call_resent(
    make_manager: ManagerFactory,
) -> None:
    async with http_server() as server:
        manager = await make_manager(
            {"web": {"url": server.url, "trust": "trusted", "protocol": "legacy"}}
        )
        await connected(manager, "web")
        conn = manager.connections["web"]
        first = await call(manager, "mcp__web__pid")
        await server.restart()  # the new process knows nothing of our session
        second = await call(manager, "mcp__web__pid")
        assert second["result"] != first["result"]
        assert conn.server_info is not None and conn.retries >= 1
        assert manager.server_status("web")["last_error"] == "the server dropped the session"


async def test_http_server_crash_mid_call(make_manager: ManagerFactory) -> None:
    async with http_server() as server:
        manager = await make_manager({"web": {"url": server.url, "trust": "trusted"}})
        await connected(manager, "web")
        error = await failure(manager, "mcp__web__crash")
        assert error.code == "mcp_server_crashed"
        conn = manager.connections["web"]
        await manager.wait_until(lambda: not conn.connected, CONNECT_S)
        await server.start()
        await manager.wait_until(lambda: conn.connected, CONNECT_S)
        assert await call(manager, "mcp__web__add", a=1, b=1) == {"sum": 2}


async def test_a_server_that_never_answers_times_out_at_connect(
    make_manager: ManagerFactory,
) -> None:
    silent = {"command": sys.executable, "args": ["-c", "import time; time.sleep(600)"]}
    manager = await make_manager({"silent": silent}, mcp_connect_timeout_s=0.3)
    conn = manager.connections["silent"]
    await manager.wait_until(lambda: conn.last_error is not None, CONNECT_S)
    assert "no answer within 0.3s" in conn.last_error  # type: ignore[operator]
    assert conn.state.value in ("backoff", "connecting")
    assert manager.registry.names() == []


async def test_a_server_that_exits_at_start_up_reports_its_stderr(
    make_manager: ManagerFactory,
) -> None:
    code = "import sys; print('config file missing: /etc/crm.toml', file=sys.stderr); sys.exit(3)"
    manager = await make_manager({"broken": {"command": sys.executable, "args": ["-c", code]}})
    conn = manager.connections["broken"]
    await manager.wait_until(
        lambda: conn.last_error is not None and "stderr" in conn.last_error, CONNECT_S
    )
    assert "config file missing: /etc/crm.toml" in manager.server_status("broken")["last_error"]


async def test_missing_command_and_disabled_servers(make_manager: ManagerFactory) -> None:
    manager = await make_manager(
        {
            "absent": {"command": "/nonexistent/mcp-server"},
            "off": scripted_stdio(enabled=False),
        }
    )
    conn = manager.connections["absent"]
    await manager.wait_until(lambda: conn.last_error is not None, CONNECT_S)
    assert "FileNotFoundError" in conn.last_error  # type: ignore[operator]
    assert manager.server_status("off")["state"] == "disabled"
    assert not await manager.wait_connected("off", 0.01)
