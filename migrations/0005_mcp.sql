-- MCP tool definitions an operator (or first sight) approved, so a changed definition is caught
-- across restarts. MCP servers serve the whole deployment, not one tenant: the tenant and
-- subject of whoever approved are kept for the audit trail.

CREATE TABLE mcp_tool_approvals (
    server             TEXT NOT NULL,
    tool               TEXT NOT NULL,
    fingerprint        TEXT NOT NULL,
    definition         TEXT NOT NULL,
    approved_by        TEXT NOT NULL,
    approved_by_tenant TEXT,
    approved_at        REAL NOT NULL,
    PRIMARY KEY (server, tool)
);
