-- 0007: each session's MCP servers, frozen at creation (PROTOCOL.md 10.1):
-- JSON array of {"name", "command"?, "args"?, "env"?, "cwd"?, "url"?,
-- "headers"?, "network"?, "auto_approve"?, "source": "config"|"session"}
-- (package tools/mcp's Server): config.yaml's servers at that time, then
-- the session's own. NULL for sessions created before this migration: they
-- take the configured servers of the daemon that runs them.
ALTER TABLE sessions ADD COLUMN mcp_servers TEXT;
