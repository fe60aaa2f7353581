"""All configured MCP servers: connected in the background, their tools kept in the registry.

`McpManager.start()` returns at once; each server connects on its own task, so a slow or dead
server never holds up readiness or the others. Whenever a server (re)lists its tools, they are
merged into the shared `ToolRegistry` under `mcp__<server>__<tool>`. A tool whose definition
differs from the one approved before (first sight counts as approval) stays registered but is
not offered to the model until an operator approves it again.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mcp_types import Tool

from app.errors import DefinitionMoved, McpServerNotFound, McpToolNotFound
from app.resilience.breaker import BreakerPolicy, CircuitBreaker
from app.settings import Settings
from app.tools.context import ToolContext
from app.tools.handlers import Runner
from app.tools.mcp import status
from app.tools.mcp.config import McpConfig, ServerConfig
from app.tools.mcp.connection import ConnectOptions, ServerConnection
from app.tools.mcp.definitions import Definition, UnusableTool, build_spec
from app.tools.mcp.health import Backoff
from app.tools.mcp.results import adapt_result
from app.tools.mcp.secrets import LogMasking
from app.tools.mcp.store import (
    FIRST_SEEN,
    ApprovedDefinition,
    DefinitionStore,
    MemoryDefinitionStore,
)
from app.tools.registry import ToolRegistry

log = logging.getLogger(__name__)


@dataclass
class ToolEntry:
    """One tool of a server as Hermes last saw it."""

    tool: str  # the server's name for it
    name: str  # the registry's name for it
    definition: Definition
    offered: bool
    blocked_reason: str | None = None


@dataclass(frozen=True)
class ApprovalOutcome:
    server: str
    tool: str
    name: str
    fingerprint: str
    changed: bool  # False when the definition was already approved
    approved: ApprovedDefinition | None  # the approval in force now: who, which tenant, when


class McpManager:
    def __init__(
        self,
        config: McpConfig,
        registry: ToolRegistry,
        settings: Settings,
        *,
        definitions: DefinitionStore | None = None,
        backoff: Backoff | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config
        self.registry = registry
        self.settings = settings
        # Without a database, approvals last as long as the process.
        self.definitions: DefinitionStore = definitions or MemoryDefinitionStore()
        options = ConnectOptions(
            connect_timeout_s=settings.mcp.connect_timeout_s,
            env_allowlist=list(settings.mcp.env_allowlist),
            backoff=backoff or Backoff(),
        )
        policy = BreakerPolicy.from_settings(settings.tools)
        self.connections: dict[str, ServerConnection] = {
            name: ServerConnection(
                server,
                options,
                masker=config.masker,
                breaker=CircuitBreaker(f"mcp:{name}", policy, clock=clock),
                on_tools=self._sync_tools,
                on_change=self._bump,
            )
            for name, server in config.servers.items()
        }
        self.tools: dict[str, dict[str, ToolEntry]] = {name: {} for name in config.servers}
        self._approved: dict[str, dict[str, ApprovedDefinition]] = {}
        self._log_masking = LogMasking(config.masker)
        self._changed = asyncio.Event()

    # -- lifecycle ------------------------------------------------------------------------------

    async def start(self) -> None:
        """Start connecting every enabled server in the background; returns at once."""
        self._log_masking.install()
        for conn in self.connections.values():
            conn.start()

    async def aclose(self) -> None:
        for conn in self.connections.values():
            await conn.aclose()
        self._log_masking.remove()

    async def wait_connected(self, server: str, timeout_s: float) -> bool:
        return await self._connection(server).wait_connected(timeout_s)

    async def wait_until(self, predicate: Callable[[], bool], timeout_s: float) -> None:
        """Wait until `predicate()` holds, re-checking whenever a connection changes state or
        a server's tools are synced. Raises `TimeoutError`."""
        async with asyncio.timeout(timeout_s):
            while not predicate():
                await self._changed.wait()

    def _bump(self) -> None:
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    # -- tools ----------------------------------------------------------------------------------

    def timeout_s(self, server: ServerConfig) -> float:
        return server.timeout_s or self.settings.mcp.call_timeout_s

    async def _sync_tools(self, conn: ServerConnection, tools: list[Tool]) -> None:
        server = conn.config
        approved = await self._approvals(server.name)
        entries: dict[str, ToolEntry] = {}
        for tool in tools:
            if not server.tool_filter.admits(tool.name):
                continue
            definition = Definition.of(tool)
            try:
                spec = build_spec(server, definition, self.timeout_s(server))
            except UnusableTool as exc:
                log.warning("MCP server %s: tool %s skipped: %s", server.name, tool.name, exc)
                continue
            if any(e.name == spec.name for e in entries.values()):
                log.error("MCP server %s: two tools named %s; skipped", server.name, spec.name)
                continue
            entry = await self._judge(server.name, definition, spec.name, approved)
            try:
                self.registry.register(spec, self._runner(conn, tool.name), offered=entry.offered)
            except ValueError as exc:
                log.error("MCP server %s: %s", server.name, exc)
                continue
            registered = self.registry.get(spec.name)
            assert registered is not None
            registered.blocked_reason = entry.blocked_reason
            entries[tool.name] = entry
        gone = self.registry.remove_source(
            f"mcp:{server.name}", keep=[e.name for e in entries.values()]
        )
        if gone:
            log.info("MCP server %s: tools withdrawn: %s", server.name, ", ".join(gone))
        self.tools[server.name] = entries
        self._bump()

    async def _approvals(self, server: str) -> dict[str, ApprovedDefinition]:
        if server not in self._approved:
            self._approved[server] = await self.definitions.load(server)
        return self._approved[server]

    async def _judge(
        self,
        server: str,
        definition: Definition,
        name: str,
        approved: dict[str, ApprovedDefinition],
    ) -> ToolEntry:
        pinned = approved.get(definition.name)
        if pinned is None:
            approved[definition.name] = await self.definitions.approve(
                server, definition, approved_by=FIRST_SEEN
            )
            return ToolEntry(definition.name, name, definition, offered=True)
        if pinned.fingerprint == definition.fingerprint():
            return ToolEntry(definition.name, name, definition, offered=True)
        changed = ", ".join(definition.changed_fields(pinned.definition))
        previous = self.tools.get(server, {}).get(definition.name)
        if previous is None or previous.definition != definition:
            log.warning(
                "MCP server %s: the definition of %s changed (%s); it is not offered until an "
                "operator approves it",
                server,
                definition.name,
                changed,
            )
        return ToolEntry(
            definition.name,
            name,
            definition,
            offered=False,
            blocked_reason=(
                f"its definition changed since it was approved ({changed}); "
                "an operator must approve it again"
            ),
        )

    def _runner(self, conn: ServerConnection, tool: str) -> Runner:
        timeout_s = self.timeout_s(conn.config)

        async def run(ctx: ToolContext[Any], args: dict[str, Any]) -> Any:
            result = await conn.call(
                tool, args, timeout_s=timeout_s, idempotency_key=ctx.idempotency_key
            )
            return adapt_result(result, self.config.masker)

        return run

    # -- operator actions -----------------------------------------------------------------------

    async def approve(
        self,
        server: str,
        tool: str,
        *,
        approved_by: str,
        tenant_id: str | None,
        fingerprint: str | None = None,
    ) -> ApprovalOutcome:
        """Approve a tool's current definition and offer it again, for every tenant (servers
        serve the whole deployment). `approved_by` and `tenant_id` name the principal, for the
        audit trail. `tool` is the server's name for it or the registry's; `fingerprint`, when
        given, must match what is approved."""
        conn = self._connection(server)
        entries = self.tools.get(server, {})
        entry = entries.get(tool) or next((e for e in entries.values() if e.name == tool), None)
        if entry is None:
            raise McpToolNotFound(f"the MCP server {server} has no tool {tool!r}", server=server)
        current = entry.definition.fingerprint()
        if fingerprint is not None and fingerprint != current:
            raise DefinitionMoved(
                f"the definition of {entry.tool} is now {current}, not {fingerprint}",
                current=current,
            )
        if entry.offered:
            pinned_now = (await self._approvals(server)).get(entry.tool)
            return ApprovalOutcome(
                server, entry.tool, entry.name, current, changed=False, approved=pinned_now
            )
        pinned = await self.definitions.approve(
            server, entry.definition, approved_by=approved_by, tenant_id=tenant_id
        )
        (await self._approvals(server))[entry.tool] = pinned
        entry.offered, entry.blocked_reason = True, None
        registered = self.registry.get(entry.name)
        if registered is not None and registered.spec.source == f"mcp:{conn.name}":
            registered.offered, registered.blocked_reason = True, None
        log.info(
            "MCP server %s: %s approved by %s of tenant %s (%s)",
            server,
            entry.tool,
            approved_by,
            tenant_id,
            current,
        )
        self._bump()
        return ApprovalOutcome(
            server, entry.tool, entry.name, current, changed=True, approved=pinned
        )

    # -- status ---------------------------------------------------------------------------------

    def summary(self) -> list[dict[str, Any]]:
        """Every server as any operator may see it (see `app.tools.mcp.status`)."""
        return [self.server_summary(name) for name in self.connections]

    def server_summary(self, server: str) -> dict[str, Any]:
        return status.summary(
            self._connection(server), self.tools.get(server, {}).values(), self.config.masker
        )

    def status(self) -> list[dict[str, Any]]:
        """Every server in full, for admins."""
        return [self.server_status(name) for name in self.connections]

    def server_status(self, server: str) -> dict[str, Any]:
        return status.detail(
            self._connection(server),
            self.tools.get(server, {}).values(),
            self._approved.get(server, {}),
            self.config.masker,
        )

    def _connection(self, server: str) -> ServerConnection:
        conn = self.connections.get(server)
        if conn is None:
            raise McpServerNotFound(f"no MCP server named {server!r}", server=server)
        return conn
