package admission_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sessiond/sessiond/admission"
	"github.com/sessiond/sessiond/cluster"
	"github.com/sessiond/sessiond/protocol"
	"github.com/sessiond/sessiond/store"
)

// The session.list rows and daemon.info counts read the FIFO's state:
// the running admission, the open and unknown ones, the open prompts.
func TestSummariesAndCounts(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.session("s1")
	e.session("s2")
	e.admit("s1", "in-1", "one")
	e.admit("s1", "in-2", "two")
	run := e.claim("s1")

	s, err := admission.SummaryOf(e.db.Reads(ctx), "s1")
	if err != nil || s.Running == nil || *s.Running != run.AdmissionID || s.PendingCount != 2 || s.UnknownCount != 0 || s.OpenPrompts != 0 || s.Cwd != "/tmp" {
		t.Fatalf("SummaryOf(s1) = %+v, %v", s, err)
	}
	if _, err := admission.SummaryOf(e.db.Reads(ctx), "nope"); err == nil {
		t.Fatal("SummaryOf of an unknown session: no error")
	}
	all, err := admission.List(e.db.Reads(ctx), admission.ListFilter{Limit: 10})
	if err != nil || len(all) != 2 {
		t.Fatalf("List = %+v, %v", all, err)
	}
	first, err := admission.List(e.db.Reads(ctx), admission.ListFilter{Limit: 1})
	if err != nil || len(first) != 1 || first[0].SessionID != all[0].SessionID {
		t.Fatalf("List(limit 1) = %+v, %v; want %s", first, err, all[0].SessionID)
	}
	next, err := admission.List(e.db.Reads(ctx), admission.ListFilter{BeforeAt: first[0].CreatedAt, BeforeID: first[0].SessionID, Limit: 10})
	if err != nil || len(next) != 1 || next[0].SessionID != all[1].SessionID {
		t.Fatalf("List after the cursor = %+v, %v; want %s", next, err, all[1].SessionID)
	}
	scoped, err := admission.List(e.db.Reads(ctx), admission.ListFilter{SessionID: "s2", Limit: 10})
	if err != nil || len(scoped) != 1 || scoped[0].SessionID != "s2" || scoped[0].Running != nil || scoped[0].PendingCount != 0 {
		t.Fatalf("List(s2) = %+v, %v", scoped, err)
	}
	if c, err := admission.CountAll(ctx, e.db); err != nil || c != (admission.Counts{Sessions: 2, Queued: 1}) {
		t.Fatalf("CountAll = %+v, %v", c, err)
	}

	e.crash() // s1's started admission becomes unknown and holds it
	if c, err := admission.CountAll(ctx, e.db); err != nil || c != (admission.Counts{Sessions: 2, Queued: 1, Held: 1}) {
		t.Fatalf("CountAll after the crash = %+v, %v", c, err)
	}
	if s, err := admission.SummaryOf(e.db.Reads(ctx), "s1"); err != nil || s.Running != nil || s.UnknownCount != 1 || s.PendingCount != 2 {
		t.Fatalf("SummaryOf(s1) after the crash = %+v, %v", s, err)
	}
	e.admit("s2", "in-3", "three") // queued counts every session's
	if c, err := admission.CountAll(ctx, e.db); err != nil || c != (admission.Counts{Sessions: 2, Queued: 2, Held: 1}) {
		t.Fatalf("CountAll after an admission to s2 = %+v, %v", c, err)
	}
}

