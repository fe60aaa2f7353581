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
    created_at      REAL NOT NULL,
    finished_at     REAL
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
    created_at      REAL NOT NULL,
    expires_at      REAL NOT NULL,
    decided_at      REAL
);
CREATE INDEX approvals_by_session ON approvals (session_id, created_at);
CREATE INDEX approvals_pending ON approvals (status) WHERE status = 'pending';
