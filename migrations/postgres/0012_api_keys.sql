-- PostgreSQL mirror of migrations/0012_api_keys.sql (managed API keys, stored as salted,
-- peppered HMAC-SHA256 digests; see there).

CREATE TABLE api_keys (
    id           TEXT PRIMARY KEY,
    tenant_id    TEXT NOT NULL,
    role         TEXT NOT NULL CHECK (role IN ('customer', 'agent', 'operator', 'admin')),
    user_id      TEXT,
    name         TEXT NOT NULL DEFAULT '',
    salt         TEXT NOT NULL,
    digest       TEXT NOT NULL,
    created_by   TEXT NOT NULL,
    created_at   DOUBLE PRECISION NOT NULL,
    expires_at   DOUBLE PRECISION,
    last_used_at DOUBLE PRECISION,
    revoked_at   DOUBLE PRECISION,
    rotated_to   TEXT
);
CREATE INDEX api_keys_tenant ON api_keys (tenant_id, created_at);
