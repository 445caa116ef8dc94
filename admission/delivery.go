package admission

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"

	"github.com/sessiond/sessiond/cluster"
	"github.com/sessiond/sessiond/protocol"
	"github.com/sessiond/sessiond/store"
	"github.com/sessiond/sessiond/transcript"
)

// Input delivery while a turn runs and editing the queue (PROTOCOL.md
// sections 10.2 and 10.3).
//
// The FIFO's order is session_admissions.queue_order (then seq): an input
// admitted with when_busy queue gets queue_order = seq, the end of the
// queue. A steer is placed before the first queued input of delivery
// queue, an interrupt at the front, and prompt.move anywhere; each of them
// re-sequences the session's queued rows among the values those rows
// already hold (resequence), so every value stays below the seq of the
// next admission and the order is durable: it survives restarts and
// takeovers like any other column.
//
// A steer (delivery steer, queued) is taken into a running turn at that
// turn's next model request (TakeSteers, in the transaction that appends
// it to the transcript as a user message after the turn's tool results):
// it becomes started with the turn's execution generation and daemon and
// steered_into = the turn's admission, so that it shares the turn's fate:
// the turn's settle settles it with the turn's outcome; a crash makes both
// unknown, and prompt.resolve_unknown of either closes both. A steer that
// no turn took before the running one ended is claimed like any queued
// input: it runs next, ahead of the queue.

// busyState is what makes a session busy for when_busy: Running is the
// admission of its running turn ("" when none) with its Generation; Queued
// and Unknown count its queued and unknown admissions.
type busyState struct {
	Running    string `db:"running"`
	Generation int64  `db:"generation"`
	Queued     int    `db:"queued"`
	Unknown    int    `db:"unknown"`
}

func (b busyState) any() bool { return b.Running != "" || b.Queued > 0 || b.Unknown > 0 }

func (b busyState) String() string {
	switch {
	case b.Running != "":
		return "runs a turn (admission " + b.Running + ")"
	case b.Unknown > 0:
		return "is held by an unknown admission"
	default:
		return fmt.Sprintf("has %d queued inputs", b.Queued)
	}
}

// sessionBusy reads busyState of sessionID in tx (index seeks on the open
// admissions only).
func sessionBusy(tx store.Queryer, sessionID string) (busyState, error) {
	var b busyState
	err := tx.Get(&b, `SELECT
		coalesce((SELECT admission_id FROM session_admissions WHERE status <> 'terminal' AND target_session_id = ?
		          AND status = 'started' AND steered_into IS NULL), '') AS running,
		coalesce((SELECT execution_generation FROM session_admissions WHERE status <> 'terminal' AND target_session_id = ?
		          AND status = 'started' AND steered_into IS NULL), 0) AS generation,
		(SELECT count(*) FROM session_admissions WHERE status <> 'terminal' AND target_session_id = ? AND status = 'queued') AS queued,
		(SELECT count(*) FROM session_admissions WHERE status <> 'terminal' AND target_session_id = ? AND status = 'unknown') AS unknown`,
		sessionID, sessionID, sessionID, sessionID)
	return b, err
}

// queuedRows returns the queued admissions of sessionID in the order they
// will run.
func queuedRows(tx store.Queryer, sessionID string) ([]Admission, error) {
	var rows []Admission
	err := tx.Select(&rows, `SELECT `+columns+` FROM session_admissions
		WHERE status <> 'terminal' AND target_session_id = ? AND status = 'queued' ORDER BY queue_order, seq`, sessionID)
	return rows, err
}

// resequence gives rows, the queued admissions of one session in their new
// order, the queue_order values they hold now, sorted: a permutation, so
// that no value moves past the seq of a later admission. It returns rows
// with their new values.
func resequence(tx *store.Tx, rows []Admission) ([]Admission, error) {
	vals := make([]int64, len(rows))
	for i, r := range rows {
		vals[i] = r.QueueOrder
	}
	slices.Sort(vals)
	for i := range rows {
		if rows[i].QueueOrder == vals[i] {
			continue
		}
		res, err := tx.Exec(`UPDATE session_admissions SET queue_order = ? WHERE admission_id = ? AND status = 'queued'`,
			vals[i], rows[i].AdmissionID)
		if err != nil {
			return nil, err
		}
		if n, _ := res.RowsAffected(); n != 1 {
			// Every write transaction is serializable: a row read queued
			// in tx is queued in tx.
			return nil, fmt.Errorf("%w: admission %s left the queue during a reorder", ErrIllegalTransition, rows[i].AdmissionID)
		}
		rows[i].QueueOrder = vals[i]
	}
	return rows, nil
}

