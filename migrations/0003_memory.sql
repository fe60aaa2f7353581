-- Per-user memory: mid-term facts (key -> value) and long-term knowledge nodes in one table,
-- their change history, a content-free audit of deletions, and a trigram FTS5 index.
-- Times are Unix seconds (REAL). Every row carries tenant_id and user_id.

-- One row per (tenant, user) that has memories. Its id gives the user a private range of
-- memory primary keys, [id << 24, (id + 1) << 24): the full-text index is then searched
-- with a rowid range and never walks other users' postings.
CREATE TABLE memory_owners (
    id        INTEGER PRIMARY KEY,
    tenant_id TEXT NOT NULL,
    user_id   TEXT NOT NULL,
    next_seq  INTEGER NOT NULL DEFAULT 1,
    UNIQUE (tenant_id, user_id)
);

CREATE TABLE memories (
    pk                  INTEGER PRIMARY KEY,
    id                  TEXT NOT NULL UNIQUE,
    tenant_id           TEXT NOT NULL,
    user_id             TEXT NOT NULL,
    tier                TEXT NOT NULL CHECK (tier IN ('fact', 'node')),
    key                 TEXT NOT NULL,
    value               TEXT NOT NULL,
    entity              TEXT,
    fact_type           TEXT NOT NULL,
    search_text         TEXT NOT NULL,
    confidence          REAL NOT NULL CHECK (confidence >= 0 AND confidence <= 1),
    status              TEXT NOT NULL
        CHECK (status IN ('active', 'pending', 'archived', 'rejected')),
    source              TEXT NOT NULL
        CHECK (source IN ('user', 'tool', 'operator', 'model', 'rule')),
    source_session_id   TEXT,
    valid_until         REAL,
    decay_at            REAL,
    created_at          REAL NOT NULL,
    updated_at          REAL NOT NULL,
    last_confirmed_at   REAL NOT NULL,
    last_accessed_at    REAL,
    last_ref_session_id TEXT,
    last_ref_at         REAL,
    embedding           BLOB,
    embedding_model     TEXT
);
-- The current value of a key: at most one active-or-archived row per (tenant, user, key).
-- Pending proposals and rejected rows live beside it until verified or purged.
CREATE UNIQUE INDEX memories_current_key ON memories (tenant_id, user_id, key)
    WHERE status IN ('active', 'archived');
CREATE INDEX memories_by_key ON memories (tenant_id, user_id, key, status);
CREATE INDEX memories_by_entity ON memories (tenant_id, user_id, entity) WHERE entity IS NOT NULL;
CREATE INDEX memories_by_type ON memories (tenant_id, user_id, fact_type, updated_at);
CREATE INDEX memories_by_time ON memories (tenant_id, user_id, updated_at);
CREATE INDEX memories_by_session_ref ON memories (last_ref_session_id, last_ref_at)
    WHERE last_ref_session_id IS NOT NULL;
-- The sweeper's work lists: what decays or expires next, what is old enough to purge.
CREATE INDEX memories_decay ON memories (decay_at) WHERE status = 'active';
CREATE INDEX memories_expiry ON memories (valid_until) WHERE status = 'active';
CREATE INDEX memories_by_status_age ON memories (status, updated_at);

CREATE TABLE memory_history (
    id          INTEGER PRIMARY KEY,
    memory_pk   INTEGER NOT NULL REFERENCES memories (pk) ON DELETE CASCADE,
    tenant_id   TEXT NOT NULL,
    user_id     TEXT NOT NULL,
    action      TEXT NOT NULL,
    old_value   TEXT,
    new_value   TEXT,
    old_status  TEXT,
    new_status  TEXT,
    confidence  REAL,
    source      TEXT,
    actor       TEXT,
    session_id  TEXT,
    reason      TEXT,
    at          REAL NOT NULL
);
CREATE INDEX memory_history_by_memory ON memory_history (memory_pk, id);

-- Deletions keep no content: which memory, a hash of its key, who, when and why.
CREATE TABLE memory_audit (
    id        INTEGER PRIMARY KEY,
    tenant_id TEXT NOT NULL,
    user_id   TEXT NOT NULL,
    memory_id TEXT NOT NULL,
    key_hash  TEXT NOT NULL,
    action    TEXT NOT NULL CHECK (action IN ('deleted', 'forgotten', 'purged')),
    actor     TEXT NOT NULL,
    reason    TEXT NOT NULL,
    at        REAL NOT NULL
);
CREATE INDEX memory_audit_by_user ON memory_audit (tenant_id, user_id, at);

-- External-content index over memories.search_text; the triggers keep it in step.
CREATE VIRTUAL TABLE memory_fts USING fts5 (
    search_text,
    content = 'memories',
    content_rowid = 'pk',
    tokenize = 'trigram'
);

CREATE TRIGGER memories_fts_insert AFTER INSERT ON memories BEGIN
    INSERT INTO memory_fts (rowid, search_text) VALUES (new.pk, new.search_text);
END;

CREATE TRIGGER memories_fts_delete AFTER DELETE ON memories BEGIN
    INSERT INTO memory_fts (memory_fts, rowid, search_text)
        VALUES ('delete', old.pk, old.search_text);
END;

CREATE TRIGGER memories_fts_update AFTER UPDATE OF search_text ON memories BEGIN
    INSERT INTO memory_fts (memory_fts, rowid, search_text)
        VALUES ('delete', old.pk, old.search_text);
    INSERT INTO memory_fts (rowid, search_text) VALUES (new.pk, new.search_text);
END;
