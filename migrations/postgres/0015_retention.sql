-- PostgreSQL mirror of migrations/0015_retention.sql.
-- Retention (HERMES_RETENTION_*, app/storage/retention.py): the purge finds finished sessions
-- in the order they were archived, and deletes each one's rows by session in small batches.
-- A session's rows in tool_calls, confirmations and handoffs had no index by session, so a
-- delete by session (the purge's, and the ON DELETE CASCADE of `DELETE /v1/sessions/{id}`)
-- read the whole table; now it reads the session's rows only.

CREATE INDEX sessions_archived ON sessions (archived_at, id) WHERE status = 'archived';
CREATE INDEX tool_calls_by_session ON tool_calls (session_id);
CREATE INDEX confirmations_by_session ON confirmations (session_id);
CREATE INDEX handoffs_by_session ON handoffs (session_id);

-- How far each rule has got through the archived sessions: (archived_at, session id) of the
-- last session it finished with, so a run starts where the last one stopped.
CREATE TABLE retention_marks (
    rule        TEXT PRIMARY KEY,
    archived_at DOUBLE PRECISION NOT NULL,
    session_id  TEXT NOT NULL
);
