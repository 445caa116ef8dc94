package admission

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/sessiond/sessiond/store"
	"github.com/sessiond/sessiond/transcript"
)

// ErrNotTerminal: session.fork through an admission that is not terminal
// (wire reason not_terminal).
var ErrNotTerminal = errors.New("admission is not terminal")

// ErrNoTurn: session.fork through a terminal admission that never ran (it
// was cancelled while queued), so it has no turn to fork through (wire
// reason invalid_params).
var ErrNoTurn = errors.New("admission never ran")

// ForkRequest is what session.fork asks: a copy of SessionID through the
// turn of Through ("" for every terminal admission). Label is the
// cluster.label the new session is pinned to ("" for none), as at
// session.create.
type ForkRequest struct {
	SessionID string
	Through   string
	Label     string
}

// Fork creates a new session with the settings of req.SessionID (cwd,
// model, provider, base_url, toolsets, source, sandbox, approvals mode and
// MCP servers), the same title
// followed by " (fork)", an empty queue, no prompts or events, and a copy
// of the transcript of every turn up to and including req.Through's (a
// steer counts as the turn it was taken into), or of every terminal turn
// when Through is "". Only whole terminal turns are copied: a turn that did
// not complete ends with its closing rows (transcript.Close) already, and a
// turn still running or unknown is left out; calls left without a result
// at the end of the copy are closed (forkEntries), and every request is
// repaired by transcript.Repair as for the source, so the new session's
// history is always valid. The copied rows keep their roles, contents and tool calls;
// their admission_id is NULL (the admissions stay the source's). The
// source is unchanged. It returns the new session's id.
//
// Errors: ErrSessionNotFound, ErrNotFound (Through is not an admission of
// the session), ErrNotTerminal (Through is queued, started or unknown),
// ErrNoTurn (Through never ran: it was cancelled while queued),
// store.ErrUnavailable.
func (q *Queue) Fork(ctx context.Context, req ForkRequest) (string, error) {
	var id string
	err := q.DB.InTx(ctx, func(tx *store.Tx) error {
		tx.Label("session.fork")
		// The source's turns cannot move while its rows are copied.
		if err := tx.LockSessions(req.SessionID); err != nil {
			return err
		}
		src, err := store.GetSession(tx, req.SessionID)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("%w: %s", ErrSessionNotFound, req.SessionID)
		} else if err != nil {
			return err
		}
		// cut: the last message id of the turns copied; 0 copies nothing.
		var cut sql.NullInt64
		if req.Through != "" {
			a, err := get(tx, `admission_id = ? AND target_session_id = ?`, req.Through, req.SessionID)
			if errors.Is(err, sql.ErrNoRows) {
				return fmt.Errorf("%w: %s in session %s", ErrNotFound, req.Through, req.SessionID)
			} else if err != nil {
				return err
			}
			if a.Status != StatusTerminal {
				return fmt.Errorf("%w: admission %s is %s; fork through a terminal admission", ErrNotTerminal, a.AdmissionID, a.Status)
			}
			host := a.AdmissionID
			if a.SteeredInto.Valid {
				host = a.SteeredInto.String
			}
			if err := tx.Get(&cut, `SELECT MAX(m.id) FROM messages m WHERE m.session_id = ? AND m.admission_id IN
				(SELECT admission_id FROM session_admissions WHERE target_session_id = ? AND (admission_id = ? OR steered_into = ?))`,
				req.SessionID, req.SessionID, host, host); err != nil {
				return err
			}
			if !cut.Valid {
				// Only an admission cancelled while queued is terminal
				// without rows of its own (a claim writes the user
				// message): "through" it names no turn, and an empty
				// fork would silently drop the turns before it.
				return fmt.Errorf("%w: admission %s ended %s without running; fork through an admission that ran, or without through_admission_id",
					ErrNoTurn, a.AdmissionID, a.Outcome.String)
			}
		} else {
			if err := tx.Get(&cut, `SELECT MAX(id) FROM messages WHERE session_id = ?`, req.SessionID); err != nil {
				return err
			}
		}
		var ms []store.Message
		if cut.Valid {
			// Rows of terminal admissions only (and rows of no admission),
			// up to the cut.
			if err := tx.Select(&ms, `SELECT m.id, m.session_id, m.admission_id, m.role, m.content, m.tool_calls, m.tool_call_id, m.kind, m.created_at
				FROM messages m LEFT JOIN session_admissions a ON a.admission_id = m.admission_id
				WHERE m.session_id = ? AND m.id <= ? AND (m.admission_id IS NULL OR a.status = 'terminal')
				ORDER BY m.id`, req.SessionID, cut.Int64); err != nil {
				return err
			}
		}
		id = "ses_" + uuid.Must(uuid.NewV7()).String()
		title := src.Title
		if title != "" {
			title += " (fork)"
		}
		if err := store.InsertSession(tx, store.NewSession{SessionID: id, Title: title, Cwd: src.Cwd, Model: src.Model,
			Provider: src.Provider, BaseURL: src.BaseURL, Toolsets: src.Toolsets, Source: src.Source, CreatedAt: store.Now(),
			Sandbox: src.Sandbox, MCPServers: src.MCPServers, ApprovalMode: src.ApprovalMode,
			PinLabel: sql.NullString{String: req.Label, Valid: req.Label != ""}}); err != nil {
			return err
		}
		copied, err := entries(ms)
		if err != nil {
			return err
		}
		for _, e := range forkEntries(copied) {
			var calls []store.ToolCall
			for _, c := range e.ToolCalls {
				calls = append(calls, store.ToolCall{ID: c.ID, Name: c.Name, Arguments: c.Arguments})
			}
			if _, err := tx.AppendMessage(id, "", e.Role, e.Content, calls, e.ToolCallID, e.Kind); err != nil {
				return err
			}
		}
		return nil
	})
	return id, store.Classify(err)
}

// forkEntries is the copied transcript: entries as stored and, when the
// copy ends with tool calls that never got a result and no boundary after
// them (rows an older build left), transcript.Close's rows for them (a
// "not run" result for each and a boundary), so that the fork's first
// turn never continues a dangling one. Anything else transcript.Repair
// fixes in each request, as for the source.
func forkEntries(entries []transcript.Entry) []transcript.Entry {
	if len(entries) == 0 || entries[len(entries)-1].Role == transcript.RoleBoundary {
		return entries
	}
	answered := map[string]bool{}
	for _, e := range entries {
		if e.Role == transcript.RoleTool {
			answered[e.ToolCallID] = true
		}
	}
	// The first assistant entry, after the last boundary, with a call that
	// has no result.
	from := -1
	for i := len(entries) - 1; i >= 0 && entries[i].Role != transcript.RoleBoundary; i-- {
		for _, c := range entries[i].ToolCalls {
			if !answered[c.ID] {
				from = i
			}
		}
	}
	if from < 0 {
		return entries
	}
	return append(entries, transcript.Close(entries[from:], nil, transcript.Interrupted())...)
}
