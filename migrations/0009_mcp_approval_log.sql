-- Every decision about an MCP tool definition, kept for the audit trail: `mcp_tool_approvals`
-- holds only the definition approved now (one row per tool, overwritten by each approval), so
-- without this table an earlier approval - who made it, for which tenant's key, when - is lost
-- as soon as the tool is approved again. `decided_by` is the principal's subject (which API
-- key, never the key) or 'first-seen' when Hermes trusted a definition on first sight.

CREATE TABLE mcp_tool_decisions (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    server      TEXT NOT NULL,
    tool        TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    decision    TEXT NOT NULL CHECK (decision IN ('first_seen', 'approved')),
    decided_by  TEXT NOT NULL,
    tenant_id   TEXT,
    decided_at  REAL NOT NULL
);
CREATE INDEX mcp_tool_decisions_by_tool ON mcp_tool_decisions (server, tool, seq);
