-- The call centre's own documents (issue 27): one row per document of a tenant, its chunks,
-- and a full-text index over what the chunks say. Times are Unix seconds (REAL).
--
-- A document's identity in its tenant is its `source` (the file name for `hermes kb add`, the
-- source URL or else the title for the API): adding the same source again with the same
-- content hash changes nothing; with another hash, the row is updated to version + 1 and its
-- chunks replaced, in one transaction.

CREATE TABLE knowledge_documents (
    id           TEXT PRIMARY KEY,
    tenant_id    TEXT NOT NULL,
    source       TEXT NOT NULL,
    title        TEXT NOT NULL,
    language     TEXT NOT NULL,
    format       TEXT NOT NULL CHECK (format IN ('markdown', 'html', 'text', 'pdf')),
    tags         TEXT NOT NULL DEFAULT '[]',  -- a JSON list of strings
    source_url   TEXT,
    version      INTEGER NOT NULL DEFAULT 1,
    content_hash TEXT NOT NULL,
    valid_from   REAL,  -- not retrieved before
    valid_until  REAL,  -- not retrieved from
    trusted      INTEGER NOT NULL DEFAULT 0,  -- an admin vouched for it (the taint rule)
    created_by   TEXT NOT NULL,
    chunk_count  INTEGER NOT NULL DEFAULT 0,
    created_at   REAL NOT NULL,
    updated_at   REAL NOT NULL,
    UNIQUE (tenant_id, source)
);
CREATE INDEX knowledge_documents_by_tenant ON knowledge_documents (tenant_id, created_at, id);

-- `terms` is what app/knowledge/analysis.py makes of the chunk's title, section and text: the
-- units the scorer compares (Latin word stems, Chinese character bigrams), space separated.
-- Both engines index the same units, so both find the same candidates.
CREATE TABLE knowledge_chunks (
    pk              INTEGER PRIMARY KEY,
    id              TEXT NOT NULL UNIQUE,
    document_id     TEXT NOT NULL REFERENCES knowledge_documents (id) ON DELETE CASCADE,
    tenant_id       TEXT NOT NULL,
    ordinal         INTEGER NOT NULL,
    section         TEXT NOT NULL,  -- the section path, "Returns › Shipping costs"
    text            TEXT NOT NULL,
    terms           TEXT NOT NULL,
    embedding       BLOB,  -- float32, unit length, when an embedding model is configured
    embedding_model TEXT
);
CREATE INDEX knowledge_chunks_by_document ON knowledge_chunks (document_id, ordinal);

-- External-content index over knowledge_chunks.terms; the triggers keep it in step, inside the
-- transaction that changes the chunk. The units are already cut (a Chinese bigram is one
-- token), so unicode61 only splits them on the spaces: the trigram tokenizer could not match
-- a two-character Chinese word, and most Chinese words have two characters.
CREATE VIRTUAL TABLE knowledge_fts USING fts5 (
    terms,
    content = 'knowledge_chunks',
    content_rowid = 'pk',
    tokenize = 'unicode61 remove_diacritics 0'
);

CREATE TRIGGER knowledge_chunks_fts_insert AFTER INSERT ON knowledge_chunks BEGIN
    INSERT INTO knowledge_fts (rowid, terms) VALUES (new.pk, new.terms);
END;

CREATE TRIGGER knowledge_chunks_fts_delete AFTER DELETE ON knowledge_chunks BEGIN
    INSERT INTO knowledge_fts (knowledge_fts, rowid, terms) VALUES ('delete', old.pk, old.terms);
END;
