-- Operators decide on what will really run: the approval keeps the unmasked arguments (shown
-- only to operators and admins, every such read audited) and a summary of what is sensitive
-- in them (shown to everyone; it names kinds, never values).

ALTER TABLE approvals ADD COLUMN arguments_full TEXT;
ALTER TABLE approvals ADD COLUMN sensitive TEXT NOT NULL DEFAULT '[]';

-- Who did what to which record, and when: reads of unmasked data, decisions. Rows outlive the
-- session they name (no foreign key), and never hold the sensitive values themselves.
CREATE TABLE audit_log (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant_id  TEXT NOT NULL,
    actor      TEXT NOT NULL,
    role       TEXT NOT NULL,
    action     TEXT NOT NULL,
    target_id  TEXT,
    session_id TEXT,
    at         REAL NOT NULL,
    details    TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX audit_log_by_tenant ON audit_log (tenant_id, at);
CREATE INDEX audit_log_by_target ON audit_log (target_id, at);
