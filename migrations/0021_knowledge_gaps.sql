-- What the knowledge base could not answer (issue 27, point 10), counted per tenant so an
-- operator sees which documents to write next: a question no passage passed the threshold for
-- (reason 'no_answer'), or a customer's question a human agent answered after a handoff
-- (reason 'human'). `question` is masked like every stored message; `key` is a hash of its
-- normalised text, so the same question asked again counts once more instead of adding a row.

CREATE TABLE knowledge_gaps (
    tenant_id     TEXT NOT NULL,
    key           TEXT NOT NULL,
    reason        TEXT NOT NULL CHECK (reason IN ('no_answer', 'human')),
    question      TEXT NOT NULL,
    count         INTEGER NOT NULL DEFAULT 1,
    first_seen_at REAL NOT NULL,
    last_seen_at  REAL NOT NULL,
    PRIMARY KEY (tenant_id, key, reason)
);
CREATE INDEX knowledge_gaps_by_count ON knowledge_gaps (tenant_id, count DESC, last_seen_at DESC);
