package store

import (
	"encoding/json"
	"fmt"

	"github.com/sessiond/sessiond/protocol"
)

// EventRetention is how many durable events each session keeps. Older ones
// are pruned as new ones are appended; session.resume with an after_seq
// older than the retained window answers snapshot_required. Documented in
// docs/protocol.md section 6.
const EventRetention = 10000

// Event is one durable session event (table events). Seq increases by one
// per event per session. Payload is JSON.
type Event struct {
	SessionID           string          `db:"session_id" json:"session_id"`
	Seq                 int64           `db:"seq" json:"seq"`
	Type                string          `db:"type" json:"type"`
	AdmissionID         *string         `db:"admission_id" json:"admission_id,omitempty"`
	ExecutionGeneration *int64          `db:"execution_generation" json:"execution_generation,omitempty"`
	Payload             json.RawMessage `db:"payload" json:"payload"`
	CreatedAt           string          `db:"created_at" json:"created_at"`
}

// SetEventSink sets the function that receives every appended event after
// its transaction committed, in commit order, on the committer goroutine. It
// must not block. Set it before the first write.
func (db *DB) SetEventSink(f func(Event)) { db.sink = f }

// AppendEvent appends a durable event for sessionID in this transaction and
// publishes it to the event sink once committed. admissionID may be "" and
// generation 0 for none. payload is marshalled to JSON. Returns the event
// with its seq. Prunes events beyond EventRetention every 64 appends.
func (t *Tx) AppendEvent(sessionID string, typ protocol.EventType, admissionID string, generation int64, payload any) (Event, error) {
	body, err := json.Marshal(payload)
	if err != nil {
		return Event{}, fmt.Errorf("event %s payload: %w", typ, err)
	}
	ev := Event{SessionID: sessionID, Type: string(typ), Payload: body, CreatedAt: Now()}
	if admissionID != "" {
		ev.AdmissionID = &admissionID
	}
	if generation > 0 {
		ev.ExecutionGeneration = &generation
	}
	if t.pg != nil {
		// One round trip to the server instead of two: the seq and the row
		// in one statement (no row when the session is gone).
		if err := t.Get(&ev.Seq, `WITH s AS (UPDATE sessions SET last_event_seq = last_event_seq + 1
				WHERE session_id = ? RETURNING last_event_seq)
			INSERT INTO events (session_id, seq, type, admission_id, execution_generation, payload, created_at)
			SELECT ?::text, last_event_seq, ?::text, ?::text, ?::bigint, ?::text, ?::text FROM s RETURNING seq`,
			sessionID, ev.SessionID, ev.Type, ev.AdmissionID, ev.ExecutionGeneration, string(ev.Payload), ev.CreatedAt); err != nil {
			return Event{}, fmt.Errorf("event %s: session %s: %w", typ, sessionID, err)
		}
	} else {
		if err := t.Get(&ev.Seq, `UPDATE sessions SET last_event_seq = last_event_seq + 1
			WHERE session_id = ? RETURNING last_event_seq`, sessionID); err != nil {
			return Event{}, fmt.Errorf("event %s: session %s: %w", typ, sessionID, err)
		}
		if _, err := t.Exec(`INSERT INTO events (session_id, seq, type, admission_id, execution_generation, payload, created_at)
			VALUES (?, ?, ?, ?, ?, ?, ?)`, ev.SessionID, ev.Seq, ev.Type, ev.AdmissionID, ev.ExecutionGeneration, string(ev.Payload), ev.CreatedAt); err != nil {
			return Event{}, fmt.Errorf("event %s: %w", typ, err)
		}
	}
	if ev.Seq%64 == 0 && ev.Seq > EventRetention {
		// tool.running of an admission that is not terminal yet is kept: a
		// boot after a crash needs it to kill the command, and the resolve
		// to say that the command ran (transcript.Close).
		if _, err := t.Exec(`DELETE FROM events WHERE session_id = ? AND seq <= ?
			AND NOT (type = 'tool.running' AND admission_id IN (SELECT admission_id FROM session_admissions
				WHERE target_session_id = ? AND status <> 'terminal'))`, sessionID, ev.Seq-EventRetention, sessionID); err != nil {
			return Event{}, fmt.Errorf("prune events: %w", err)
		}
	}
	if t.sink != nil {
		sink := t.sink
		t.OnCommit(func() { sink(ev) })
	}
	return ev, nil
}

// EventsAfter returns the retained events of sessionID with seq > after, in
// order, and whether the window is complete (false when events after `after`
// were already pruned, so the caller needs a fresh snapshot).
func (db *DB) EventsAfter(q Queryer, sessionID string, after int64) (events []Event, complete bool, err error) {
	// payload is TEXT, which the drivers return as a string; json.RawMessage
	// scans only from []byte, hence the copy.
	var rows []struct {
		SessionID           string  `db:"session_id"`
		Seq                 int64   `db:"seq"`
		Type                string  `db:"type"`
		AdmissionID         *string `db:"admission_id"`
		ExecutionGeneration *int64  `db:"execution_generation"`
		Payload             string  `db:"payload"`
		CreatedAt           string  `db:"created_at"`
	}
	if err := q.Select(&rows, `SELECT session_id, seq, type, admission_id, execution_generation, payload, created_at
		FROM events WHERE session_id = ? AND seq > ? ORDER BY seq`, sessionID, after); err != nil {
		return nil, false, Classify(err)
	}
	events = make([]Event, len(rows))
	for i, r := range rows {
		events[i] = Event{SessionID: r.SessionID, Seq: r.Seq, Type: r.Type, AdmissionID: r.AdmissionID,
			ExecutionGeneration: r.ExecutionGeneration, Payload: json.RawMessage(r.Payload), CreatedAt: r.CreatedAt}
	}
	var last int64
	if err := q.Get(&last, `SELECT last_event_seq FROM sessions WHERE session_id = ?`, sessionID); err != nil {
		return nil, false, Classify(err)
	}
	if after >= last {
		return nil, true, nil
	}
	// Complete only when every seq in (after, last] is there: rows kept
	// past the retention window (tool.running of open admissions) must not
	// hide a pruned gap behind them.
	if int64(len(events)) != last-after {
		return nil, false, nil
	}
	return events, true, nil
}

// Queryer runs reads with '?' placeholders: *Tx, *Reads (DB.Reads,
// DB.ReadTx).
type Queryer interface {
	Get(dest any, query string, args ...any) error
	Select(dest any, query string, args ...any) error
}