// placePriority moves the just-inserted queued admission a (a steer or an
// interrupt) to its place: an interrupt to the front of the queue, a steer
// before the first queued input of delivery queue. It returns a's new
// queue_order.
func placePriority(tx *store.Tx, a Admission) (int64, error) {
	// The common case costs one index seek: a steer with no queued input
	// of delivery queue (or an interrupt with nothing else queued) is at
	// its place already, the end of the queue.
	kind := `delivery = 'queue'`
	if a.Delivery == protocol.DeliveryInterrupt {
		kind = `admission_id <> ?`
	}
	var behind int
	args := []any{a.SessionID}
	if a.Delivery == protocol.DeliveryInterrupt {
		args = append(args, a.AdmissionID)
	}
	if err := tx.Get(&behind, `SELECT CASE WHEN EXISTS (SELECT 1 FROM session_admissions WHERE status <> 'terminal'
		AND target_session_id = ? AND status = 'queued' AND `+kind+`) THEN 1 ELSE 0 END`, args...); err != nil {
		return 0, err
	}
	if behind == 0 {
		return a.QueueOrder, nil
	}
	rows, err := queuedRows(tx, a.SessionID)
	if err != nil {
		return 0, err
	}
	i := slices.IndexFunc(rows, func(r Admission) bool { return r.AdmissionID == a.AdmissionID })
	if i < 0 {
		return 0, fmt.Errorf("%w: admission %s not queued after its insert", ErrIllegalTransition, a.AdmissionID)
	}
	self := rows[i]
	rows = slices.Delete(rows, i, i+1)
	at := 0
	if a.Delivery == protocol.DeliverySteer {
		at = len(rows)
		if j := slices.IndexFunc(rows, func(r Admission) bool { return r.Delivery == protocol.DeliveryQueue }); j >= 0 {
			at = j
		}
	}
	rows = slices.Insert(rows, at, self)
	if rows, err = resequence(tx, rows); err != nil {
		return 0, err
	}
	return rows[at].QueueOrder, nil
}

// Update replaces the text and attachments of a queued admission
// (prompt.update), in one guarded statement: a claim that started it first
// wins and Update answers ErrNotQueued; nothing is half-applied. The
// original payload digest stays, so a resubmit of the input_id with the
// original or the updated payload is a duplicate. attachments is nil for
// none (canonical JSON otherwise, as for Admit). Emits admission.updated
// (the receipt with the new text). Errors: ErrNotFound, ErrNotQueued,
// ErrUnknownExecution (it is unknown), store.ErrUnavailable.
func (q *Queue) Update(ctx context.Context, sessionID, admissionID, text string, attachments json.RawMessage) (Admission, error) {
	var out Admission
	var att sql.NullString
	if len(attachments) > 0 {
		att = sql.NullString{String: string(attachments), Valid: true}
	}
	digest := Digest(text, attachments)
	err := q.DB.InTx(ctx, func(tx *store.Tx) error {
		tx.Label("prompt.update")
		if err := tx.LockSessions(sessionID); err != nil {
			return err
		}
		err := tx.Get(&out, `UPDATE session_admissions SET text = ?, attachments = ?, edited_digest = ?
			WHERE admission_id = ? AND target_session_id = ? AND status = 'queued'
			RETURNING `+columns, text, att, digest, admissionID, sessionID)
		if errors.Is(err, sql.ErrNoRows) {
			return explain(tx, sessionID, admissionID, StatusQueued, 0)
		} else if err != nil {
			return err
		}
		ev := out.Receipt()
		ev.Text = out.Text
		_, err = tx.AppendEvent(sessionID, protocol.EventAdmissionUpdated, admissionID, 0, ev)
		return err
	})
	return out, store.Classify(err)
}

// Move puts the queued admission admissionID just before the queued
// admission before, or at the front of the queue when before is "" (
// prompt.move), and returns the session's queued admissions in their new
// order. The FIFO runs in this order from then on, across restarts. It is
// one transaction: a claim that started either admission first wins and
// Move answers ErrNotQueued (naming it), with nothing moved. Emits
// admission.updated for the moved admission. Errors: ErrNotFound (either
// admission is not in the session), ErrNotQueued, ErrUnknownExecution,
// store.ErrUnavailable.
func (q *Queue) Move(ctx context.Context, sessionID, admissionID, before string) ([]string, error) {
	var order []string
	err := q.DB.InTx(ctx, func(tx *store.Tx) error {
		tx.Label("prompt.move")
		order = nil
		if err := tx.LockSessions(sessionID); err != nil {
			return err
		}
		rows, err := queuedRows(tx, sessionID)
		if err != nil {
			return err
		}
		i := slices.IndexFunc(rows, func(r Admission) bool { return r.AdmissionID == admissionID })
		if i < 0 {
			return explain(tx, sessionID, admissionID, StatusQueued, 0)
		}
		self := rows[i]
		rows = slices.Delete(rows, i, i+1)
		at := 0
		if before != "" {
			if at = slices.IndexFunc(rows, func(r Admission) bool { return r.AdmissionID == before }); at < 0 {
				err := explain(tx, sessionID, before, StatusQueued, 0)
				return fmt.Errorf("before: %w", err)
			}
		}
		rows = slices.Insert(rows, at, self)
		if rows, err = resequence(tx, rows); err != nil {
			return err
		}
		for _, r := range rows {
			order = append(order, r.AdmissionID)
		}
		if q.Bus != nil {
			q.Bus.Notify(tx, cluster.ChannelSessions, sessionID)
		}
		_, err = tx.AppendEvent(sessionID, protocol.EventAdmissionUpdated, admissionID, 0, rows[at].Receipt())
		return err
	})
	return order, store.Classify(err)
}

