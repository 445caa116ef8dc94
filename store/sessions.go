package store

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
)

// Session is one sessions row (PROTOCOL.md section 9; the ownership
// columns are package admission's and not read here).
type Session struct {
	SessionID           string         `db:"session_id"`
	Title               string         `db:"title"`
	Cwd                 string         `db:"cwd"`
	Model               string         `db:"model"`
	Provider            string         `db:"provider"`
	BaseURL             string         `db:"base_url"`
	Toolsets            string         `db:"toolsets"` // JSON array of toolset names
	Source              string         `db:"source"`
	CreateRequestID     sql.NullString `db:"create_request_id"`
	CreateDigest        sql.NullString `db:"create_digest"`
	CreatedAt           string         `db:"created_at"`
	ExecutionGeneration int64          `db:"execution_generation"`
	NextAdmissionSeq    int64          `db:"next_admission_seq"`
	LastEventSeq        int64          `db:"last_event_seq"`
	Sandbox             sql.NullString `db:"sandbox"`       // JSON sandbox.Policy, NULL for sessions older than 0002
	ApprovalMode        sql.NullString `db:"approval_mode"` // manual | strict | off; NULL: the configured approvals.mode (0008)
	// MCPServers is the JSON array of the session's MCP servers (package
	// tools/mcp's Server), NULL for sessions older than 0007.
	MCPServers sql.NullString `db:"mcp_servers"`
}

const sessionColumns = `session_id, title, cwd, model, provider, base_url, toolsets, source, create_request_id,
	create_digest, created_at, execution_generation, next_admission_seq, last_event_seq, sandbox, approval_mode, mcp_servers`

// ToolsetNames decodes Toolsets; never nil.
func (s Session) ToolsetNames() []string {
	var ts []string
	json.Unmarshal([]byte(s.Toolsets), &ts)
	if ts == nil {
		ts = []string{}
	}
	return ts
}

// GetSession reads session id; sql.ErrNoRows when there is none.
func GetSession(q Queryer, id string) (Session, error) {
	var s Session
	err := q.Get(&s, `SELECT `+sessionColumns+` FROM sessions WHERE session_id = ?`, id)
	return s, err
}

// SessionByCreateRequest reads the session created with session.create's
// request_id; sql.ErrNoRows when there is none.
func SessionByCreateRequest(q Queryer, requestID string) (Session, error) {
	var s Session
	err := q.Get(&s, `SELECT `+sessionColumns+` FROM sessions WHERE create_request_id = ?`, requestID)
	return s, err
}

// NewSession is the row InsertSession writes; the counters start at their
// defaults.
type NewSession struct {
	SessionID, Title, Cwd, Model, Provider, BaseURL string
	Toolsets                                        string // JSON array
	Source                                          string
	CreateRequestID, CreateDigest                   sql.NullString
	CreatedAt                                       string
	Sandbox                                         sql.NullString // JSON, NULL: the configured sandbox
	PinLabel                                        sql.NullString // cluster.label the session is pinned to
	MCPServers                                      sql.NullString // JSON array (tools/mcp.Server)
	ApprovalMode                                    sql.NullString // manual | strict | off; NULL: the configured approvals.mode
}

// ErrCreateRequestTaken is InsertSession's answer when another session
// already holds s.CreateRequestID (UNIQUE create_request_id): under READ
// COMMITTED a concurrent session.create with the same request_id may have
// committed after this transaction looked for it. Nothing was inserted;
// the caller reads that session (SessionByCreateRequest: the statement
// sees the other transaction's commit) and answers with it.
var ErrCreateRequestTaken = errors.New("create_request_id is taken")

// InsertSession inserts s in tx (ON CONFLICT (create_request_id) DO
// NOTHING: ErrCreateRequestTaken when that request_id is taken; a NULL one
// never conflicts).
func InsertSession(tx *Tx, s NewSession) error {
	res, err := tx.Exec(`INSERT INTO sessions (session_id, title, cwd, model, provider, base_url, toolsets, source,
		create_request_id, create_digest, created_at, sandbox, pin_label, mcp_servers, approval_mode)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (create_request_id) DO NOTHING`,
		s.SessionID, s.Title, s.Cwd, s.Model, s.Provider, s.BaseURL, s.Toolsets, s.Source, s.CreateRequestID, s.CreateDigest,
		s.CreatedAt, s.Sandbox, s.PinLabel, s.MCPServers, s.ApprovalMode)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		return fmt.Errorf("%w: %s", ErrCreateRequestTaken, s.CreateRequestID.String)
	}
	return nil
}

// RenameSession sets the title of session id in tx.
func RenameSession(tx *Tx, id, title string) error {
	_, err := tx.Exec(`UPDATE sessions SET title = ? WHERE session_id = ?`, title, id)
	return err
}

// SessionSettings are the columns session.update may change besides the
// title; a nil field is left as it is.
type SessionSettings struct {
	Model        *string
	ApprovalMode *string // manual | strict | off
	Sandbox      *string // JSON sandbox.Policy, already narrowed by the caller
}

// UpdateSessionSettings writes the settings of session id in tx.
func UpdateSessionSettings(tx *Tx, id string, s SessionSettings) error {
	if s.Model != nil {
		if _, err := tx.Exec(`UPDATE sessions SET model = ? WHERE session_id = ?`, *s.Model, id); err != nil {
			return err
		}
	}
	if s.ApprovalMode != nil {
		if _, err := tx.Exec(`UPDATE sessions SET approval_mode = ? WHERE session_id = ?`, *s.ApprovalMode, id); err != nil {
			return err
		}
	}
	if s.Sandbox != nil {
		if _, err := tx.Exec(`UPDATE sessions SET sandbox = ? WHERE session_id = ?`, *s.Sandbox, id); err != nil {
			return err
		}
	}
	return nil
}
