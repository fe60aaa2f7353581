-- A cancel asked of a turn that runs in another Hermes process (`POST /v1/sessions/{id}/cancel`
-- answered by a process that does not hold the session's lease): recorded on the turn, found by
-- the process that runs it (told at once through Redis, else within a lease sweep) and ended
-- there as a local cancel ends it. The request belongs to its turn: a turn that ends any other
-- way (completed, failed, `interrupted` by a takeover) leaves the index, and a turn reopened to
-- resume from a step starts without one. Unset (NULL) on every turn nobody asked to cancel.

ALTER TABLE turns ADD COLUMN cancel_requested_at REAL;
CREATE INDEX turns_cancel_requested ON turns (session_id)
    WHERE cancel_requested_at IS NOT NULL AND status = 'running';
