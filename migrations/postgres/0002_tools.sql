-- PostgreSQL mirror of migrations/0002_tools.sql (types as described in 0001_init.sql).
-- Tool calls with side effects, keyed for idempotency, and the approvals they wait for.

CREATE TABLE tool_calls (
    idempotency_key TEXT PRIMARY KEY,
    tenant_id       TEXT NOT NULL,
    session_id      TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    turn_id         TEXT NOT NULL,
    call_id         TEXT NOT NULL,
    tool            TEXT NOT NULL,
    status          TEXT NOT NULL CHECK (status IN ('running', 'succeeded')),
    result          TEXT,
    created_at      DOUBLE PRECISION NOT NULL,
    finished_at     DOUBLE PRECISION
);
CREATE INDEX tool_calls_by_turn ON tool_calls (turn_id);

CREATE TABLE approvals (
    id              TEXT PRIMARY KEY,
    tenant_id       TEXT NOT NULL,
    session_id      TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    turn_id         TEXT NOT NULL,
    call_id         TEXT NOT NULL,
    tool            TEXT NOT NULL,
    arguments       TEXT NOT NULL,
    reason          TEXT NOT NULL,
    status          TEXT NOT NULL DEFAULT 'pending'
        CHECK (status IN ('pending', 'approved', 'rejected', 'expired')),
    decided_by      TEXT,
    decision_reason TEXT,
    created_at      DOUBLE PRECISION NOT NULL,
    expires_at      DOUBLE PRECISION NOT NULL,
    decided_at      DOUBLE PRECISION
);
CREATE INDEX approvals_by_session ON approvals (session_id, created_at);
CREATE INDEX approvals_pending ON approvals (status) WHERE status = 'pending';
