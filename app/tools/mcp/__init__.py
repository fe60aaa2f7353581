"""Tools served by MCP servers: configuration, connections, and their place in the registry.

Import the parts from their modules (`app.tools.mcp.manager`, `.store`, ...): this package
imports nothing of the MCP SDK, so a service without MCP servers never loads it.
"""
