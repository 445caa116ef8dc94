package store

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
)

// Message roles of the transcript (table messages). RoleBoundary closes a
// turn that did not complete (interrupted, failed or lost in a crash); it is
// sent to the model as a short assistant note so that the lost turn never
// merges into the next request.
const (
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
	RoleBoundary  = "boundary"
)

// KindSynthetic marks tool results that sessiond wrote for tool calls that
// never ran ("not run: turn interrupted").
const KindSynthetic = "synthetic"

// ToolCall is one assistant tool call as stored in messages.tool_calls.
type ToolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Message is one transcript row.
type Message struct {
	ID          int64          `db:"id"`
	SessionID   string         `db:"session_id"`
	AdmissionID sql.NullString `db:"admission_id"`
	Role        string         `db:"role"`
	Content     string         `db:"content"`
	ToolCalls   sql.NullString `db:"tool_calls"`
	ToolCallID  sql.NullString `db:"tool_call_id"`
	Kind        sql.NullString `db:"kind"`
	CreatedAt   string         `db:"created_at"`
	// Sender is the admitting sender's JSON (session_admissions.sender) on
	// user rows read by Transcript; NULL otherwise.
	Sender sql.NullString `db:"sender"`
}

// Calls decodes ToolCalls; nil when there are none.
func (m Message) Calls() ([]ToolCall, error) {
	if !m.ToolCalls.Valid || m.ToolCalls.String == "" {
		return nil, nil
	}
	var calls []ToolCall
	if err := json.Unmarshal([]byte(m.ToolCalls.String), &calls); err != nil {
		return nil, fmt.Errorf("message %d: tool_calls: %w", m.ID, err)
	}
	return calls, nil
}

func nullStr(s string) sql.NullString { return sql.NullString{String: s, Valid: s != ""} }

// AppendMessage appends one transcript row in this transaction and returns
// it with its id and timestamp. calls may be nil.
func (t *Tx) AppendMessage(sessionID, admissionID, role, content string, calls []ToolCall, toolCallID, kind string) (Message, error) {
	m := Message{SessionID: sessionID, AdmissionID: nullStr(admissionID), Role: role, Content: content,
		ToolCallID: nullStr(toolCallID), Kind: nullStr(kind), CreatedAt: Now()}
	if len(calls) > 0 {
		b, err := json.Marshal(calls)
		if err != nil {
			return Message{}, err
		}
		m.ToolCalls = nullStr(string(b))
	}
	err := t.Get(&m.ID, `INSERT INTO messages (session_id, admission_id, role, content, tool_calls, tool_call_id, kind, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`,
		m.SessionID, m.AdmissionID, m.Role, m.Content, m.ToolCalls, m.ToolCallID, m.Kind, m.CreatedAt)
	if err != nil {
		return Message{}, fmt.Errorf("append %s message: %w", role, err)
	}
	return m, nil
}

// Transcript returns every message of sessionID in order.
func Transcript(q Queryer, sessionID string) ([]Message, error) {
	var ms []Message
	// The sender is the admission's (a primary-key lookup per user row).
	err := q.Select(&ms, `SELECT m.id, m.session_id, m.admission_id, m.role, m.content, m.tool_calls, m.tool_call_id, m.kind, m.created_at,
		CASE WHEN m.role = 'user' THEN (SELECT a.sender FROM session_admissions a WHERE a.admission_id = m.admission_id) END AS sender
		FROM messages m WHERE m.session_id = ? ORDER BY m.id`, sessionID)
	return ms, Classify(err)
}

// CloseTurn repairs the transcript of a turn that did not complete: every
// tool call of admissionID without a tool result gets a synthetic result,
// then a boundary row with boundary text is appended. The result carries
// runningNote when the call's command had started (a tool.running event of
// the admission names it: it ran, its effects are unknown) and note
// otherwise (e.g. "not run: turn interrupted"). It returns the rows it
// appended, in order.
func (t *Tx) CloseTurn(sessionID, admissionID, note, runningNote, boundary string) ([]Message, error) {
	var running []string
	if err := t.Select(&running, `SELECT json_extract(payload, '$.tool_call_id') FROM events
		WHERE session_id = ? AND admission_id = ? AND type = 'tool.running'`, sessionID, admissionID); err != nil {
		return nil, err
	}
	var ms []Message
	if err := t.Select(&ms, `SELECT id, session_id, admission_id, role, content, tool_calls, tool_call_id, kind, created_at
		FROM messages WHERE session_id = ? AND admission_id = ? ORDER BY id`, sessionID, admissionID); err != nil {
		return nil, err
	}
	answered := map[string]bool{}
	for _, m := range ms {
		if m.Role == RoleTool && m.ToolCallID.Valid {
			answered[m.ToolCallID.String] = true
		}
	}
	var out []Message
	for _, m := range ms {
		if m.Role != RoleAssistant {
			continue
		}
		calls, err := m.Calls()
		if err != nil {
			return nil, err
		}
		for _, c := range calls {
			if answered[c.ID] {
				continue
			}
			text := note
			if slices.Contains(running, c.ID) {
				text = runningNote
			}
			r, err := t.AppendMessage(sessionID, admissionID, RoleTool, text, nil, c.ID, KindSynthetic)
			if err != nil {
				return nil, err
			}
			answered[c.ID] = true
			out = append(out, r)
		}
	}
	b, err := t.AppendMessage(sessionID, admissionID, RoleBoundary, boundary, nil, "", "")
	if err != nil {
		return nil, err
	}
	return append(out, b), nil
}
