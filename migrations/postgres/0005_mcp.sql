-- PostgreSQL mirror of migrations/0005_mcp.sql (types as described in 0001_init.sql).
-- MCP tool definitions an operator (or first sight) approved, so a changed definition is caught
-- across restarts. MCP servers serve the whole deployment, not one tenant: the tenant and
-- subject of whoever approved are kept for the audit trail. `definition` stays TEXT: it is
-- compared and shown byte for byte.

CREATE TABLE mcp_tool_approvals (
    server             TEXT NOT NULL,
    tool               TEXT NOT NULL,
    fingerprint        TEXT NOT NULL,
    definition         TEXT NOT NULL,
    approved_by        TEXT NOT NULL,
    approved_by_tenant TEXT,
    approved_at        DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (server, tool)
);
