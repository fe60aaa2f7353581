-- A side-effecting call's real arguments, held while it runs and cleared when it ends.
-- Stored tool calls (messages.tool_calls) are masked; a turn resumed after a crash or a step
-- retry must run a call that may already have acted with the arguments it started with (and
-- so under the same idempotency key), never with masked ones.

ALTER TABLE tool_calls ADD COLUMN arguments TEXT;
