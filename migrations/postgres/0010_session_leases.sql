-- PostgreSQL mirror of migrations/0010_session_leases.sql (one owner per session; see there).

CREATE TABLE session_leases (
    session_id TEXT PRIMARY KEY REFERENCES sessions (id) ON DELETE CASCADE,
    owner      TEXT NOT NULL,
    token      BIGINT NOT NULL,
    expires_at DOUBLE PRECISION NOT NULL
);
CREATE INDEX session_leases_by_owner ON session_leases (owner);
