-- Where a memory's value came from, for the trust model (DESIGN "Trust model", point 5):
--   customer_text  free text taken from a conversation (a "remember this" note, a preference
--                  or decision in the customer's own words): untrusted content for a turn
--   structured     a value from a closed vocabulary or of a strict shape (channel = email,
--                  a phone number matched by pattern, a tool-verified address)
--   operator       entered by an operator through the REST API
-- Rows written before this migration keep NULL and are classified by the same rules when
-- they are read (app/memory/origin.py), so old free-text notes are untrusted too.
ALTER TABLE memories ADD COLUMN origin TEXT
    CHECK (origin IS NULL OR origin IN ('customer_text', 'structured', 'operator'));
