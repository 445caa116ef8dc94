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
// started (a turn runs; interrupt it first) and ErrUnknownExecution while
// one is unknown (an operator must resolve it first); queued admissions are
// deleted with the session. The check and the delete are one transaction
// on the single writer, so a claim racing it either lands first (then this
// answers ErrSessionBusy) or finds nothing to claim. ErrSessionNotFound
// when there is no such session.
func (q *Queue) DeleteSession(ctx context.Context, sessionID string) error {
	err := q.DB.InTx(ctx, func(tx *store.Tx) error {
		var blocking []string
		if err := tx.Select(&blocking, `SELECT status FROM session_admissions
			WHERE status <> 'terminal' AND target_session_id = ? AND status IN ('started', 'unknown') LIMIT 1`, sessionID); err != nil {
			return err
		}
		if len(blocking) > 0 {
			if Status(blocking[0]) == StatusUnknown {
				return fmt.Errorf("%w: session %s has an unknown admission; resolve it before deleting the session", ErrUnknownExecution, sessionID)
			}
			return fmt.Errorf("%w: session %s; interrupt the turn before deleting the session", ErrSessionBusy, sessionID)
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
