-- PostgreSQL mirror of migrations/0008_confirmations.sql (types as described in 0001_init.sql).
-- Tool calls waiting for the customer's yes (tools marked `confirm` in tools.yaml).
-- `arguments` is exactly what runs on a yes; `readback` is what the customer was asked (masked).

CREATE TABLE confirmations (
    id               TEXT PRIMARY KEY,
    tenant_id        TEXT NOT NULL,
    session_id       TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    turn_id          TEXT NOT NULL,
    call_id          TEXT NOT NULL,
    tool             TEXT NOT NULL,
    arguments        TEXT NOT NULL,
    readback         TEXT NOT NULL,
    status           TEXT NOT NULL DEFAULT 'pending'
        CHECK (status IN ('pending', 'confirmed', 'declined', 'superseded', 'expired')),
    created_at       DOUBLE PRECISION NOT NULL,
    expires_at       DOUBLE PRECISION NOT NULL,
    resolved_at      DOUBLE PRECISION,
    resolved_turn_id TEXT
);
CREATE INDEX confirmations_pending ON confirmations (session_id) WHERE status = 'pending';
