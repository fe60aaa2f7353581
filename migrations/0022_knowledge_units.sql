-- How many of a tenant's chunks have each unit (issue 27, point 13): the document frequency
-- knowledge search weighs a question's terms by, known before any chunk is fetched, so the
-- candidate query can rank chunks by the scorer's own weights (app/knowledge/store.py) instead
-- of ranking every chunk that shares any unit. The row with the empty unit counts the chunks.
-- Kept in the transaction that adds, replaces or deletes the chunks (store.save, store.delete).

CREATE TABLE knowledge_units (
    tenant_id TEXT NOT NULL,
    unit      TEXT NOT NULL,
    df        INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, unit)
) WITHOUT ROWID;

-- The chunks already stored: their `terms` are distinct units, space separated, and a unit is
-- a run of [a-z0-9] or Han characters (app/knowledge/analysis.py), so it needs no JSON escape.
INSERT INTO knowledge_units (tenant_id, unit, df)
SELECT c.tenant_id, u.value, count(*)
FROM knowledge_chunks c, json_each('["' || replace(c.terms, ' ', '","') || '"]') u
WHERE u.value <> ''
GROUP BY c.tenant_id, u.value;

INSERT INTO knowledge_units (tenant_id, unit, df)
SELECT tenant_id, '', count(*) FROM knowledge_chunks GROUP BY tenant_id;
