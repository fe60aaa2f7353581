-- PostgreSQL mirror of migrations/0021_knowledge_gaps.sql (types as described in 0001_init.sql).

CREATE TABLE knowledge_gaps (
    tenant_id     TEXT NOT NULL,
    key           TEXT NOT NULL,
    reason        TEXT NOT NULL CHECK (reason IN ('no_answer', 'human')),
    question      TEXT NOT NULL,
    count         BIGINT NOT NULL DEFAULT 1,
    first_seen_at DOUBLE PRECISION NOT NULL,
    last_seen_at  DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (tenant_id, key, reason)
);
CREATE INDEX knowledge_gaps_by_count ON knowledge_gaps (tenant_id, count DESC, last_seen_at DESC);
