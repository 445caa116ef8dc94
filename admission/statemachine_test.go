package admission_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/sessiond/sessiond/admission"
	"github.com/sessiond/sessiond/store"
)

// move is the documented effect of an allowed transition.
type move struct {
	status   admission.Status
	outcome  string // "" = NULL
	claim    bool   // generation = session's + 1, owner_epoch = this epoch
	events   int    // events appended to the session
	messages int    // transcript rows appended
	errText  string
}

var fromStates = []string{
	"queued", "started", "unknown",
	"terminal/completed", "terminal/failed", "terminal/interrupted", "terminal/cancelled",
	"terminal/resolved", // interrupted by ResolveUnknown
}

// TestStateMachineTable runs every operation from every status and checks
// that allowed moves change the row exactly as documented and forbidden
// ones return the documented typed error and change nothing.
func TestStateMachineTable(t *testing.T) {
	e := newEnvOpt(t, fastSync)
	ctx := context.Background()
	e.session("other")

	// setup builds a fresh session whose newest admission is in state from
	// (after one completed turn, so that generations start above 1).
	setup := func(t *testing.T, sess, from string) admission.Admission {
		e.admit(sess, "in-0", "earlier")
		_, err := e.q.Settle(ctx, e.claim(sess), admission.OutcomeCompleted, "", nil)
		check(t, err)
		rec := e.admit(sess, "in-1", "hello from "+sess)
		if from == "queued" {
			return e.mustRow(rec.AdmissionID)
		}
		if from == "terminal/cancelled" {
			if _, err := e.q.Cancel(ctx, sess, rec.AdmissionID); err != nil {
				t.Fatal(err)
			}
			return e.mustRow(rec.AdmissionID)
		}
		a := e.claim(sess)
		switch from {
		case "started":
		case "unknown", "terminal/resolved":
			// A later boot (another epoch) finds the row started.
			later := &admission.Queue{DB: e.db, Daemon: e.epoch + 1000}
			if _, err := later.Recover(ctx, nil); err != nil {
				t.Fatal(err)
			}
			if from == "terminal/resolved" {
				if _, err := e.q.ResolveUnknown(ctx, sess, a.AdmissionID, a.Generation(), nil); err != nil {
					t.Fatal(err)
				}
			}
		case "terminal/completed":
			_, err := e.q.Settle(ctx, a, admission.OutcomeCompleted, "", nil)
			check(t, err)
		case "terminal/failed":
			_, err := e.q.Settle(ctx, a, admission.OutcomeFailed, "boom", nil)
			check(t, err)
		case "terminal/interrupted":
			_, err := e.q.Settle(ctx, a, admission.OutcomeInterrupted, "", nil)
			check(t, err)
		default:
			t.Fatalf("no setup for %s", from)
		}
		a = e.mustRow(a.AdmissionID)
		if want := statusOf(from); string(a.Status) != want {
			t.Fatalf("setup %s: row is %s", from, a.Status)
		}
		return a
	}

	withGen := func(a admission.Admission, g int64) admission.Admission {
		a.ExecutionGeneration.Int64, a.ExecutionGeneration.Valid = g, g != 0
		return a
	}
	stale := admission.ErrStaleGeneration
	type op struct {
		name string
		do   func(a admission.Admission) (admission.Admission, error)
		// expect returns the allowed move from `from`, or the error.
		expect func(from string) (*move, error)
	}
	var ops []op
	ops = append(ops, op{"Claim",
		func(a admission.Admission) (admission.Admission, error) { return e.q.Claim(ctx, a.SessionID) },
		func(from string) (*move, error) {
			switch from {
			case "queued":
				return &move{status: admission.StatusStarted, claim: true, events: 2, messages: 1}, nil
			case "started":
				return nil, admission.ErrSessionBusy
			case "unknown":
				return nil, admission.ErrUnknownExecution
			}
			return nil, admission.ErrNothingQueued
		}})
	for _, o := range []admission.Outcome{admission.OutcomeCompleted, admission.OutcomeFailed, admission.OutcomeInterrupted} {
		errText := ""
		if o == admission.OutcomeFailed {
			errText = "model exploded"
		}
		msgs := 1 // boundary
		if o == admission.OutcomeCompleted {
			msgs = 0
		}
		ops = append(ops,
			op{"Settle/" + string(o) + "/right-gen",
				func(a admission.Admission) (admission.Admission, error) {
					return e.q.Settle(ctx, a, o, errText, nil)
				},
				func(from string) (*move, error) {
					if from == "started" {
						return &move{status: admission.StatusTerminal, outcome: string(o), events: 2, messages: msgs, errText: errText}, nil
					}
					return nil, stale
				}},
			op{"Settle/" + string(o) + "/wrong-gen",
				func(a admission.Admission) (admission.Admission, error) {
					return e.q.Settle(ctx, withGen(a, a.Generation()+1), o, errText, nil)
				},
				func(string) (*move, error) { return nil, stale }},
			op{"Settle/" + string(o) + "/older-gen",
				func(a admission.Admission) (admission.Admission, error) {
					return e.q.Settle(ctx, withGen(a, a.Generation()-1), o, errText, nil)
				},
				func(string) (*move, error) { return nil, stale }},
			op{"Settle/" + string(o) + "/zero-gen",
				func(a admission.Admission) (admission.Admission, error) {
					return e.q.Settle(ctx, withGen(a, 0), o, errText, nil)
				},
				func(string) (*move, error) { return nil, stale }},
		)
	}
	ops = append(ops,
		op{"Settle/cancelled/refused",
			func(a admission.Admission) (admission.Admission, error) {
				return e.q.Settle(ctx, a, admission.OutcomeCancelled, "", nil)
			},
			func(string) (*move, error) { return nil, admission.ErrIllegalTransition }},
		op{"Settle/other-session",
			func(a admission.Admission) (admission.Admission, error) {
				a.SessionID = "other"
				return e.q.Settle(ctx, withGen(a, max(a.Generation(), 1)), admission.OutcomeCompleted, "", nil)
			},
			func(string) (*move, error) { return nil, admission.ErrNotFound }},
		op{"Cancel",
			func(a admission.Admission) (admission.Admission, error) {
				return e.q.Cancel(ctx, a.SessionID, a.AdmissionID)
			},
			func(from string) (*move, error) {
				switch from {
				case "queued":
					return &move{status: admission.StatusTerminal, outcome: "cancelled", events: 1}, nil
				case "unknown":
					return nil, admission.ErrUnknownExecution
				}
				return nil, admission.ErrNotQueued
			}},
		op{"Cancel/other-session",
			func(a admission.Admission) (admission.Admission, error) {
				return e.q.Cancel(ctx, "other", a.AdmissionID)
			},
			func(string) (*move, error) { return nil, admission.ErrNotFound }},
		op{"Cancel/missing-id",
			func(a admission.Admission) (admission.Admission, error) {
				return e.q.Cancel(ctx, a.SessionID, "adm_missing")
			},
			func(string) (*move, error) { return nil, admission.ErrNotFound }},
		op{"ResolveUnknown/right-gen",
			func(a admission.Admission) (admission.Admission, error) {
				return e.q.ResolveUnknown(ctx, a.SessionID, a.AdmissionID, a.Generation(), nil)
			},
			func(from string) (*move, error) {
				if from == "unknown" {
					return &move{status: admission.StatusTerminal, outcome: "interrupted", events: 2, messages: 1}, nil
				}
				return nil, stale
			}},
		op{"ResolveUnknown/wrong-gen",
			func(a admission.Admission) (admission.Admission, error) {
				return e.q.ResolveUnknown(ctx, a.SessionID, a.AdmissionID, a.Generation()+1, nil)
			},
			func(string) (*move, error) { return nil, stale }},
		op{"ResolveUnknown/zero-gen",
			func(a admission.Admission) (admission.Admission, error) {
				return e.q.ResolveUnknown(ctx, a.SessionID, a.AdmissionID, 0, nil)
			},
			func(string) (*move, error) { return nil, stale }},
		op{"ResolveUnknown/other-session",
			func(a admission.Admission) (admission.Admission, error) {
				return e.q.ResolveUnknown(ctx, "other", a.AdmissionID, max(a.Generation(), 1), nil)
			},
			func(string) (*move, error) { return nil, admission.ErrNotFound }},
		op{"Recover/new-epoch",
			func(a admission.Admission) (admission.Admission, error) {
				res, err := (&admission.Queue{DB: e.db, Daemon: e.epoch + 1}).Recover(ctx, nil)
				for _, u := range res.Unknown {
					if u.AdmissionID == a.AdmissionID {
						return u, err
					}
				}
				return admission.Admission{}, err
			},
			func(from string) (*move, error) {
				if from == "started" {
					return &move{status: admission.StatusUnknown, events: 1}, nil
				}
				return nil, nil
			}},
		op{"Recover/same-epoch",
			func(a admission.Admission) (admission.Admission, error) {
				res, err := e.q.Recover(ctx, nil)
				for _, u := range res.Unknown {
					if u.AdmissionID == a.AdmissionID {
						return u, fmt.Errorf("Recover of the owning epoch reported %s unknown", a.AdmissionID)
					}
				}
				return admission.Admission{}, err
			},
			func(string) (*move, error) { return nil, nil }},
	)

	n := 0
	for _, from := range fromStates {
		for _, o := range ops {
			n++
			sess := fmt.Sprintf("s%03d", n)
			t.Run(from+"/"+o.name, func(t *testing.T) {
				e.t = t
				e.session(sess)
				before := setup(t, sess, from)
				rowsBefore, sessBefore := e.rows(sess), e.sess(sess)
				msgsBefore, evBefore := len(e.messages(sess)), len(e.events(sess))
				otherBefore := e.sess("other")

				got, err := o.do(before)
				want, wantErr := o.expect(from)

				after := e.mustRow(before.AdmissionID)
				if e.sess("other") != otherBefore || len(e.rows("other")) != 0 {
					t.Errorf("session other changed")
				}
				if want == nil {
					if wantErr == nil && err != nil {
						t.Fatalf("want success without a move, got %v", err)
					}
					if wantErr != nil && !errors.Is(err, wantErr) {
						t.Fatalf("want %s, got %s", errName(wantErr), errName(err))
					}
					if rows := e.rows(sess); !slices.Equal(rows, rowsBefore) {
						t.Errorf("rows changed:\nbefore %+v\nafter  %+v", rowsBefore, rows)
					}
					if s := e.sess(sess); s != sessBefore {
						t.Errorf("session row changed: %+v → %+v", sessBefore, s)
					}
					if m, ev := len(e.messages(sess)), len(e.events(sess)); m != msgsBefore || ev != evBefore {
						t.Errorf("messages %d→%d, events %d→%d", msgsBefore, m, evBefore, ev)
					}
					return
				}
				if err != nil {
					t.Fatalf("want a move to %s/%s, got %s", want.status, want.outcome, errName(err))
				}
				got.LeaseEpoch = 0 // in memory only: the claim's lease epoch
				if got != after {
					t.Errorf("returned admission differs from the row:\nreturned %+v\nrow      %+v", got, after)
				}
				if after.Status != want.status || after.Outcome.String != want.outcome || after.Outcome.Valid != (want.outcome != "") {
					t.Errorf("row is %s/%v, want %s/%s", after.Status, after.Outcome, want.status, want.outcome)
				}
				if after.Error.String != want.errText || after.Error.Valid != (want.errText != "") {
					t.Errorf("error column %v, want %q", after.Error, want.errText)
				}
				// Identity and payload never change.
				if after.Seq != before.Seq || after.InputID != before.InputID || after.Text != before.Text ||
					after.PayloadDigest != before.PayloadDigest || after.CreatedAt != before.CreatedAt || after.SessionID != before.SessionID {
					t.Errorf("identity changed: %+v → %+v", before, after)
				}
				sessAfter := e.sess(sess)
				if want.claim {
					if after.Generation() != sessBefore.Gen+1 || sessAfter.Gen != sessBefore.Gen+1 {
						t.Errorf("claim: row gen %d, session gen %d→%d", after.Generation(), sessBefore.Gen, sessAfter.Gen)
					}
					if after.Daemon.V != e.epoch || !after.Daemon.Valid || !after.StartedAt.Valid {
						t.Errorf("claim: owner_epoch %v started_at %v", after.Daemon, after.StartedAt)
					}
				} else {
					if after.ExecutionGeneration != before.ExecutionGeneration || after.Daemon != before.Daemon || after.StartedAt != before.StartedAt {
						t.Errorf("generation/epoch/started_at changed: %+v → %+v", before, after)
					}
					if sessAfter.Gen != sessBefore.Gen {
						t.Errorf("session generation moved %d→%d", sessBefore.Gen, sessAfter.Gen)
					}
				}
				if (after.Status == admission.StatusTerminal) != after.SettledAt.Valid {
					t.Errorf("settled_at %v for status %s", after.SettledAt, after.Status)
				}
				if ev := len(e.events(sess)); ev != evBefore+want.events {
					t.Errorf("events %d→%d, want +%d", evBefore, ev, want.events)
				}
				if sessAfter.LastEvent != sessBefore.LastEvent+int64(want.events) {
					t.Errorf("last_event_seq %d→%d, want +%d", sessBefore.LastEvent, sessAfter.LastEvent, want.events)
				}
				if m := len(e.messages(sess)); m != msgsBefore+want.messages {
					t.Errorf("messages %d→%d, want +%d", msgsBefore, m, want.messages)
				}
				if sessAfter.NextSeq != sessBefore.NextSeq {
					t.Errorf("next_admission_seq moved")
				}
			})
			e.t = t
		}
	}
}

