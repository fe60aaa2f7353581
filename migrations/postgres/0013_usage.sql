-- PostgreSQL mirror of migrations/0013_usage.sql (token and cost usage for budgets; see there).

ALTER TABLE sessions ADD COLUMN used_tokens BIGINT NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN used_cost DOUBLE PRECISION NOT NULL DEFAULT 0;

CREATE TABLE tenant_usage (
    tenant_id TEXT NOT NULL,
    day       TEXT NOT NULL,
    tokens    BIGINT NOT NULL DEFAULT 0,
    cost      DOUBLE PRECISION NOT NULL DEFAULT 0,
    turns     BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant_id, day)
);
