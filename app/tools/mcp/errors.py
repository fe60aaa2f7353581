"""Caller-facing errors of the MCP operator API."""

from __future__ import annotations

from app.errors import Conflict, NotFound


class McpServerNotFound(NotFound):
    code = "mcp_server_not_found"


class McpToolNotFound(NotFound):
    code = "mcp_tool_not_found"


class DefinitionMoved(Conflict):
    """The definition changed again since the operator looked at it: approve what is seen."""

    code = "mcp_definition_changed"
