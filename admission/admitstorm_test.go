package admission_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/sessiond/sessiond/admission"
	"github.com/sessiond/sessiond/protocol"
)

// TestAdmitSameInputIDStorm: four daemons admit one input_id at once, in
// every when_busy mode, two of them with take: true, while the owner
// settles its running turn and claims the next, cancels and moves queued
// inputs, and (every fourth round) the session is deleted. Every admit
// answers the one admission (one row, one non-duplicate receipt) or, once
// the session is gone, ErrSessionNotFound; the session's seqs and event
// seqs stay dense; and no transaction deadlocks (the admit's seq update
// takes the session's row lock before anything else it locks).
func TestAdmitSameInputIDStorm(t *testing.T) {
	e := newEnvOpt(t, fastSync)
	ctx := context.Background()
	owner := e.daemon("a")
	qs := []*admission.Queue{owner, e.daemon("b"), e.daemon("c"), e.daemon("d")}
	modes := []protocol.WhenBusy{protocol.WhenBusyQueue, protocol.WhenBusySteer, protocol.WhenBusyInterrupt, ""}
	reruns := e.db.Reruns()
	for i := range 24 {
		sess := fmt.Sprintf("s%d", i)
		e.session(sess)
		if _, ok, err := owner.Take(ctx, sess); err != nil || !ok {
			t.Fatalf("take %s: %v %v", sess, ok, err)
		}
		deleted := i%4 == 3 // an idle session (a busy one cannot be deleted)
		var running admission.Admission
		var rows []admission.Admission
		if !deleted {
			for k := range 4 {
				if _, err := owner.Admit(ctx, req(sess, fmt.Sprint("pre-", k), "pre"), nil); err != nil {
					t.Fatal(err)
				}
			}
			var err error
			if running, err = owner.Claim(ctx, sess); err != nil {
				t.Fatal(err)
			}
			rows = e.rows(sess)
		}
		if i%2 == 1 {
			e.lease(owner.Daemon, -1000) // the owner's lease ran out: take: true takes it
		} else {
			e.lease(owner.Daemon, 60_000)
		}
		recs := make([]admission.Receipt, len(qs))
		errs := make([]error, len(qs))
		var wg sync.WaitGroup
		start := make(chan struct{})
		for j, q := range qs {
			wg.Go(func() {
				<-start
				r := admission.AdmitRequest{SessionID: sess, InputID: "same", Text: "same text", WhenBusy: modes[j], Take: j == 1 || j == 2}
				recs[j], errs[j] = q.Admit(ctx, r, nil)
			})
		}
		wg.Go(func() { <-start; qs[3].Take(ctx, sess) })
		if deleted {
			// Refused (the session is busy) once an admit committed.
			wg.Go(func() { <-start; qs[2].DeleteSession(ctx, sess) })
		} else {
			wg.Go(func() {
				<-start
				owner.SettleNext(ctx, running, admission.OutcomeCompleted, "", nil, nil) // fenced when taken: fine
			})
			wg.Go(func() { <-start; owner.Cancel(ctx, sess, rows[2].AdmissionID) })
			wg.Go(func() { <-start; owner.Move(ctx, sess, rows[3].AdmissionID, rows[1].AdmissionID) })
		}
		close(start)
		wg.Wait()
		id, fresh := "", 0
		for j := range qs {
			if errs[j] != nil {
				if deleted && errors.Is(errs[j], admission.ErrSessionNotFound) {
					continue
				}
				t.Fatalf("round %d: admit %d (%q): %v", i, j, modes[j], errs[j])
			}
			if id == "" {
				id = recs[j].AdmissionID
			}
			if recs[j].AdmissionID != id {
				t.Fatalf("round %d: receipts name %s and %s, want one admission", i, id, recs[j].AdmissionID)
			}
			if !recs[j].Duplicate {
				fresh++
			}
		}
		if id != "" && fresh != 1 {
			t.Fatalf("round %d: %d receipts are not duplicates, want 1: %+v", i, fresh, recs)
		}
		var n, next int64
		if err := e.db.Get(ctx, &n, `SELECT count(*) FROM session_admissions WHERE target_session_id = ?`, sess); err != nil {
			t.Fatal(err)
		}
		if err := e.db.Get(ctx, &next, `SELECT coalesce((SELECT next_admission_seq FROM sessions WHERE session_id = ?), 0)`, sess); err != nil {
			t.Fatal(err)
		}
		if next == 0 {
			if !deleted || n != 0 || id != "" {
				t.Fatalf("round %d: session gone (deleted %v) with %d admissions, receipt for %q", i, deleted, n, id)
			}
			continue
		}
		want := int64(5)
		if deleted {
			want = 1
		}
		if id == "" || n != want || next != want+1 {
			t.Fatalf("round %d: %d admissions, next_admission_seq %d, receipt %q; want %d, %d and one admission", i, n, next, id, want, want+1)
		}
		evs, complete, err := e.db.EventsAfter(e.db.Reads(ctx), sess, 0)
		if err != nil || !complete {
			t.Fatalf("round %d: events: complete %v, %v", i, complete, err)
		}
		for k, ev := range evs {
			if ev.Seq != int64(k+1) {
				t.Fatalf("round %d: event %d has seq %d", i, k, ev.Seq)
			}
		}
		if last := e.sess(sess).LastEvent; last != int64(len(evs)) {
			t.Fatalf("round %d: last_event_seq %d, %d events", i, last, len(evs))
		}
	}
	if d := e.db.Reruns() - reruns; d != 0 {
		t.Errorf("%d transactions re-run after a deadlock or serialization failure", d)
	}
}
