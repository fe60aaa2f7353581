"""A manager over real MCP server subprocesses, closed after each test."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from app.tools.mcp.config import parse_mcp_config
from app.tools.mcp.manager import McpManager
from app.tools.mcp.store import DefinitionStore
from app.tools.registry import ToolRegistry
from tests.tools.mcp.helpers import FAST, settings

ManagerFactory = Callable[..., Awaitable[McpManager]]


@pytest.fixture
async def make_manager() -> AsyncIterator[ManagerFactory]:
    made: list[McpManager] = []

    async def make(
        servers: dict[str, Any],
        *,
        registry: ToolRegistry | None = None,
        definitions: DefinitionStore | None = None,
        clock: Callable[[], float] | None = None,
        environ: dict[str, str] | None = None,
        **setting_overrides: Any,
    ) -> McpManager:
        config = parse_mcp_config({"mcpServers": servers}, "test.json", environ)
        extra: dict[str, Any] = {} if clock is None else {"clock": clock}
        manager = McpManager(
            config,
            registry or ToolRegistry(),
            settings(**setting_overrides),
            definitions=definitions,
            backoff=FAST,
            **extra,
        )
        made.append(manager)
        await manager.start()
        return manager

    yield make
    for manager in made:
        await manager.aclose()
