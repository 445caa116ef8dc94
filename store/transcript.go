package store

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/jmoiron/sqlx"
)

// ToolCall is one assistant tool call as stored in messages.tool_calls.
type ToolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Message is one transcript row. Its roles and the repair of a turn that
// did not complete belong to package transcript; the store keeps rows.
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

// RowQueryer runs a query whose rows are read one at a time, with '?'
// placeholders (*Tx, *Reads).
type RowQueryer interface {
	Queryx(query string, args ...any) (*sqlx.Rows, error)
}

// Page is one page of a transcript (TranscriptPage).
type Page struct {
	// Messages are oldest first.
	Messages []Message
	// Cut holds the ids of messages whose content or tool_calls were cut
	// to the field bound.
	Cut map[int64]bool
	// More says that older messages exist than Messages[0].
	More bool
}

// TranscriptPage returns the newest messages of sessionID with id < before
// (before <= 0: the newest of all), at most limit of them, stopping before
// the message that would bring content plus tool_calls above maxBytes (the
// first is always taken). Each content and tool_calls longer than maxField
// bytes is cut to maxField bytes (at a UTF-8 boundary) in SQL, so memory
// stays within about maxBytes + maxField whatever the transcript's size.
// d is the store's driver (DB.Driver), for the byte cuts.
func TranscriptPage(q RowQueryer, d Driver, sessionID string, before int64, limit, maxBytes, maxField int) (Page, error) {
	if before <= 0 {
		before = math.MaxInt64
	}
	rows, err := q.Queryx(`SELECT id, session_id, admission_id, role,
		coalesce(`+d.BytePrefix("content", "?")+`, '') AS content, `+d.ByteLength("content")+` AS content_len,
		`+d.BytePrefix("tool_calls", "?")+` AS tool_calls, `+d.ByteLength("tool_calls")+` AS calls_len,
		tool_call_id, kind, created_at,
		CASE WHEN role = 'user' THEN (SELECT a.sender FROM session_admissions a WHERE a.admission_id = messages.admission_id) END AS sender
		FROM messages WHERE session_id = ? AND id < ? ORDER BY id DESC LIMIT ?`, maxField, maxField, sessionID, before, limit+1)
	if err != nil {
		return Page{}, Classify(err)
	}
	defer rows.Close()
	p := Page{Cut: map[int64]bool{}}
	total := 0
	for rows.Next() {
		var r struct {
			Message
			ContentLen int64         `db:"content_len"`
			CallsLen   sql.NullInt64 `db:"calls_len"`
		}
		if err := rows.StructScan(&r); err != nil {
			return Page{}, Classify(err)
		}
		size := len(r.Content) + len(r.ToolCalls.String)
		if len(p.Messages) == limit || (len(p.Messages) > 0 && total+size > maxBytes) {
			p.More = true
			break
		}
		total += size
		m := r.Message
		if r.ContentLen > int64(maxField) || r.CallsLen.Int64 > int64(maxField) {
			p.Cut[m.ID] = true
			m.Content = validPrefix(m.Content)
			if r.CallsLen.Int64 > int64(maxField) {
				// Cut JSON is not JSON: the calls are left out of the page.
				m.ToolCalls = sql.NullString{}
			}
		}
		p.Messages = append(p.Messages, m)
	}
	if err := rows.Err(); err != nil {
		return Page{}, Classify(err)
	}
	slices.Reverse(p.Messages)
	return p, nil
}

// validPrefix drops an incomplete UTF-8 sequence at the end of s.
func validPrefix(s string) string {
	for i := 0; i < utf8.UTFMax && len(s) > 0; i++ {
		if utf8.ValidString(s) {
			return s
		}
		s = s[:len(s)-1]
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}