// The ownership reads of a cluster: who owns a session under which lease
// epoch, its started admission, a durable interrupt request, the queued
// sessions a daemon owns, the next lease to run out.
func TestOwnershipReadsAndTheInterruptRequest(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	a, b := e.daemon(""), e.daemon("")
	e.session("s")
	e.session("idle")
	e.admit("s", "in-1", "one")
	e.admit("s", "in-2", "two")
	run, err := a.Claim(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	o, err := b.OwnerOf(ctx, "s")
	if err != nil || !o.Daemon.Valid || o.Daemon.V != a.Daemon || o.LeaseEpoch != run.LeaseEpoch || o.Interrupt.Valid {
		t.Fatalf("OwnerOf(s) = %+v, %v; want daemon %d under %d", o, err, a.Daemon, run.LeaseEpoch)
	}
	if o, err := b.OwnerOf(ctx, "idle"); err != nil || o.Daemon.Valid || o.LeaseEpoch != 0 {
		t.Fatalf("OwnerOf(idle) = %+v, %v", o, err)
	}
	if _, err := b.OwnerOf(ctx, "nope"); !errors.Is(err, admission.ErrSessionNotFound) {
		t.Fatalf("OwnerOf(nope): %v, want ErrSessionNotFound", err)
	}
	got, ok, err := admission.StartedIn(ctx, e.db, "s")
	if err != nil || !ok || got.AdmissionID != run.AdmissionID || got.Daemon.V != a.Daemon || got.Generation() != run.Generation() {
		t.Fatalf("StartedIn(s) = %+v, %v, %v", got, ok, err)
	}
	if _, ok, err := admission.StartedIn(ctx, e.db, "idle"); err != nil || ok {
		t.Fatalf("StartedIn(idle) = %v, %v", ok, err)
	}
	if ids, err := a.OwnedQueued(ctx); err != nil || len(ids) != 1 || ids[0] != "s" {
		t.Fatalf("A's owned queued sessions = %v, %v", ids, err)
	}
	if ids, err := b.OwnedQueued(ctx); err != nil || len(ids) != 0 {
		t.Fatalf("B's owned queued sessions = %v, %v", ids, err)
	}
	if owned, live, err := a.ClusterCounts(ctx); err != nil || owned != 1 || live != 2 {
		t.Fatalf("A's cluster counts = %d owned, %d live, %v", owned, live, err)
	}
	// B waits for A's lease (a minute, on the database's clock); A waits
	// for nobody's: B owns nothing.
	if left, ok, err := b.NextOwnerExpiry(ctx); err != nil || !ok || left <= 0 || left > time.Minute {
		t.Fatalf("B's next owner expiry = %v, %v, %v", left, ok, err)
	}
	if left, ok, err := a.NextOwnerExpiry(ctx); err != nil || ok {
		t.Fatalf("A's next owner expiry = %v, %v, %v; want none", left, ok, err)
	}

	if err := b.RequestInterrupt(ctx, "s", run.Generation()); err != nil {
		t.Fatal(err)
	}
	if o, err := a.OwnerOf(ctx, "s"); err != nil || !o.Interrupt.Valid || o.Interrupt.Int64 != run.Generation() {
		t.Fatalf("OwnerOf(s) after the request = %+v, %v", o, err)
	}
	// The answer fence sees the request.
	err = e.db.InTx(ctx, func(tx *store.Tx) error { return run.Execution().CheckAnswerable(tx, cluster.DialectOf(e.db)) })
	if !errors.Is(err, admission.ErrFenced) {
		t.Fatalf("CheckAnswerable after the interrupt request: %v, want ErrFenced", err)
	}
}

// The tool events of unknown admissions, the boot's leftover commands.
func TestLeftoverToolEvents(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.session("s")
	e.admit("s", "in-1", "one")
	run := e.claim("s")
	if err := e.db.InTx(ctx, func(tx *store.Tx) error {
		for _, ev := range []struct {
			typ  protocol.EventType
			call string
		}{{"tool.running", "c1"}, {"tool.completed", "c1"}, {"tool.running", "c2"}, {"message.completed", ""}} {
			if _, err := tx.AppendEvent("s", ev.typ, run.AdmissionID, run.Generation(), map[string]string{"tool_call_id": ev.call}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if rows, err := admission.LeftoverToolEvents(ctx, e.db); err != nil || len(rows) != 0 {
		t.Fatalf("before the crash (started, not unknown): %+v, %v", rows, err)
	}
	e.crash()
	rows, err := admission.LeftoverToolEvents(ctx, e.db)
	if err != nil || len(rows) != 3 {
		t.Fatalf("LeftoverToolEvents = %+v, %v; want the three tool events", rows, err)
	}
	for _, r := range rows {
		if r.SessionID != "s" || r.AdmissionID != run.AdmissionID || (r.Type != "tool.running" && r.Type != "tool.completed") {
			t.Errorf("row %+v", r)
		}
	}
}
