-- Events keyed by small integers (issue 16, bytes per turn): a row carried its session id
-- (28 bytes of text), its tenant id and its turn id (29 bytes) before its payload, and its
-- primary key repeated the session id. Now it carries the session's integer key and the turn's
-- number in the session (turns.number, found by turns_by_session); the tenant is the session's.
-- Readers join sessions (and turns) and see the same ids as before (app/storage/events.py).

-- A session's key: an explicit column, not the rowid (VACUUM may renumber a rowid that is not
-- an INTEGER PRIMARY KEY). Existing sessions take their rowid. A new session inserted without
-- one (0, the column's default: ALTER TABLE can add a NOT NULL column only with a default)
-- takes the next one, from the trigger; a key freed by deleting the newest session may be
-- taken again, which is harmless: the session's events went with it.
ALTER TABLE sessions ADD COLUMN session_key INTEGER NOT NULL DEFAULT 0;
UPDATE sessions SET session_key = rowid;
CREATE UNIQUE INDEX sessions_by_key ON sessions (session_key);
CREATE TRIGGER sessions_key AFTER INSERT ON sessions WHEN NEW.session_key = 0
BEGIN
    UPDATE sessions SET session_key = (SELECT MAX(session_key) + 1 FROM sessions)
    WHERE id = NEW.id;
END;

CREATE TABLE events_keyed (
    session_key INTEGER NOT NULL REFERENCES sessions (session_key) ON DELETE CASCADE,
    seq         INTEGER NOT NULL,
    turn_number INTEGER,
    type        TEXT NOT NULL,
    data        TEXT NOT NULL,
    created_at  REAL NOT NULL,
    PRIMARY KEY (session_key, seq)
) WITHOUT ROWID;

-- A row whose turn is not in turns (none should be) keeps its turn id in front of its payload,
-- where a reader finds it, so nothing is lost.
INSERT INTO events_keyed (session_key, seq, turn_number, type, data, created_at)
SELECT s.session_key, e.seq, t.number, e.type,
       CASE
           WHEN e.turn_id IS NOT NULL AND t.number IS NULL
                AND json_extract(e.data, '$.turn_id') IS NULL
           THEN '{"turn_id":' || json_quote(e.turn_id)
                || CASE WHEN e.data = '{}' THEN '}' ELSE ',' || substr(e.data, 2) END
           ELSE e.data
       END,
       e.created_at
FROM events e
JOIN sessions s ON s.id = e.session_id
LEFT JOIN turns t ON t.id = e.turn_id AND t.session_id = e.session_id;

DROP TABLE events;
ALTER TABLE events_keyed RENAME TO events;
