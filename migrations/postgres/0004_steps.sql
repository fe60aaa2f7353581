-- PostgreSQL mirror of migrations/0004_steps.sql (types as described in 0001_init.sql).
-- The step machine: every action of a turn is a persisted, traced step.

CREATE TABLE steps (
    id                     TEXT PRIMARY KEY,
    tenant_id              TEXT NOT NULL,
    session_id             TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    turn_id                TEXT NOT NULL,
    key                    TEXT NOT NULL,
    seq                    BIGINT NOT NULL,
    parent_id              TEXT,
    action_type            TEXT NOT NULL CHECK (action_type IN
        ('call_tool', 'generate_response', 'ask_user', 'wait_for_event', 'batch')),
    name                   TEXT NOT NULL,
    input_context          TEXT NOT NULL DEFAULT '{}',
    expected_output_schema TEXT,
    status                 TEXT NOT NULL CHECK (status IN
        ('queued', 'running', 'succeeded', 'failed', 'timed_out', 'stuck', 'skipped')),
    attempts               BIGINT NOT NULL DEFAULT 0,
    result                 TEXT,
    error                  TEXT,
    model                  TEXT,
    input_tokens           BIGINT,
    output_tokens          BIGINT,
    tool_duration_ms       DOUBLE PRECISION,
    validation             TEXT,
    created_at             DOUBLE PRECISION NOT NULL,
    started_at             DOUBLE PRECISION,
    finished_at            DOUBLE PRECISION,
    deadline_at            DOUBLE PRECISION,
    UNIQUE (turn_id, key)
);
CREATE INDEX steps_by_session ON steps (session_id, created_at, seq);
CREATE INDEX steps_open ON steps (status, started_at) WHERE status IN ('queued', 'running');

ALTER TABLE turns ADD COLUMN resume_from_step TEXT;
