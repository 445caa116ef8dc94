package admission

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/sessiond/sessiond/cluster"
	"github.com/sessiond/sessiond/store"
	"github.com/sessiond/sessiond/transcript"
)

// Execution is one started admission as its owner runs it: the fence of
// every write the turn makes (transcript rows, tool events, prompts, the
// settle). Daemon is the daemon that claimed it (its boot epoch, the
// owner_epoch column of the admission and of its prompts); LeaseEpoch is
// the session's lease_epoch (the fencing token) under which that daemon
// claimed it, 0 when the caller does not know it (a prompt answered on
// another daemon: the takeover that would have changed it also made the
// admission unknown, which the check sees).
type Execution struct {
	SessionID   string
	AdmissionID string
	Generation  int64
	Daemon      cluster.DaemonID
	LeaseEpoch  cluster.LeaseEpoch
}

// Execution returns the execution of a started (or once started) row.
func (a Admission) Execution() Execution {
	return Execution{SessionID: a.SessionID, AdmissionID: a.AdmissionID, Generation: a.Generation(),
		Daemon: a.Daemon.V, LeaseEpoch: a.LeaseEpoch}
}

// Same reports whether e and o name one execution; a LeaseEpoch of 0
// matches any.
func (e Execution) Same(o Execution) bool {
	return e.SessionID == o.SessionID && e.AdmissionID == o.AdmissionID && e.Generation == o.Generation &&
		e.Daemon == o.Daemon && (e.LeaseEpoch == 0 || o.LeaseEpoch == 0 || e.LeaseEpoch == o.LeaseEpoch)
}

// ErrFenced is what Execution.Check returns (wrapped in a *FenceError) when
// the execution is no longer the live one: a stale turn must stop and write
// nothing more.
var ErrFenced = errors.New("the execution is no longer live")

// FenceError says why Check refused an execution. errors.Is(err, ErrFenced)
// and errors.Is(err, ErrStaleGeneration) hold.
type FenceError struct {
	Execution Execution
	// Owner is true when the admission is fine but the session is no
	// longer owned by the execution's daemon under its epoch (a takeover,
	// a release, a lost lease).
	Owner  bool
	Reason string // e.g. "admission is unknown", "session owned by daemon 4 under lease epoch 7"
}

func (e *FenceError) Error() string {
	return fmt.Sprintf("%v: admission %s (generation %d, daemon %d, lease epoch %d) in session %s: %s",
		ErrFenced, e.Execution.AdmissionID, e.Execution.Generation, e.Execution.Daemon, e.Execution.LeaseEpoch, e.Execution.SessionID, e.Reason)
}

// Is makes errors.Is(err, ErrFenced) and errors.Is(err, ErrStaleGeneration)
// hold: a fenced execution is a stale generation on the wire.
func (e *FenceError) Is(target error) bool {
	return target == ErrFenced || target == ErrStaleGeneration
}

type fenceRow struct {
	Status      string                     `db:"status"`
	Generation  int64                      `db:"generation"`
	AdmDaemon   cluster.DaemonID           `db:"adm_daemon"`
	OwnerDaemon sql.Null[cluster.DaemonID] `db:"owner_daemon"`
	LeaseEpoch  cluster.LeaseEpoch         `db:"lease_epoch"`
	Interrupt   sql.NullInt64              `db:"interrupt_generation"`
}

func (e Execution) read(q store.Queryer) (fenceRow, error) {
	var r fenceRow
	err := q.Get(&r, `SELECT a.status, coalesce(a.execution_generation, 0) AS generation, coalesce(a.owner_epoch, 0) AS adm_daemon,
		s.owner_daemon, s.lease_epoch, s.interrupt_generation
		FROM session_admissions a JOIN sessions s ON s.session_id = a.target_session_id
		WHERE a.admission_id = ? AND a.target_session_id = ?`, e.AdmissionID, e.SessionID)
	if errors.Is(err, sql.ErrNoRows) {
		return r, &FenceError{Execution: e, Reason: "no such admission"}
	}
	return r, err
}

func (e Execution) judge(r fenceRow) error {
	switch {
	case r.Status != string(StatusStarted):
		return &FenceError{Execution: e, Reason: "admission is " + r.Status}
	case r.Generation != e.Generation:
		return &FenceError{Execution: e, Reason: fmt.Sprintf("admission runs generation %d", r.Generation)}
	case r.AdmDaemon != e.Daemon:
		return &FenceError{Execution: e, Reason: fmt.Sprintf("admission was started by daemon %d", r.AdmDaemon)}
	case !r.OwnerDaemon.Valid || r.OwnerDaemon.V != e.Daemon || (e.LeaseEpoch != 0 && r.LeaseEpoch != e.LeaseEpoch):
		return &FenceError{Execution: e, Owner: true,
			Reason: fmt.Sprintf("session owned by daemon %d under lease epoch %d", r.OwnerDaemon.V, r.LeaseEpoch)}
	}
	return nil
}

