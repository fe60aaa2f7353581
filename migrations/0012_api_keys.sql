-- Managed API keys (`hermes keys create`, `POST /v1/keys`). The secret itself is never stored:
-- `digest` (hex) is HMAC-SHA256 over the key's own random salt and its secret, keyed with the server's
-- pepper (HERMES_KEY_PEPPER; empty when unset). A key is looked up by its public id, the part
-- of the key before its secret, then compared in constant time (app.api.keys).

CREATE TABLE api_keys (
    id           TEXT PRIMARY KEY,
    tenant_id    TEXT NOT NULL,
    role         TEXT NOT NULL CHECK (role IN ('customer', 'agent', 'operator', 'admin')),
    user_id      TEXT,
    name         TEXT NOT NULL DEFAULT '',
    salt         TEXT NOT NULL,
    digest       TEXT NOT NULL,
    created_by   TEXT NOT NULL,
    created_at   REAL NOT NULL,
    expires_at   REAL,
    last_used_at REAL,
    revoked_at   REAL,
    rotated_to   TEXT
);
CREATE INDEX api_keys_tenant ON api_keys (tenant_id, created_at);
