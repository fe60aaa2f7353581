-- A session's messages by primary key: a turn reads only the messages added since the last
-- one it saw (app/conversation/history.py), a range on this index whatever the session's length.
CREATE INDEX messages_by_session_pk ON messages (session_id, pk);
