package admission

import (
	"context"
	"fmt"

	"github.com/sessiond/sessiond/cluster"
	"github.com/sessiond/sessiond/store"
)

// DeleteSession removes sessionID and everything that hangs off it (its
// admissions, transcript, prompts, events and "session" approvals, by the
// schema's ON DELETE CASCADE) in one transaction, so that its ids answer
// "not found" afterwards. SQLite's secure_delete scrubs the freed pages.
//
// It is refused with ErrSessionBusy while an admission of the session is
// started (a turn runs; interrupt it first) or queued (an acknowledged
// input waits for its turn, and its submitter for its outcome: withdraw
// it first with Cancel), and ErrUnknownExecution while one is unknown (an
// operator must resolve it first). The check and the delete are one write
// transaction, so a claim racing it either lands first (then this
// answers ErrSessionBusy) or finds nothing to claim. ErrSessionNotFound
// when there is no such session.
func (q *Queue) DeleteSession(ctx context.Context, sessionID string) error {
	err := q.DB.InTx(ctx, func(tx *store.Tx) error {
		tx.Label("session.delete")
		if err := tx.LockSessions(sessionID); err != nil {
			return err
		}
		st, err := holder(tx, sessionID)
		if err == nil && st == "" {
			var queued []string
			if err = tx.Select(&queued, `SELECT admission_id FROM session_admissions
				WHERE status <> 'terminal' AND target_session_id = ? LIMIT 1`, sessionID); len(queued) > 0 {
				st = StatusQueued
			}
		}
		switch {
		case err != nil:
			return err
		case st == StatusUnknown:
			return fmt.Errorf("%w: session %s has an unknown admission; resolve it before deleting the session", ErrUnknownExecution, sessionID)
		case st == StatusStarted:
			return fmt.Errorf("%w: session %s; interrupt the turn before deleting the session", ErrSessionBusy, sessionID)
		case st == StatusQueued:
			return fmt.Errorf("%w: session %s has queued inputs; withdraw them (prompt.cancel) before deleting the session", ErrSessionBusy, sessionID)
		}
		res, err := tx.Exec(`DELETE FROM sessions WHERE session_id = ?`, sessionID)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("%w: %s", ErrSessionNotFound, sessionID)
		}
		if q.Bus != nil {
			// Other daemons drop their subscribers of it.
			q.Bus.Notify(tx, cluster.ChannelSessions, sessionID)
		}
		return nil
	})
	return store.Classify(err)
}

// holder returns the status of the admission that holds sessionID's FIFO
// (StatusStarted: a turn runs; StatusUnknown: an operator must resolve it),
// or "" when none does. At most one admission per session is started or
// unknown.
func holder(tx *store.Tx, sessionID string) (Status, error) {
	var st []Status
	err := tx.Select(&st, `SELECT status FROM session_admissions
		WHERE status <> 'terminal' AND target_session_id = ? AND status IN ('started', 'unknown') LIMIT 1`, sessionID)
	if err != nil || len(st) == 0 {
		return "", err
	}
	return st[0], nil
}