func statusOf(from string) string {
	if len(from) > 8 && from[:8] == "terminal" {
		return "terminal"
	}
	return from
}

func check(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestCheckConstraints shows that the schema itself refuses illegal rows,
// independently of the Go code.
func TestCheckConstraints(t *testing.T) {
	e := newEnv(t)
	e.session("s")
	now := store.Now()
	ins := func(id, reqID string, seq int, status string, outcome, gen, epoch any) error {
		return e.exec(`INSERT INTO session_admissions (admission_id, target_session_id, request_id, seq, status, outcome,
			execution_generation, owner_epoch, text, payload_digest, created_at) VALUES (?, 's', ?, ?, ?, ?, ?, ?, 'x', 'd', ?)`,
			id, reqID, seq, status, outcome, gen, epoch, now)
	}
	// Controls: legal rows of every status go in.
	check(t, ins("ok-q", "r1", 1, "queued", nil, nil, nil))
	check(t, ins("ok-s", "r2", 2, "started", nil, 1, 1))
	check(t, ins("ok-u", "r3", 3, "unknown", nil, 1, 1))
	check(t, ins("ok-t", "r4", 4, "terminal", "completed", 1, 1))
	check(t, ins("ok-c", "r5", 5, "terminal", "cancelled", nil, nil))

	bad := []struct {
		name string
		err  error
	}{
		{"terminal without outcome", ins("b1", "b1", 11, "terminal", nil, 1, 1)},
		{"outcome on a queued row", ins("b2", "b2", 12, "queued", "completed", nil, nil)},
		{"outcome on a started row", ins("b3", "b3", 13, "started", "completed", 1, 1)},
		{"started without execution_generation", ins("b4", "b4", 14, "started", nil, nil, 1)},
		{"started without owner_epoch", ins("b5", "b5", 15, "started", nil, 1, nil)},
		{"unknown without execution_generation", ins("b6", "b6", 16, "unknown", nil, nil, 1)},
		{"unknown status string", ins("b7", "b7", 17, "running", nil, nil, nil)},
		{"unknown outcome string", ins("b8", "b8", 18, "terminal", "done", 1, 1)},
		{"seq zero", ins("b9", "b9", 0, "queued", nil, nil, nil)},
		{"duplicate (session, request_id)", ins("b10", "r1", 19, "queued", nil, nil, nil)},
		{"duplicate (session, seq)", ins("b11", "b11", 1, "queued", nil, nil, nil)},
		{"update queued→terminal without outcome", e.exec(`UPDATE session_admissions SET status = 'terminal' WHERE admission_id = 'ok-q'`)},
		{"update queued→started without generation", e.exec(`UPDATE session_admissions SET status = 'started', owner_epoch = 1 WHERE admission_id = 'ok-q'`)},
		{"update queued→bogus status", e.exec(`UPDATE session_admissions SET status = 'done' WHERE admission_id = 'ok-q'`)},
		{"update queued row gets an outcome", e.exec(`UPDATE session_admissions SET outcome = 'failed' WHERE admission_id = 'ok-q'`)},
		{"update terminal row drops its outcome", e.exec(`UPDATE session_admissions SET outcome = NULL WHERE admission_id = 'ok-t'`)},
		{"update terminal→started keeping its outcome", e.exec(`UPDATE session_admissions SET status = 'started' WHERE admission_id = 'ok-t'`)},
		{"admission of a missing session", e.exec(`INSERT INTO session_admissions (admission_id, target_session_id, request_id, seq, status,
			text, payload_digest, created_at) VALUES ('b12', 'nope', 'x', 1, 'queued', 'x', 'd', ?)`, now)},
		{"negative session generation", e.exec(`UPDATE sessions SET execution_generation = -1 WHERE session_id = 's'`)},
	}
	for _, b := range bad {
		if b.err == nil {
			t.Errorf("%s: accepted", b.name)
		} else if !store.IsConstraint(b.err) {
			t.Errorf("%s: refused with a non-constraint error %v", b.name, b.err)
		}
	}
	if n := e.count(`SELECT COUNT(*) FROM session_admissions`); n != 5 {
		t.Errorf("%d rows, want the 5 controls", n)
	}
	var st string
	check(t, e.db.Get(context.Background(), &st, `SELECT status || '/' || coalesce(outcome, '-') FROM session_admissions WHERE admission_id = 'ok-q'`))
	if st != "queued/-" {
		t.Errorf("ok-q is %s after refused updates", st)
	}
}
