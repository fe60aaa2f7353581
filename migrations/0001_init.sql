-- Sessions, turns, messages, events and the per-session snapshot.
-- Times are Unix seconds (REAL). Every row that belongs to someone carries tenant_id.

CREATE TABLE sessions (
    id               TEXT PRIMARY KEY,
    tenant_id        TEXT NOT NULL,
    user_id          TEXT NOT NULL,
    status           TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'archived')),
    metadata         TEXT NOT NULL DEFAULT '{}',
    created_at       REAL NOT NULL,
    updated_at       REAL NOT NULL,
    last_activity_at REAL NOT NULL,
    archived_at      REAL,
    last_event_seq   INTEGER NOT NULL DEFAULT 0,
    turn_count       INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX sessions_by_tenant ON sessions (tenant_id, created_at DESC, id DESC);
CREATE INDEX sessions_by_user ON sessions (tenant_id, user_id, created_at DESC, id DESC);
CREATE INDEX sessions_idle ON sessions (status, last_activity_at);

CREATE TABLE turns (
    id                   TEXT PRIMARY KEY,
    session_id           TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    tenant_id            TEXT NOT NULL,
    number               INTEGER NOT NULL,
    client_message_id    TEXT,
    user_message_id      TEXT NOT NULL,
    status               TEXT NOT NULL
        CHECK (status IN ('queued', 'running', 'completed', 'failed')),
    assistant_message_id TEXT,
    error_code           TEXT,
    error_message        TEXT,
    accepted_seq         INTEGER NOT NULL,
    model                TEXT,
    rounds               INTEGER NOT NULL DEFAULT 0,
    prompt_tokens        INTEGER NOT NULL DEFAULT 0,
    completion_tokens    INTEGER NOT NULL DEFAULT 0,
    created_at           REAL NOT NULL,
    started_at           REAL,
    finished_at          REAL,
    UNIQUE (session_id, client_message_id)
);
CREATE INDEX turns_by_session ON turns (session_id, number);
CREATE INDEX turns_open ON turns (status) WHERE status IN ('queued', 'running');

CREATE TABLE messages (
    pk             INTEGER PRIMARY KEY,
    id             TEXT NOT NULL UNIQUE,
    session_id     TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    tenant_id      TEXT NOT NULL,
    turn_id        TEXT,
    turn_number    INTEGER NOT NULL DEFAULT 0,
    role           TEXT NOT NULL CHECK (role IN ('system', 'user', 'assistant', 'tool')),
    content        TEXT,
    tool_calls     TEXT,
    tool_call_id   TEXT,
    name           TEXT,
    token_estimate INTEGER NOT NULL DEFAULT 0,
    metadata       TEXT NOT NULL DEFAULT '{}',
    created_at     REAL NOT NULL
);
CREATE INDEX messages_by_session ON messages (session_id, turn_number, pk);

CREATE TABLE events (
    session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    seq        INTEGER NOT NULL,
    tenant_id  TEXT NOT NULL,
    turn_id    TEXT,
    type       TEXT NOT NULL,
    data       TEXT NOT NULL,
    created_at REAL NOT NULL,
    PRIMARY KEY (session_id, seq)
) WITHOUT ROWID;

CREATE TABLE session_snapshots (
    session_id         TEXT PRIMARY KEY REFERENCES sessions (id) ON DELETE CASCADE,
    tenant_id          TEXT NOT NULL,
    summary            TEXT NOT NULL DEFAULT '',
    summary_version    INTEGER NOT NULL DEFAULT 0,
    summarized_turns   INTEGER NOT NULL DEFAULT 0,
    active_goal        TEXT,
    state              TEXT NOT NULL DEFAULT '{}',
    pending_steps      TEXT NOT NULL DEFAULT '[]',
    completed_steps    TEXT NOT NULL DEFAULT '[]',
    updated_at         REAL NOT NULL
);
