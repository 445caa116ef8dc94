-- 0001: the initial schema, PostgreSQL dialect of migrations/0001_init.sql:
-- the same tables, columns, CHECK constraints and indexes. INTEGER is
-- BIGINT (SQLite's integers are 64-bit), AUTOINCREMENT is BIGINT GENERATED
-- ALWAYS AS IDENTITY, timestamps stay TEXT (RFC 3339 UTC, fixed width).

-- One row per daemon start; epoch is the boot_epoch of the descriptor.
CREATE TABLE boot_epochs (
    epoch      BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    pid        BIGINT  NOT NULL,
    version    TEXT    NOT NULL,
    started_at TEXT    NOT NULL,
    stopped_at TEXT,
    clean_stop BIGINT  NOT NULL DEFAULT 0 CHECK (clean_stop IN (0, 1))
);

CREATE TABLE sessions (
    session_id           TEXT PRIMARY KEY,
    title                TEXT    NOT NULL DEFAULT '',
    cwd                  TEXT    NOT NULL,
    model                TEXT    NOT NULL,
    provider             TEXT    NOT NULL,
    base_url             TEXT    NOT NULL,
    toolsets             TEXT    NOT NULL,          -- JSON array of toolset names
    source               TEXT    NOT NULL DEFAULT '',
    create_request_id    TEXT UNIQUE,               -- session.create idempotency key
    create_digest        TEXT,                      -- digest of the create params
    created_at           TEXT    NOT NULL,
    execution_generation BIGINT  NOT NULL DEFAULT 0 CHECK (execution_generation >= 0),
    next_admission_seq   BIGINT  NOT NULL DEFAULT 1,
    last_event_seq       BIGINT  NOT NULL DEFAULT 0
);
CREATE INDEX sessions_by_created ON sessions (created_at, session_id);

CREATE TABLE session_admissions (
    admission_id         TEXT PRIMARY KEY,
    target_session_id    TEXT    NOT NULL REFERENCES sessions (session_id) ON DELETE CASCADE,
    request_id           TEXT    NOT NULL,          -- the client's input_id
    seq                  BIGINT  NOT NULL CHECK (seq > 0),
    status               TEXT    NOT NULL CHECK (status IN ('queued', 'started', 'unknown', 'terminal')),
    outcome              TEXT CHECK (outcome IN ('completed', 'interrupted', 'failed', 'cancelled')),
    execution_generation BIGINT,
    owner_epoch          BIGINT,
    text                 TEXT    NOT NULL,
    attachments          TEXT,                      -- JSON array, NULL when none
    payload_digest       TEXT    NOT NULL,          -- sha256 of text and attachments
    error                TEXT,                      -- why a turn failed
    created_at           TEXT    NOT NULL,
    started_at           TEXT,
    settled_at           TEXT,
    UNIQUE (target_session_id, request_id),
    UNIQUE (target_session_id, seq),
    CHECK ((status = 'terminal') = (outcome IS NOT NULL)),
    CHECK (status NOT IN ('started', 'unknown') OR (execution_generation IS NOT NULL AND owner_epoch IS NOT NULL))
);
-- Non-terminal rows only, so FIFO work never scans a session's history.
CREATE INDEX session_admissions_open ON session_admissions (target_session_id, seq)
    WHERE status <> 'terminal';
CREATE INDEX session_admissions_open_status ON session_admissions (status, target_session_id, seq)
    WHERE status <> 'terminal';

-- The transcript. role 'boundary' rows close a lost turn and are never sent as-is.
CREATE TABLE messages (
    id           BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    session_id   TEXT NOT NULL REFERENCES sessions (session_id) ON DELETE CASCADE,
    admission_id TEXT,
    role         TEXT NOT NULL CHECK (role IN ('user', 'assistant', 'tool', 'boundary')),
    content      TEXT NOT NULL,
    tool_calls   TEXT,                              -- JSON array of {id, name, arguments}
    tool_call_id TEXT,
    kind         TEXT,                              -- e.g. 'synthetic' for repair results
    created_at   TEXT NOT NULL
);
CREATE INDEX messages_by_session ON messages (session_id, id);

-- Approval and clarify prompts, fenced by execution generation.
CREATE TABLE prompts (
    prompt_id            TEXT PRIMARY KEY,
    session_id           TEXT    NOT NULL REFERENCES sessions (session_id) ON DELETE CASCADE,
    admission_id         TEXT    NOT NULL,
    execution_generation BIGINT  NOT NULL,
    owner_epoch          BIGINT  NOT NULL,
    kind                 TEXT    NOT NULL CHECK (kind IN ('approval', 'clarify')),
    payload              TEXT    NOT NULL,          -- JSON
    status               TEXT    NOT NULL CHECK (status IN ('open', 'closed')),
    resolution           TEXT CHECK (resolution IN ('answered', 'timed_out', 'interrupted', 'fenced')),
    response             TEXT,                      -- JSON answer
    created_at           TEXT    NOT NULL,
    expires_at           TEXT,
    closed_at            TEXT,
    CHECK ((status = 'closed') = (resolution IS NOT NULL))
);
CREATE INDEX prompts_open ON prompts (session_id) WHERE status = 'open';

-- Durable session events; seq is per session and gap-free while retained.
CREATE TABLE events (
    session_id           TEXT    NOT NULL REFERENCES sessions (session_id) ON DELETE CASCADE,
    seq                  BIGINT  NOT NULL,
    type                 TEXT    NOT NULL,
    admission_id         TEXT,
    execution_generation BIGINT,
    payload              TEXT    NOT NULL,
    created_at           TEXT    NOT NULL,
    PRIMARY KEY (session_id, seq)
);

-- Approvals: 'always' patterns for every session, 'session' patterns for one.
CREATE TABLE approval_allowlist (
    pattern           TEXT PRIMARY KEY,
    created_at        TEXT NOT NULL,
    source_session_id TEXT
);
CREATE TABLE session_approvals (
    session_id TEXT NOT NULL REFERENCES sessions (session_id) ON DELETE CASCADE,
    pattern    TEXT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (session_id, pattern)
);