// Check is the transactional fence: it returns nil when, in tx, the
// admission is started with e.Generation by e.Daemon, and its session is
// still owned by e.Daemon under e.LeaseEpoch (any epoch when 0); a
// *FenceError (errors.Is ErrFenced and ErrStaleGeneration) otherwise. Other
// errors are the store's. Every write of a turn runs it first in its
// transaction, so a write of a stale execution never commits. In a write
// transaction (a *store.Tx) it first takes the session row's lock
// (Tx.LockSessions): on PostgreSQL under READ COMMITTED, a takeover, a
// settle or a claim of the session then cannot commit between the check
// and this transaction's commit.
func (e Execution) Check(tx store.Queryer) error {
	if t, ok := tx.(*store.Tx); ok {
		if err := t.LockSessions(e.SessionID); err != nil {
			return err
		}
	}
	r, err := e.read(tx)
	if err != nil {
		return err
	}
	return e.judge(r)
}

// CheckAnswerable is the fence of an answer to one of the execution's
// prompts given on any daemon, from the durable state only: Check, and the
// owner's lease is alive on the database's clock, and no session.interrupt
// was requested for its generation. The daemon that runs the execution
// also asks its scheduler (IsLive).
func (e Execution) CheckAnswerable(tx store.Queryer, d cluster.Dialect) error {
	if t, ok := tx.(*store.Tx); ok {
		if err := t.LockSessions(e.SessionID); err != nil {
			return err
		}
	}
	r, err := e.read(tx)
	if err != nil {
		return err
	}
	if err := e.judge(r); err != nil {
		return err
	}
	if r.Interrupt.Valid && r.Interrupt.Int64 == e.Generation {
		return &FenceError{Execution: e, Reason: "an interrupt was requested"}
	}
	var live int
	if err := tx.Get(&live, `SELECT CASE WHEN `+d.LiveDaemon("?")+` THEN 1 ELSE 0 END`, e.Daemon); err != nil {
		return err
	}
	if live != 1 {
		return &FenceError{Execution: e, Owner: true, Reason: fmt.Sprintf("the lease of daemon %d expired", e.Daemon)}
	}
	return nil
}

// closeTurn repairs, in tx, the transcript of a turn that did not complete
// (transcript.Close): the synthetic results and the boundary are appended.
// A call counts as running when a tool.running event of the admission
// names it.
func closeTurn(tx *store.Tx, sessionID, admissionID string, ending transcript.Ending) error {
	var payloads []string
	if err := tx.Select(&payloads, `SELECT payload FROM events
		WHERE session_id = ? AND admission_id = ? AND type = 'tool.running'`, sessionID, admissionID); err != nil {
		return err
	}
	var running []string
	for _, p := range payloads {
		var v struct {
			ToolCallID string `json:"tool_call_id"`
		}
		if json.Unmarshal([]byte(p), &v) == nil && v.ToolCallID != "" {
			running = append(running, v.ToolCallID)
		}
	}
	var ms []store.Message
	if err := tx.Select(&ms, `SELECT id, session_id, admission_id, role, content, tool_calls, tool_call_id, kind, created_at
		FROM messages WHERE session_id = ? AND admission_id = ? ORDER BY id`, sessionID, admissionID); err != nil {
		return err
	}
	turn, err := entries(ms)
	if err != nil {
		return err
	}
	for _, r := range transcript.Close(turn, running, ending) {
		if _, err := tx.AppendMessage(sessionID, admissionID, r.Role, r.Content, nil, r.ToolCallID, r.Kind); err != nil {
			return err
		}
	}
	return nil
}

// entries are stored messages as the transcript package's entries (roles,
// contents, tool calls), for its repair rules.
func entries(ms []store.Message) ([]transcript.Entry, error) {
	out := make([]transcript.Entry, 0, len(ms))
	for _, m := range ms {
		calls, err := m.Calls()
		if err != nil {
			return nil, err
		}
		e := transcript.Entry{Role: m.Role, Content: m.Content, ToolCallID: m.ToolCallID.String, Kind: m.Kind.String}
		for _, c := range calls {
			e.ToolCalls = append(e.ToolCalls, transcript.ToolCall{ID: c.ID, Name: c.Name, Arguments: c.Arguments})
		}
		out = append(out, e)
	}
	return out, nil
}