// Order returns the queued admissions of sessionID in the order they will
// run.
func Order(q store.Queryer, sessionID string) ([]string, error) {
	var ids []string
	err := q.Select(&ids, `SELECT admission_id FROM session_admissions
		WHERE status <> 'terminal' AND target_session_id = ? AND status = 'queued' ORDER BY queue_order, seq`, sessionID)
	return ids, store.Classify(err)
}

// SteersWaiting reports whether sessionID has a queued steer: a cheap read
// (an index seek) before the write transaction of TakeSteers, so that a
// turn pays nothing at its model requests while nobody steers.
func SteersWaiting(q store.Queryer, sessionID string) (bool, error) {
	var n int
	err := q.Get(&n, `SELECT CASE WHEN EXISTS (SELECT 1 FROM session_admissions WHERE status <> 'terminal'
		AND target_session_id = ? AND status = 'queued' AND delivery = 'steer') THEN 1 ELSE 0 END`, sessionID)
	return n == 1, store.Classify(err)
}

// TakeSteers takes every queued steer of the session of execution x into
// that turn, in tx, which must already have run x.Check (the fence): each
// becomes started with x's generation and daemon and steered_into =
// x.AdmissionID, its text is appended to the transcript as a user message
// (admission_id: the steer's), and admission.updated and
// message.completed events are appended. It returns the steers in queue
// order with their messages; none when nothing waits, or when the turn was
// asked to stop (sessions.interrupt_generation is x's generation).
func TakeSteers(tx *store.Tx, x Execution) ([]Admission, []store.Message, error) {
	// A turn that was durably asked to stop (a when_busy interrupt, or
	// session.interrupt from another daemon: sessions.interrupt_generation)
	// is condemned: a steer taken into it now would settle interrupted
	// with it, unanswered. It stays queued and runs after the turn.
	var stopping int
	if err := tx.Get(&stopping, `SELECT count(*) FROM sessions WHERE session_id = ? AND interrupt_generation = ?`,
		x.SessionID, x.Generation); err != nil {
		return nil, nil, err
	}
	if stopping > 0 {
		return nil, nil, nil
	}
	var taken []Admission
	if err := tx.Select(&taken, `UPDATE session_admissions
		SET status = 'started', execution_generation = ?, owner_epoch = ?, started_at = ?, steered_into = ?
		WHERE status <> 'terminal' AND target_session_id = ? AND status = 'queued' AND delivery = 'steer'
		RETURNING `+columns, x.Generation, x.Daemon, store.Now(), x.AdmissionID, x.SessionID); err != nil {
		return nil, nil, err
	}
	sort.Slice(taken, func(i, j int) bool {
		if taken[i].QueueOrder != taken[j].QueueOrder {
			return taken[i].QueueOrder < taken[j].QueueOrder
		}
		return taken[i].Seq < taken[j].Seq
	})
	msgs := make([]store.Message, 0, len(taken))
	for _, a := range taken {
		m, err := tx.AppendMessage(a.SessionID, a.AdmissionID, transcript.RoleUser, a.Text, nil, "", "")
		if err != nil {
			return nil, nil, err
		}
		m.Sender = a.Sender
		msgs = append(msgs, m)
		if _, err := tx.AppendEvent(a.SessionID, protocol.EventAdmissionUpdated, a.AdmissionID, a.Generation(), a.Receipt()); err != nil {
			return nil, nil, err
		}
	}
	return taken, msgs, nil
}

// settleSteers moves the steers taken into host (status from: started at
// a settle, unknown at a resolve) to terminal with the host's outcome (and
// errText, and resolvedBy when valid), each with an admission.updated
// event.
func settleSteers(tx *store.Tx, host Admission, from Status, outcome Outcome, errText string, resolvedBy sql.NullString) error {
	var steers []Admission
	if err := tx.Select(&steers, `UPDATE session_admissions
		SET status = 'terminal', outcome = ?, error = ?, settled_at = ?, resolved_by = ?
		WHERE status <> 'terminal' AND target_session_id = ? AND status = ? AND steered_into = ?
		RETURNING `+columns, string(outcome), sql.NullString{String: errText, Valid: errText != ""}, store.Now(), resolvedBy,
		host.SessionID, string(from), host.AdmissionID); err != nil {
		return err
	}
	sort.Slice(steers, func(i, j int) bool { return steers[i].Seq < steers[j].Seq })
	for _, a := range steers {
		if _, err := tx.AppendEvent(a.SessionID, protocol.EventAdmissionUpdated, a.AdmissionID, a.Generation(), a.Receipt()); err != nil {
			return err
		}
	}
	return nil
}
