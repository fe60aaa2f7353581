"""Tools served by MCP servers: configuration, connections, and their place in the registry."""

from app.tools.mcp.config import McpConfig, McpConfigError, ServerConfig, load_mcp_config
from app.tools.mcp.health import Backoff, ConnectionState
from app.tools.mcp.manager import McpManager
from app.tools.mcp.store import DefinitionStore, SqliteDefinitionStore

__all__ = [
    "Backoff",
    "ConnectionState",
    "DefinitionStore",
    "McpConfig",
    "McpConfigError",
    "McpManager",
    "ServerConfig",
    "SqliteDefinitionStore",
    "load_mcp_config",
]
