-- PostgreSQL mirror of migrations/0022_knowledge_units.sql (types as described in 0001_init.sql).

CREATE TABLE knowledge_units (
    tenant_id TEXT NOT NULL,
    unit      TEXT NOT NULL,
    df        BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, unit)
);

INSERT INTO knowledge_units (tenant_id, unit, df)
SELECT c.tenant_id, u, count(*)
FROM knowledge_chunks c, unnest(string_to_array(c.terms, ' ')) AS u
WHERE u <> ''
GROUP BY c.tenant_id, u;

INSERT INTO knowledge_units (tenant_id, unit, df)
SELECT tenant_id, '', count(*) FROM knowledge_chunks GROUP BY tenant_id;
