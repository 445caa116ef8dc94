package prompts

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/sessiond/sessiond/store"
)

// Approval allowlists. A "session" choice allows the approval's pattern for
// the rest of that session (table session_approvals); an "always" choice
// allows it in every session from now on (table approval_allowlist). The
// pattern is the risk rule's key from the approval payload (e.g.
// "rm-recursive"), so approving one recursive delete approves that kind of
// command, not that exact text.

// recordAllowance stores the pattern of an answered approval when its
// choice is session or always and the prompt offered that choice (its
// payload's "choices", when present): an escalation offers only once and
// deny, so a "session" or "always" answer to it counts as once and
// nothing is remembered.
func recordAllowance(tx *store.Tx, p Prompt, answer json.RawMessage) error {
	var a struct {
		Choice string `json:"choice"`
	}
	var payload struct {
		Pattern string   `json:"pattern"`
		Choices []string `json:"choices"`
	}
	if json.Unmarshal(answer, &a) != nil || json.Unmarshal([]byte(p.Payload), &payload) != nil || payload.Pattern == "" {
		return nil
	}
	if payload.Choices != nil && !slices.Contains(payload.Choices, a.Choice) {
		return nil
	}
	switch a.Choice {
	case ChoiceSession:
		_, err := tx.Exec(`INSERT INTO session_approvals (session_id, pattern, created_at) VALUES (?, ?, ?)
			ON CONFLICT DO NOTHING`, p.SessionID, payload.Pattern, store.Now())
		return err
	case ChoiceAlways:
		_, err := tx.Exec(`INSERT INTO approval_allowlist (pattern, created_at, source_session_id) VALUES (?, ?, ?)
			ON CONFLICT DO NOTHING`, payload.Pattern, store.Now(), p.SessionID)
		return err
	}
	return nil
}

// Allowed reports whether pattern was approved for the session ("session")
// or for every session ("always").
func (m *Manager) Allowed(ctx context.Context, sessionID, pattern string) (bool, error) {
	if pattern == "" {
		return false, nil
	}
	var one int
	err := m.db.Get(ctx, &one, `SELECT 1 FROM approval_allowlist WHERE pattern = ?
		UNION ALL SELECT 1 FROM session_approvals WHERE session_id = ? AND pattern = ? LIMIT 1`, pattern, sessionID, pattern)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// AllowedInSession reports whether pattern was approved for the session
// ("session") only; the "always" allowlist is not consulted (a
// session-given MCP server's calls, whose name another client may reuse).
func (m *Manager) AllowedInSession(ctx context.Context, sessionID, pattern string) (bool, error) {
	if pattern == "" {
		return false, nil
	}
	var one int
	err := m.db.Get(ctx, &one, `SELECT 1 FROM session_approvals WHERE session_id = ? AND pattern = ? LIMIT 1`, sessionID, pattern)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// AllowRule is one "always" allowlist entry.
type AllowRule struct {
	Pattern         string         `db:"pattern" json:"pattern"`
	CreatedAt       string         `db:"created_at" json:"created_at"`
	SourceSessionID sql.NullString `db:"source_session_id" json:"-"`
}

// AlwaysAllowed lists the persisted "always" allowlist, oldest first.
func (m *Manager) AlwaysAllowed(ctx context.Context) ([]AllowRule, error) {
	var rs []AllowRule
	err := m.db.Select(ctx, &rs, `SELECT pattern, created_at, source_session_id FROM approval_allowlist ORDER BY created_at, pattern`)
	return rs, err
}

// SessionAllowed lists the "session" patterns of sessionID, oldest first.
func (m *Manager) SessionAllowed(ctx context.Context, sessionID string) ([]AllowRule, error) {
	var rs []AllowRule
	err := m.db.Select(ctx, &rs, `SELECT pattern, created_at, session_id AS source_session_id FROM session_approvals
		WHERE session_id = ? ORDER BY created_at, pattern`, sessionID)
	return rs, err
}

// Revoke forgets a remembered approval: with sessionID empty the "always"
// pattern, else that session's "session" pattern. From then on a command
// of that kind asks again. ErrNotFound when no such pattern is remembered
// there (a typo, or revoked already).
func (m *Manager) Revoke(ctx context.Context, sessionID, pattern string) error {
	return m.db.InTx(ctx, func(tx *store.Tx) error {
		tx.Label("allowlist.revoke")
		var (
			res sql.Result
			err error
		)
		if sessionID == "" {
			res, err = tx.Exec(`DELETE FROM approval_allowlist WHERE pattern = ?`, pattern)
		} else {
			res, err = tx.Exec(`DELETE FROM session_approvals WHERE session_id = ? AND pattern = ?`, sessionID, pattern)
		}
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			if sessionID == "" {
				return fmt.Errorf("%w: no always approval for pattern %q", ErrNotFound, pattern)
			}
			return fmt.Errorf("%w: no session approval for pattern %q in session %s", ErrNotFound, pattern, sessionID)
		}
		return nil
	})
}
