-- Token and cost usage, for budgets (HERMES_BUDGET_*). A turn adds what its model calls used
-- in the transaction that ends it: to its session's row (per-session caps) and to its tenant's
-- row of the day (UTC, 'YYYY-MM-DD'; per-tenant daily caps). The database is the store every
-- process shares, so the counts hold across processes. Cost is in the unit of the prices
-- (USD for LiteLLM's price map).

ALTER TABLE sessions ADD COLUMN used_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN used_cost REAL NOT NULL DEFAULT 0;

CREATE TABLE tenant_usage (
    tenant_id TEXT NOT NULL,
    day       TEXT NOT NULL,
    tokens    INTEGER NOT NULL DEFAULT 0,
    cost      REAL NOT NULL DEFAULT 0,
    turns     INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant_id, day)
);
