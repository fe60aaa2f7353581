-- PostgreSQL mirror of migrations/0018_cancel_requests.sql (a cancel asked of a turn another
-- process runs, recorded on the turn; see there).

ALTER TABLE turns ADD COLUMN cancel_requested_at DOUBLE PRECISION;
CREATE INDEX turns_cancel_requested ON turns (session_id)
    WHERE cancel_requested_at IS NOT NULL AND status = 'running';
