-- 0002 (PostgreSQL dialect of migrations/0002): each session's sandbox, frozen at creation: JSON of
-- {"mode", "network", "writable_roots"} (package sandbox's Policy). NULL
-- for sessions created before this migration: they take the configured
-- sandbox of the daemon that runs them.
ALTER TABLE sessions ADD COLUMN sandbox TEXT;
