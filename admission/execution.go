package admission

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/sessiond/sessiond/store"
	"github.com/sessiond/sessiond/transcript"
)

// Execution is one started admission as its owner runs it: the fence of
// every write the turn makes (transcript rows, tool events, prompts, the
// settle). It is live while its admission is started with Generation and
// its session is still owned under OwnerEpoch (the session's fencing
// token, stamped on the admission at claim).
type Execution struct {
	SessionID   string
	AdmissionID string
	Generation  int64
	OwnerEpoch  int64
}

// Execution returns the execution of a started (or once started) row.
func (a Admission) Execution() Execution {
	return Execution{SessionID: a.SessionID, AdmissionID: a.AdmissionID, Generation: a.Generation(), OwnerEpoch: a.OwnerEpoch.Int64}
}

// ErrFenced is what Execution.Check returns (wrapped in a *FenceError) when
// the execution is no longer the live one: a stale turn must stop and write
// nothing more.
var ErrFenced = errors.New("the execution is no longer live")

// FenceError says why Check refused an execution. Is(ErrFenced) holds.
type FenceError struct {
	Execution Execution
	Reason    string // e.g. "admission is unknown", "session owned under epoch 4"
}

func (e *FenceError) Error() string {
	return fmt.Sprintf("%v: admission %s (generation %d, owner epoch %d) in session %s: %s",
		ErrFenced, e.Execution.AdmissionID, e.Execution.Generation, e.Execution.OwnerEpoch, e.Execution.SessionID, e.Reason)
}

// Is makes errors.Is(err, ErrFenced) and errors.Is(err, ErrStaleGeneration)
// hold: a fenced execution is a stale generation on the wire.
func (e *FenceError) Is(target error) bool {
	return target == ErrFenced || target == ErrStaleGeneration
}

// fenceRow is what Check reads.
type fenceRow struct {
	Status     string `db:"status"`
	Generation int64  `db:"generation"`
	AdmEpoch   int64  `db:"adm_epoch"`
}

// Check is the transactional fence: it returns nil when, in tx, the
// admission is started with e.Generation under e.OwnerEpoch, and a
// *FenceError (errors.Is ErrFenced and ErrStaleGeneration) otherwise. Other
// errors are the store's. Every write of a turn runs it first in the same
// transaction, so a write of a stale execution never commits.
func (e Execution) Check(tx store.Queryer) error {
	var r fenceRow
	err := tx.Get(&r, `SELECT a.status, coalesce(a.execution_generation, 0) AS generation, coalesce(a.owner_epoch, 0) AS adm_epoch
		FROM session_admissions a
		WHERE a.admission_id = ? AND a.target_session_id = ?`, e.AdmissionID, e.SessionID)
	if errors.Is(err, sql.ErrNoRows) {
		return &FenceError{Execution: e, Reason: "no such admission"}
	} else if err != nil {
		return err
	}
	switch {
	case r.Status != string(StatusStarted):
		return &FenceError{Execution: e, Reason: "admission is " + r.Status}
	case r.Generation != e.Generation:
		return &FenceError{Execution: e, Reason: fmt.Sprintf("admission runs generation %d", r.Generation)}
	case r.AdmEpoch != e.OwnerEpoch:
		return &FenceError{Execution: e, Reason: fmt.Sprintf("admission was started under owner epoch %d", r.AdmEpoch)}
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
	turn := make([]transcript.Entry, 0, len(ms))
	for _, m := range ms {
		calls, err := m.Calls()
		if err != nil {
			return err
		}
		e := transcript.Entry{Role: m.Role, Content: m.Content, ToolCallID: m.ToolCallID.String, Kind: m.Kind.String}
		for _, c := range calls {
			e.ToolCalls = append(e.ToolCalls, transcript.ToolCall{ID: c.ID, Name: c.Name, Arguments: c.Arguments})
		}
		turn = append(turn, e)
	}
	for _, r := range transcript.Close(turn, running, ending) {
		if _, err := tx.AppendMessage(sessionID, admissionID, r.Role, r.Content, nil, r.ToolCallID, r.Kind); err != nil {
			return err
		}
	}
	return nil
}
