-- The GIN index of 0020 is on an expression the planner prices at next to nothing, so for a
-- term a few percent of the chunks have it chose to scan every chunk and build each one's
-- tsvector (100 ms and more a term at 10,000 chunks, bench/knowledge.py) over the index. The
-- same expression behind a function that says what it costs: the index is used, and a chunk's
-- tsvector is built only when it is stored. Not inlined (plpgsql), so its cost stands.
--
-- fastupdate off: a chunk's entries go into the index when it is stored, not into a pending
-- list every search reads until a vacuum merges it (right after 10,000 chunks were added, a
-- search's p50 was 12.7 ms with the list and 6.6 ms without; adding them took 11.1 s, not 8.3).
CREATE FUNCTION knowledge_lexemes(terms TEXT) RETURNS tsvector
    LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE COST 1000
    AS $$ BEGIN RETURN array_to_tsvector(string_to_array(terms, ' ')); END $$;

DROP INDEX knowledge_chunks_lexemes;

CREATE INDEX knowledge_chunks_lexemes ON knowledge_chunks USING gin (knowledge_lexemes(terms))
    WITH (fastupdate = off);
