-- Desk sign-ins (`POST /v1/desk/login`), kept server-side so that signing out, or the end of
-- the credential signed in with, ends them at once on every process. The cookie is
-- `<id>.<secret>`; only `digest`, SHA-256 of the secret (hex), is stored, never the cookie.
-- `expires_at` is the earlier of HERMES_DESK_SESSION_TTL_S after sign-in and the credential's
-- own expiry (a managed key's, a JWT's `exp`); expired rows go with the retention purge.

CREATE TABLE desk_sessions (
    id         TEXT PRIMARY KEY,
    tenant_id  TEXT NOT NULL,
    role       TEXT NOT NULL CHECK (role IN ('agent', 'operator', 'admin')),
    subject    TEXT NOT NULL,
    user_id    TEXT,
    digest     TEXT NOT NULL,
    created_at REAL NOT NULL,
    expires_at REAL NOT NULL
);
CREATE INDEX desk_sessions_expiry ON desk_sessions (expires_at);
