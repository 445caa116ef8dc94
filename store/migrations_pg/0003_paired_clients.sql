-- 0003: paired clients (issue 18); PostgreSQL dialect of migrations/0003. A client is a device or person paired
-- with `sessionctl pair`; it holds a token of its own. Only SHA-256 hashes
-- of tokens and pairing codes are stored, never the secrets themselves.
CREATE TABLE clients (
    client_id        TEXT PRIMARY KEY,                  -- "cli_<uuid>"
    label            TEXT    NOT NULL,
    token_hash       TEXT    NOT NULL UNIQUE,           -- hex sha256 of the token
    scope_session_id TEXT,                              -- NULL: every session
    read_only        BIGINT  NOT NULL DEFAULT 0 CHECK (read_only IN (0, 1)),
    created_at       TEXT    NOT NULL,
    last_used_at     TEXT,
    revoked_at       TEXT
);

-- One-time pairing codes; used_at and client_id are set when a code is
-- redeemed. Expired and used codes are refused.
CREATE TABLE pairing_codes (
    code_hash        TEXT PRIMARY KEY,                  -- hex sha256 of the code
    label            TEXT    NOT NULL DEFAULT '',
    scope_session_id TEXT,
    read_only        BIGINT  NOT NULL DEFAULT 0 CHECK (read_only IN (0, 1)),
    created_at       TEXT    NOT NULL,
    expires_at       TEXT    NOT NULL,
    used_at          TEXT,
    client_id        TEXT
);

-- Attribution: who admitted an input and who resolved it after a crash,
-- as JSON {"id", "label", "client", "version"} (id "owner" for the daemon
-- token, else a client_id). NULL for rows older than this migration.
ALTER TABLE session_admissions ADD COLUMN sender TEXT;
ALTER TABLE session_admissions ADD COLUMN resolved_by TEXT;
