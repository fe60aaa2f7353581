"""Helpers shared by the MCP tests."""

from __future__ import annotations

from typing import Any

from app.settings import Settings
from app.storage.session_writer import SessionWriter
from app.tools.context import ToolContext, TurnScope
from app.tools.mcp.health import Backoff
from app.tools.mcp.manager import McpManager

# Fast reconnects: the tests wait for reconnection, they do not time it.
FAST = Backoff(initial_s=0.02, max_s=0.2)
CONNECT_S = 30.0  # how long a test waits for a server to come up (cold Python start on CI)


def settings(**overrides: Any) -> Settings:
    values: dict[str, Any] = {"mcp_connect_timeout_s": 20.0, "mcp_call_timeout_s": 20.0}
    values.update(overrides)
    return Settings(**values)


def ctx(call_id: str = "call_1") -> ToolContext:
    scope = TurnScope("default", "u1", "s1", "t1", writer=SessionWriter("s1"))
    return ToolContext(
        scope=scope, call_id=call_id, tool="x", idempotency_key="idem_" + call_id, deps=None
    )


async def call(manager: McpManager, tool_name: str, /, **args: Any) -> Any:
    tool = manager.registry.get(tool_name)
    assert tool is not None, f"{tool_name} is not registered: {manager.registry.names()}"
    return await tool.run(ctx(), args)


async def connected(manager: McpManager, server: str) -> None:
    assert await manager.wait_connected(server, CONNECT_S), manager.server_status(server)
