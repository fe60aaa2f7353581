-- PostgreSQL mirror of migrations/0011_handoffs.sql (handoffs to a human agent, contact
-- summaries; see there).

CREATE TABLE handoffs (
    id           TEXT PRIMARY KEY,
    session_id   TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    tenant_id    TEXT NOT NULL,
    status       TEXT NOT NULL
        CHECK (status IN ('waiting', 'claimed', 'released', 'expired', 'closed')),
    reason       TEXT NOT NULL DEFAULT '',
    language     TEXT NOT NULL DEFAULT '',
    requested_by TEXT NOT NULL,
    requested_at DOUBLE PRECISION NOT NULL,
    claimed_by   TEXT,
    claimed_at   DOUBLE PRECISION,
    released_at  DOUBLE PRECISION,
    ticket_id    TEXT
);
CREATE UNIQUE INDEX handoffs_open ON handoffs (session_id) WHERE status IN ('waiting', 'claimed');
CREATE INDEX handoffs_queue ON handoffs (tenant_id, status, requested_at);

-- The last contact summary of a session (a resumed session that ends again replaces it).
CREATE TABLE session_summaries (
    session_id  TEXT PRIMARY KEY REFERENCES sessions (id) ON DELETE CASCADE,
    tenant_id   TEXT NOT NULL,
    ended_by    TEXT NOT NULL,
    disposition TEXT NOT NULL,
    body        TEXT NOT NULL,
    created_at  DOUBLE PRECISION NOT NULL
);
