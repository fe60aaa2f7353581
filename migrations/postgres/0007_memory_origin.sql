-- PostgreSQL mirror of migrations/0007_memory_origin.sql (types as described in 0001_init.sql).
-- Where a memory's value came from, for the trust model (DESIGN "Trust model", point 5):
--   customer_text  free text taken from a conversation: untrusted content for a turn
--   structured     a value from a closed vocabulary or of a strict shape
--   operator       entered by an operator through the REST API
-- Rows written before this migration keep NULL and are classified by the same rules when
-- they are read (app/memory/origin.py).
ALTER TABLE memories ADD COLUMN origin TEXT
    CHECK (origin IS NULL OR origin IN ('customer_text', 'structured', 'operator'));
