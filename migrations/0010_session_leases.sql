-- One owner per session: the process that holds a session's lease is the only one that runs its
-- turns. `owner` names the process (host:pid:random); `token` grows by one each time the lease
-- changes hands (a fencing token: every write of a turn checks it in its own transaction, so an
-- owner that was taken over can never write again); `expires_at` (Unix seconds) is pushed on
-- while the owner lives, and set to 0 when it lets go. A released row is kept, not deleted, so
-- the token never goes back.

CREATE TABLE session_leases (
    session_id TEXT PRIMARY KEY REFERENCES sessions (id) ON DELETE CASCADE,
    owner      TEXT NOT NULL,
    token      INTEGER NOT NULL,
    expires_at REAL NOT NULL
);
CREATE INDEX session_leases_by_owner ON session_leases (owner);
