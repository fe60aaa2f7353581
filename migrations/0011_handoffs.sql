-- People in the loop: a session waiting for (or held by) a human agent, and the contact summary
-- written when a session ends. A session has at most one open handoff (waiting or claimed);
-- closed ones stay as its history (released, expired: the fallback ticket, closed with it).

CREATE TABLE handoffs (
    id           TEXT PRIMARY KEY,
    session_id   TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    tenant_id    TEXT NOT NULL,
    status       TEXT NOT NULL
        CHECK (status IN ('waiting', 'claimed', 'released', 'expired', 'closed')),
    reason       TEXT NOT NULL DEFAULT '',
    language     TEXT NOT NULL DEFAULT '',
    requested_by TEXT NOT NULL,
    requested_at REAL NOT NULL,
    claimed_by   TEXT,
    claimed_at   REAL,
    released_at  REAL,
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
    created_at  REAL NOT NULL
);
