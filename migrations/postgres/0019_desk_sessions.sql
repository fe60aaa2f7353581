-- PostgreSQL mirror of migrations/0019_desk_sessions.sql (desk sign-ins kept server-side, the
-- cookie's secret only as a digest; see there).

CREATE TABLE desk_sessions (
    id         TEXT PRIMARY KEY,
    tenant_id  TEXT NOT NULL,
    role       TEXT NOT NULL CHECK (role IN ('agent', 'operator', 'admin')),
    subject    TEXT NOT NULL,
    user_id    TEXT,
    digest     TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    expires_at DOUBLE PRECISION NOT NULL
);
CREATE INDEX desk_sessions_expiry ON desk_sessions (expires_at);
