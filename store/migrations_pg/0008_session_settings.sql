-- 0008 (PostgreSQL dialect of migrations/0008): each session's own approvals
-- mode (manual | strict | off), set by session.update (the ACP bridge's mode
-- picker). NULL: the configured approvals.mode.
ALTER TABLE sessions ADD COLUMN approval_mode TEXT CHECK (approval_mode IN ('manual','strict','off'));
